"""cffi build script for the native layer (setup.py: cffi_modules).

The module it builds, mpi_collectives._mpiabi, is at once the Python
extension that the package imports and the MPIABI wrapper library that
jaxlib's MPItrampoline dlopens through MPITRAMPOLINE_LIB: one shared object,
so both see the same state. No MPI header is needed: everything the wrapper
knows about MPI comes from the generated tables in native/generated/.
"""
import glob
import os

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
# Relative for setuptools (setup.py's wheel); absolute for a build of its own elsewhere (main, below).
REL = os.path.relpath(HERE) if __name__ != "__main__" else HERE

# The wrapper's own functions that Python calls (entry/python_api.c, and the
# watchers' and stop signal's own in services/ending/, base/loader.c's
# message), through mpi_collectives/base/mpi.py only; mpiabi.h declares the
# MPIABI ones, so C needs only these.
WRAPPER_API = """
    const char *mpic_family_name(void);
    const char *mpic_family_detail(void);
    const char *mpic_library_path(void);
    const char *mpic_load_report(void);
    const char *mpic_load_rule_text(void);
    const char *mpic_passed_over_text(void);
    const char *mpic_missing_functions(void);
    const char *mpic_not_loaded_message(void);
    int mpic_end_job(const char *line);
    int mpic_we_initialized(void);
    int mpic_is_up(void);
    int mpic_abort_launch_before_init(int code);
    int mpic_stop_on_sigterm(int rank, int size);
    int mpic_preemption_grace(int rank, int size, int grace);
    int mpic_stop_grace_words(const char *grace, const char *too_late);
    int mpic_liveness_listen(const char *address, int rank);
    int mpic_thread_policy_value(void);
    int mpic_set_local_devices(int n);
    int mpic_max_local_devices(void);
    int mpic_bind_callers(const int *cpus, int n);
    int mpic_set_node_path(int mode, int collectives, int min_bytes, int max_bytes, int across_nodes, int direct,
                           int round);
    int mpic_set_finalize_waits(double report_s, double limit_s);
    int mpic_callers_moved(void);
    int mpic_set_node_crowded(int yes);
    int mpic_node_windows(int *live, int *kept, long long *bytes, int *returning);
    int mpic_counts(long long *out, int max);
    const char *mpic_counts_name(int which);
    int mpic_trampoline_attached(void);
    int mpic_wait_state(long *waiting, unsigned long *begun);
    int mpic_stall_current(uint64_t *sig, int *comm_id, unsigned *seq, int64_t *started_ns);
    int mpic_stall_describe(uint64_t sig, char *out, int len);
    int mpic_stall_members(int comm_id, int *out, int max);
    int mpic_flight_record(char *out, int len);
    int64_t mpic_monotonic(void);
    int mpic_watch_peers(const int *ranks, const int *pids, int n, int rank, int size, const char *host);
    int mpic_watch_stop(void);
    int mpic_watch_self_prepare(void);
    int mpic_watch_self(const int *ranks, const int *pids, const int *life_fds, int n, int rank, int size,
                        const char *host, const char *job_key);
    int mpic_watch_self_finished(void);
    int mpic_watch_self_quiet(void);
    int mpic_set_init_crash_note(const char *text);
    int mpic_phases_begin_all(void);
    uintptr_t mpic_phases_comm_handle(void);
    int mpic_phases_tag(int64_t phase);
    int mpic_phases_enter(int64_t phase, const char *name, double timeout_s);
    int mpic_phases_given_up(int *out, int max);
    int mpic_phases_settle(const int *triples, int n, double timeout_s);
    int mpic_phases_stuck(char *where, int len);
    int mpic_phases_watchdog(int rank, int size, double hold_s);
    int mpic_phases_beat(int voting);
    int mpic_phases_progress(const char *words);
    int mpic_stop_asked(void);
    int mpic_terminal_keep(int fd);
"""

