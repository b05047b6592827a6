"""cffi build script for the native layer (setup.py: cffi_modules).

The module it builds, mpi_collectives._mpiabi, is at once the Python
extension that the package imports and the MPIABI wrapper library that
jaxlib's MPItrampoline dlopens through MPITRAMPOLINE_LIB: one shared object,
so both see the same state. No MPI header is needed: everything the wrapper
knows about MPI comes from the generated tables in native/generated/.
"""
import os

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
REL = os.path.relpath(HERE)

ffibuilder = cffi.FFI()
# What the Python layer reads; the MPIABI interface itself is for jaxlib.
ffibuilder.cdef("""
    const char *mpic_family_name(void);
    const char *mpic_family_detail(void);
    const char *mpic_library_path(void);
    const char *mpic_load_report(void);
    const char *mpic_missing_functions(void);
    int mpic_we_initialized(void);
    int mpic_thread_policy_value(void);
""")
ffibuilder.set_source(
    "mpi_collectives._mpiabi",
    """
    const char *mpic_family_name(void);
    const char *mpic_family_detail(void);
    const char *mpic_library_path(void);
    const char *mpic_load_report(void);
    const char *mpic_missing_functions(void);
    int mpic_we_initialized(void);
    int mpic_thread_policy_value(void);
    """,
    sources=[os.path.join(REL, "src", "wrapper.c")],
    include_dirs=[os.path.join(REL, "src"), os.path.join(REL, "generated")],
    libraries=["dl"],
    # Only the MPIABI interface and the module's init function are exported.
    extra_compile_args=["-O2", "-fvisibility=hidden", "-Wno-unused-parameter"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
