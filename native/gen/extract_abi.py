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
    return os.path.join(os.path.dirname(jaxlib.__file__), "libjax_common.so")


def read_jaxlib_symbols(path):
    with open(path, "rb") as f:
        data = f.read()
    names = set(m.decode() for m in re.findall(rb"MPIX?ABI_[A-Za-z0-9_]+(?=\0)", data))
    # Keep exactly the strings that stand alone (as `strings | grep ^MPIABI_`):
    # the dlsym names, not format strings that merely contain MPIABI_.
    # MPIXABI_* are MPICH extensions (MPIX_Query_cuda_support, ...).
    return sorted(n for n in names if re.fullmatch(r"MPIX?ABI_[A-Za-z0-9_]+", n))


def mpich_include_dir():
    base = sysconfig.get_paths()["data"]
    for d in (os.path.join(base, "include"), os.path.join(sys.prefix, "include")):
        if os.path.exists(os.path.join(d, "mpi_proto.h")):
            return d
    raise SystemExit("extract_abi: MPICH's mpi.h not found; `pip install mpich` first")


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


def constant_kind(name):
    if name in POINTER_CONSTANTS:
        return "pointer"
    if name in FUNCTION_CONSTANTS:
        return "function"
    return None


PROBE_HEAD = r"""
#include <stdio.h>
#include <stdint.h>
#include <mpi.h>
#define INT(n) printf("%s int %d\n", #n, (int)(MPI_##n));
#define HANDLE(n) printf("%s handle 0x%llx\n", #n, (unsigned long long)(uintptr_t)(MPI_##n));
#define POINTER(n) printf("%s pointer %lld\n", #n, (long long)(intptr_t)(MPI_##n));
#define SYMBOL(n, s) printf("%s symbol %s\n", #n, s);
int main(void) {
"""


def handle_kind(include_dir, name):
    """The handle type of MPI_<name>, read off its definition in mpi.h."""
    with open(os.path.join(include_dir, "mpi.h")) as f:
        text = f.read()
    m = re.search(r"#define\s+MPI_%s\s+\(?\(?(MPI_[A-Za-z]+)\)" % re.escape(name), text)
    if m and m.group(1)[4:] in HANDLE_TYPES:
        return m.group(1)[4:]
    m = re.search(r"#define\s+MPI_%s\s+(MPI_[A-Z0-9_]+)\s*$" % re.escape(name), text, re.M)
    if m:  # an alias such as MPI_LONG_LONG -> MPI_LONG_LONG_INT
        return handle_kind(include_dir, m.group(1)[4:])
    return None


def probe_mpich_constants(include_dir, names):
    with open(os.path.join(include_dir, "mpi.h")) as f:
        header = f.read()
    lines = [PROBE_HEAD]
    kinds = {}
    for n in names:
        kind = constant_kind(n)
        if kind == "function":
            continue  # ours: the wrapper implements these at the MPIABI level
        if kind == "pointer":
            if re.search(r"extern\b[^;]*\bMPI_%s\b" % n, header):
                lines.append(f'SYMBOL({n}, "MPI_{n}")')
            else:
                lines.append(f"POINTER({n})")
            continue
        h = handle_kind(include_dir, n)
        if h:
            kinds[n] = h
            lines.append(f"HANDLE({n})")
        else:
            lines.append(f"INT({n})")
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        exe = os.path.join(tmp, "probe")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-fsyntax-only", "-I", include_dir, src], check=True)
        # The probe only prints macro values; it needs no MPI library to link
        # except for the extern pointer variables, which it never touches.
        subprocess.run([cc, "-o", exe, "-I", include_dir, src], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        n, kind, value = line.split()
        if kind == "handle":
            kind = f"handle:{kinds[n]}"
        rows.append(f"{n} {kind} {value}")
    return rows


def render(symbols, prototypes, constants):
    head = "# Generated by native/gen/extract_abi.py; do not edit.\n"
    return {
        "jaxlib_symbols.txt": head + "\n".join(symbols) + "\n",
        "functions.txt": head + "\n".join(prototypes) + "\n",
        "mpich_constants.txt": head + "\n".join(constants) + "\n",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    ap.add_argument("--jaxlib", default=None, help="path of libjax_common.so")
    ap.add_argument("--include", default=None, help="MPICH include directory")
    args = ap.parse_args()

    symbols = read_jaxlib_symbols(args.jaxlib or jaxlib_library())
    functions = ["MPI_" + s[7:] for s in symbols if re.match(r"MPIABI_[A-Z][a-z]", s)]
    functions += ["MPIX_" + s[8:] for s in symbols if re.match(r"MPIXABI_[A-Z][a-z]", s)]
    constants = [s[7:] for s in symbols if re.fullmatch(r"MPIABI_[A-Z0-9_]+", s)]
    include = args.include or mpich_include_dir()
    files = render(symbols, read_prototypes(include, functions),
                   probe_mpich_constants(include, constants))
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
        print("extract_abi: out of date with the installed jaxlib/MPICH: " + ", ".join(stale))
        return 1
    print(f"extract_abi: {len(functions)} functions, {len(constants)} constants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