# What the Python layer calls: the wrapper's own state, and the MPIABI
# functions and constants that initialize() and the host-level helpers use.
# (The whole MPIABI interface is exported for jaxlib; Python needs these.)
PYTHON_API = WRAPPER_API + """

    extern uintptr_t MPIABI_COMM_WORLD;
    extern uintptr_t MPIABI_BYTE, MPIABI_CHAR, MPIABI_C_BOOL;
    extern uintptr_t MPIABI_INT8_T, MPIABI_INT16_T, MPIABI_INT32_T, MPIABI_INT64_T;
    extern uintptr_t MPIABI_UINT8_T, MPIABI_UINT16_T, MPIABI_UINT32_T, MPIABI_UINT64_T;
    extern uintptr_t MPIABI_FLOAT, MPIABI_DOUBLE, MPIABI_C_COMPLEX, MPIABI_C_DOUBLE_COMPLEX;
    extern uintptr_t MPIABI_SUM, MPIABI_PROD, MPIABI_MAX, MPIABI_MIN;
    extern uintptr_t MPIABI_LAND, MPIABI_LOR, MPIABI_BAND, MPIABI_BOR, MPIABI_BXOR;
    extern int MPIABI_THREAD_SINGLE, MPIABI_THREAD_FUNNELED, MPIABI_THREAD_SERIALIZED,
               MPIABI_THREAD_MULTIPLE;
    extern void *MPIABI_IN_PLACE;
    extern int MPIABI_ANY_SOURCE;
    typedef struct { int MPI_SOURCE; int MPI_TAG; int MPI_ERROR; ...; } MPIABI_Status;
    extern MPIABI_Status *MPIABI_STATUS_IGNORE;

    int MPIABI_Init_thread(int *argc, char ***argv, int required, int *provided);
    int MPIABI_Initialized(int *flag);
    int MPIABI_Finalized(int *flag);
    int MPIABI_Finalize(void);
    int MPIABI_Query_thread(int *provided);
    int MPIABI_Comm_rank(uintptr_t comm, int *rank);
    int MPIABI_Comm_size(uintptr_t comm, int *size);
    int MPIABI_Barrier(uintptr_t comm);
    int MPIABI_Bcast(void *buf, int count, uintptr_t datatype, int root, uintptr_t comm);
    int MPIABI_Allgather(const void *sendbuf, int sendcount, uintptr_t sendtype, void *recvbuf,
                         int recvcount, uintptr_t recvtype, uintptr_t comm);
    int MPIABI_Allreduce(const void *sendbuf, void *recvbuf, int count, uintptr_t datatype,
                         uintptr_t op, uintptr_t comm);
    int MPIABI_Get_processor_name(char *name, int *resultlen);
    int MPIABI_Get_library_version(char *version, int *resultlen);
    int MPIABI_Error_string(int errorcode, char *string, int *resultlen);
    int MPIABI_Abort(uintptr_t comm, int errorcode);
    int MPIABI_Isend(const void *buf, int count, uintptr_t datatype, int dest, int tag, uintptr_t comm,
                     uintptr_t *request);
    int MPIABI_Irecv(void *buf, int count, uintptr_t datatype, int source, int tag, uintptr_t comm,
                     uintptr_t *request);
    int MPIABI_Test(uintptr_t *request, int *flag, MPIABI_Status *status);
    int MPIABI_Iprobe(int source, int tag, uintptr_t comm, int *flag, MPIABI_Status *status);
    int MPIABI_Cancel(uintptr_t *request);
    int MPIABI_Request_free(uintptr_t *request);
"""

# Every C file under src/ (entry/ on top, services/ below, base/ at the
# bottom: native/README.md), and every folder there for the headers.
SOURCES = sorted(glob.glob(os.path.join(REL, "src", "**", "*.c"), recursive=True))
INCLUDE_DIRS = sorted({os.path.dirname(p) for p in glob.glob(os.path.join(REL, "src", "**", "*.h"), recursive=True)}
                      ) + [os.path.join(REL, "generated")]

# MPI_COLLECTIVES_SANITIZE=address,undefined (or thread): a build for the sanitizers' tests
# (tests/native/test_sanitizers.py, docs/contributing.md), never a user's: the wrapper then needs the
# sanitizer's runtime preloaded into the process (LD_PRELOAD=$(cc -print-file-name=libasan.so)).
_sanitize = os.environ.get("MPI_COLLECTIVES_SANITIZE", "")
# -fno-wrapv: Python's own flags make signed overflow defined (-fwrapv), and the sanitizer then never checks it.
SANITIZE = ([f"-fsanitize={_sanitize}", "-fno-sanitize-recover=all", "-fno-wrapv", "-fno-omit-frame-pointer", "-g"]
            if _sanitize else [])

# MPI_COLLECTIVES_TEST_HOOKS=1: a build whose MPI_COLLECTIVES_TEST_* variables reach the faults a run
# cannot otherwise (src/base/test_hooks.h; tests/conftest.py's checked_package), never a user's.
TEST_HOOKS = ["-DMPIC_TEST_HOOKS"] if os.environ.get("MPI_COLLECTIVES_TEST_HOOKS") == "1" else []

ffibuilder = cffi.FFI()
ffibuilder.cdef(PYTHON_API)
ffibuilder.set_source(
    "mpi_collectives._mpiabi",
    """
    #define MPIABI_CONST /* the wrapper writes the constants */
    #include "mpiabi.h"
    """ + WRAPPER_API,
    sources=SOURCES,
    include_dirs=INCLUDE_DIRS,
    libraries=["dl"],
    # Only the MPIABI interface and the module's init function are exported.
    extra_compile_args=["-O2", "-fvisibility=hidden", "-Wno-unused-parameter"] + SANITIZE + TEST_HOOKS,
    extra_link_args=SANITIZE,
)

if __name__ == "__main__":
    # python native/build_native.py [DIR]: the wrapper built into DIR (the sanitizers' tests: with
    # MPI_COLLECTIVES_SANITIZE set), its path printed.
    import sys
    print(ffibuilder.compile(tmpdir=sys.argv[1] if len(sys.argv) > 1 else ".", verbose=False))
