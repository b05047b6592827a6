#!/usr/bin/env python3
"""Generate the wrapper's C sources from the committed ABI tables.

Input (native/abi/, written by extract_abi.py):
  functions.txt        the MPI prototypes jaxlib asks for
  jaxlib_symbols.txt   the constants jaxlib asks for
  <family>_constants.txt  each ABI family's values of those constants

Output (native/generated/):
  mpiabi.h             the MPIABI interface as jaxlib sees it: types, constants,
                       prototypes (also used by our conformance harness)
  exports.c.inc        the exported MPIABI_* functions and constants; each
                       function dispatches to the family found at run time
  forwarders.inc       one family-independent forwarder per function, written
                       with the native types of whatever family includes it
  <family>_constants.inc  one family's constant values (NV_*) and the code
                       that fills in the exported constants for it

    python native/gen/generate.py [--check]
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.dirname(HERE)
ABI = os.path.join(NATIVE, "abi")
OUT = os.path.join(NATIVE, "generated")
sys.path.insert(0, HERE)
from extract_abi import FUNCTION_CONSTANTS, HANDLE_TYPES, POINTER_CONSTANTS  # noqa: E402

# Functions written by hand in native/src/special.inc: they register callbacks
# that must see MPIABI handles, or carry the wrapper's own policy.
SPECIAL = {
    "Init", "Init_thread", "Finalize", "Op_create", "Op_free",
    "Comm_create_errhandler", "Win_create_errhandler", "File_create_errhandler",
    "Comm_create_keyval", "Type_create_keyval", "Win_create_keyval",
    "Grequest_start", "Register_datarep", "Is_thread_main", "Comm_split",
}

# Arrays of handles: (function, parameter) -> C expression for the length.
# Non-const arrays are converted both ways; const ones only in.
HANDLE_ARRAYS = {
    ("Waitall", "array_of_requests"): "count",
    ("Testall", "array_of_requests"): "count",
    ("Waitany", "array_of_requests"): "count",
    ("Testany", "array_of_requests"): "count",
    ("Waitsome", "array_of_requests"): "incount",
    ("Testsome", "array_of_requests"): "incount",
    ("Startall", "array_of_requests"): "count",
    ("Type_create_struct", "array_of_types"): "count",
    ("Type_struct", "array_of_types"): "count",
    ("Type_get_contents", "array_of_datatypes"): "max_datatypes",
    ("Comm_spawn_multiple", "array_of_info"): "count",
    ("Alltoallw", "sendtypes"): "FAMILY(alltoallw_count)(comm)",
    ("Alltoallw", "recvtypes"): "FAMILY(alltoallw_count)(comm)",
    ("Ialltoallw", "sendtypes"): "FAMILY(alltoallw_count)(comm)",
    ("Ialltoallw", "recvtypes"): "FAMILY(alltoallw_count)(comm)",
    ("Neighbor_alltoallw", "sendtypes"): "FAMILY(neighbor_count)(comm, 1)",
    ("Neighbor_alltoallw", "recvtypes"): "FAMILY(neighbor_count)(comm, 0)",
    ("Ineighbor_alltoallw", "sendtypes"): "FAMILY(neighbor_count)(comm, 1)",
    ("Ineighbor_alltoallw", "recvtypes"): "FAMILY(neighbor_count)(comm, 0)",
}
STATUS_ARRAYS = {
    "Waitall": "count", "Testall": "count", "Waitsome": "incount", "Testsome": "incount",
}
# Nonblocking calls whose converted handle arrays must outlive the call.
KEEP_UNTIL_COMPLETE = {"Ialltoallw", "Ineighbor_alltoallw"}
# Calls that may complete (and so null) requests.
COMPLETING = {"Wait", "Test", "Waitall", "Testall", "Waitany", "Testany",
              "Waitsome", "Testsome", "Request_free"}
# Handle-freeing calls that must be harmless after MPI_Finalize: XLA frees its
# communicators in teardown after its own atexit MPI_Finalize.
FREES_AFTER_FINALIZE = {
    "Comm_free": "Comm", "Group_free": "Group", "Type_free": "Datatype",
    "Info_free": "Info", "Errhandler_free": "Errhandler", "Request_free": "Request",
    "Win_free": "Win", "Comm_disconnect": "Comm",
}


# Calls in which a rank waits for other ranks. Their exported entry points
# count how many are in progress and how many have begun, so that
# mpi_collectives.peers can tell "this rank has been waiting in MPI for N
# seconds" (and a rank that already finished is why) without a clock read
# on the fast path. XLA's collectives use the first six.
WAITING = {
    "Allreduce", "Allgather", "Reduce_scatter", "Wait", "Sendrecv", "Waitall",
    "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Barrier", "Bcast", "Reduce",
    "Reduce_scatter_block", "Gather", "Gatherv", "Scatter", "Scatterv", "Scan", "Exscan",
    "Sendrecv_replace", "Recv", "Ssend", "Send", "Waitany", "Waitsome", "Probe", "Mprobe", "Mrecv",
}


class Param:
    def __init__(self, text):
        text = text.strip()
        self.suffix = ""
        if text.endswith("[3]"):  # Group_range_incl/excl: int ranges[][3]
            text, self.suffix = text[:-3], "[3]"
        self.array = text.endswith("[]")
        if self.array:
            text = text[:-2]
        m = re.fullmatch(r"(.*?)([A-Za-z_][A-Za-z0-9_]*)", text)
        self.type = " ".join(m.group(1).split()).replace(" *", "*").strip()
        self.name = m.group(2)
        self.const = self.type.startswith("const ")
        base = self.type[6:] if self.const else self.type
        self.depth = base.count("*")
        self.base = base.replace("*", "").strip()

    def abi_decl(self):
        t = abi_type(self.type)
        sep = "" if t.endswith("*") else " "
        return f"{t}{sep}{self.name}{'[]' if self.array else ''}{self.suffix}"

    def handle(self):
        b = self.base[4:] if self.base.startswith("MPI_") else None
        return "Datatype" if b == "Datatype" else (b if b in HANDLE_TYPES else None)


def abi_type(t):
    return re.sub(r"\bMPI_", "MPIABI_", t)


def native_type(t):
    t = re.sub(r"\bMPI_(%s)\b" % "|".join(HANDLE_TYPES), r"NT_\1", t)
    t = re.sub(r"\bMPI_Status\b", "void", t)
    t = re.sub(r"\bMPI_([A-Za-z_]+_function)\b", r"void", t)
    return re.sub(r"\bMPI_", "MPIABI_", t)  # Aint, Count, Offset, Fint: same size


def parse_functions():
    funcs = []
    for line in open(os.path.join(ABI, "functions.txt")):
        if line.startswith("#") or not line.strip():
            continue
        m = re.fullmatch(r"(.+?) ?(MPIX?)_([A-Za-z0-9_]+)\((.*)\)", line.strip())
        ret, prefix, name, args = m.groups()
        params = [] if args == "void" else [Param(a) for a in args.split(", ")]
        # MPI_Send -> Send; the extension MPIX_Query_cuda_support -> X_Query_cuda_support
        funcs.append((ret.strip(), name if prefix == "MPI" else "X_" + name, params))
    return funcs


def exported(name):
    """The symbol jaxlib asks for: MPIABI_Send, MPIXABI_Query_cuda_support."""
    return "MPIXABI_" + name[2:] if name.startswith("X_") else "MPIABI_" + name


def native_symbol(name):
    return "MPIX_" + name[2:] if name.startswith("X_") else "MPI_" + name


def prototype(ret, name, params, prefix):
    args = ", ".join(p.abi_decl() for p in params) or "void"
    full = exported(name) if prefix == "MPIABI_" else prefix + name
    return f"{abi_type(ret)} {full}({args})"


def constant_decl(name):
    if name in POINTER_CONSTANTS:
        return POINTER_CONSTANTS[name]
    if name in FUNCTION_CONSTANTS:
        return FUNCTION_CONSTANTS[name]
    kind = CONSTANT_KINDS.get(name, "int")
    return f"MPIABI_{kind[7:]}" if kind.startswith("handle:") else "int"


# The ABI families, in the order of their MPIC_FAMILY_* numbers (wrapper.h).
FAMILIES = ["mpich", "openmpi", "standard"]


def read_constants(family):
    rows = {}
    for line in open(os.path.join(ABI, f"{family}_constants.txt")):
        if line.startswith("#"):
            continue
        n, kind, value = line.split()
        rows[n] = (kind, value)
    return rows


TABLES = {f: read_constants(f) for f in FAMILIES}
CONSTANT_KINDS = {}
for _table in TABLES.values():
    for _n, (_k, _v) in _table.items():
        if _k.startswith("handle:") or _n not in CONSTANT_KINDS:
            CONSTANT_KINDS[_n] = _k
CONSTANTS = [s[7:] for s in open(os.path.join(ABI, "jaxlib_symbols.txt")).read().split()
             if re.fullmatch(r"MPIABI_[A-Z0-9_]+", s)]

HEADER_TYPES = """\
#include <stddef.h>
#include <stdint.h>

/* Every handle is pointer-sized; the wrapper stores the native handle in it. */
typedef uintptr_t MPIABI_Comm;
typedef uintptr_t MPIABI_Datatype;
typedef uintptr_t MPIABI_Errhandler;
typedef uintptr_t MPIABI_File;
typedef uintptr_t MPIABI_Group;
typedef uintptr_t MPIABI_Info;
typedef uintptr_t MPIABI_Message;
typedef uintptr_t MPIABI_Op;
typedef uintptr_t MPIABI_Request;
typedef uintptr_t MPIABI_Win;
typedef intptr_t MPIABI_Aint;
typedef int64_t MPIABI_Count;
typedef int MPIABI_Fint;
typedef int64_t MPIABI_Offset;

/* 40 bytes: the implementation's own status in front, the public fields after. */
typedef struct {
  union { int ints[6]; char bytes[24]; } mpi_native;
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int mpi_reserved;
} MPIABI_Status;

typedef void MPIABI_User_function(void *invec, void *inoutvec, int *len, MPIABI_Datatype *datatype);
typedef int MPIABI_Comm_copy_attr_function(MPIABI_Comm oldcomm, int comm_keyval, void *extra_state,
                                           void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPIABI_Comm_delete_attr_function(MPIABI_Comm comm, int comm_keyval, void *attribute_val,
                                             void *extra_state);
typedef int MPIABI_Win_copy_attr_function(MPIABI_Win oldwin, int win_keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPIABI_Win_delete_attr_function(MPIABI_Win win, int win_keyval, void *attribute_val,
                                            void *extra_state);
typedef int MPIABI_Type_copy_attr_function(MPIABI_Datatype oldtype, int type_keyval, void *extra_state,
                                           void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int MPIABI_Type_delete_attr_function(MPIABI_Datatype datatype, int type_keyval,
                                             void *attribute_val, void *extra_state);
typedef void MPIABI_Comm_errhandler_function(MPIABI_Comm *comm, int *error_code, ...);
typedef void MPIABI_Win_errhandler_function(MPIABI_Win *win, int *error_code, ...);
typedef void MPIABI_File_errhandler_function(MPIABI_File *file, int *error_code, ...);
typedef int MPIABI_Grequest_query_function(void *extra_state, MPIABI_Status *status);
typedef int MPIABI_Grequest_free_function(void *extra_state);
typedef int MPIABI_Grequest_cancel_function(void *extra_state, int complete);
typedef int MPIABI_Datarep_extent_function(MPIABI_Datatype datatype, MPIABI_Aint *extent, void *extra_state);
typedef int MPIABI_Datarep_conversion_function(void *userbuf, MPIABI_Datatype datatype, int count,
                                               void *filebuf, MPIABI_Offset position, void *extra_state);
typedef MPIABI_Comm_copy_attr_function MPIABI_Copy_function;
typedef MPIABI_Comm_delete_attr_function MPIABI_Delete_function;
"""


def gen_header(funcs):
    out = ["/* Generated by native/gen/generate.py from native/abi/; do not edit. */",
           "#ifndef MPI_COLLECTIVES_MPIABI_H", "#define MPI_COLLECTIVES_MPIABI_H", "",
           HEADER_TYPES, "/* Constants: variables the wrapper fills in when it is loaded. */",
           "#ifndef MPIABI_CONST", "#define MPIABI_CONST const", "#endif"]
    for n in CONSTANTS:
        out.append(f"extern {constant_decl(n)} MPIABI_CONST MPIABI_{n};")
    out.append("")
    for ret, name, params in funcs:
        out.append(prototype(ret, name, params, "MPIABI_") + ";")
    out += ["", "#endif"]
    return "\n".join(out) + "\n"


def gen_exports(funcs):
    out = ["/* Generated by native/gen/generate.py; do not edit. Included by wrapper.c. */", ""]
    for n in CONSTANTS:
        out.append(f"MPIABI_EXPORT {constant_decl(n)} MPIABI_{n};")
    out.append("")
    for ret, name, params in funcs:
        args = ", ".join(p.name for p in params)
        out.append("MPIABI_EXPORT " + prototype(ret, name, params, "MPIABI_") + " {")
        if name in WAITING:
            out.append("  int ret;")
            out.append("  mpic_wait_begin();")
            out.append("  switch (mpic_family) {")
            for fam in FAMILIES:
                out.append(f"  case MPIC_FAMILY_{fam.upper()}: ret = {fam}_{name}({args}); break;")
            out.append(f"  default: mpic_not_loaded(\"{native_symbol(name)}\");")
            out.append("  }")
            out.append("  mpic_wait_end();")
            out.append("  return ret;")
            out.append("}")
            continue
        out.append("  switch (mpic_family) {")
        for fam in FAMILIES:
            out.append(f"  case MPIC_FAMILY_{fam.upper()}: return {fam}_{name}({args});")
        out.append(f"  default: mpic_not_loaded(\"{native_symbol(name)}\");")
        out.append("  }")
        out.append("}")
    return "\n".join(out) + "\n"


def forwarder(ret, name, params):
    """Family-independent C for one forwarder (FAMILY() and NT_* from the includer)."""
    pre, call, post, cleanup = [], [], [], []
    for p in params:
        h = p.handle()
        key = (name, p.name)
        if p.base == "MPI_Status":
            if name in STATUS_ARRAYS and p.name == "array_of_statuses":
                n = STATUS_ARRAYS[name]
                pre.append(f"  void *n_{p.name} = FAMILY(statuses_begin)({p.name}, {n});")
                post.append(f"  FAMILY(statuses_end)({p.name}, n_{p.name}, {n});")
            elif p.const:
                pre.append(f"  NS_BUF n_{p.name}_buf;")
                pre.append(f"  const void *n_{p.name} = FAMILY(status_in)({p.name}, &n_{p.name}_buf);")
            else:
                pre.append(f"  NS_BUF n_{p.name}_buf;")
                pre.append(f"  void *n_{p.name} = FAMILY(status_inout_begin)({p.name}, &n_{p.name}_buf);")
                post.append(f"  FAMILY(status_inout_end)({p.name}, n_{p.name});")
            call.append(f"n_{p.name}")
        elif h and key in HANDLE_ARRAYS:
            n = HANDLE_ARRAYS[key]
            keep = name in KEEP_UNTIL_COMPLETE  # the library may read it after we return
            pre.append(f"  int n_{p.name}_len = {n};")
            if not keep:
                pre.append(f"  NT_{h} n_{p.name}_stack[16];")
            stack = "NULL" if keep else f"n_{p.name}_stack"
            pre.append(f"  NT_{h} *n_{p.name} = FAMILY(harray_in_{h})({p.name}, n_{p.name}_len, {stack});")
            if not p.const:
                post.append(f"  FAMILY(harray_out_{h})({p.name}, n_{p.name}_len, n_{p.name});")
            if keep:
                cleanup.append(f"(void *)n_{p.name} != (void *){p.name} ? n_{p.name} : NULL")
            else:
                post.append(f"  FAMILY(harray_free)(n_{p.name}, n_{p.name}_stack, {p.name});")
            call.append(f"n_{p.name}")
        elif h and p.depth == 1:
            # Every single handle pointer is treated as in-out: converting a
            # not-yet-set out value is harmless, and in-out ones need it.
            pre.append(f"  NT_{h} n_{p.name} = {p.name} ? TO_N_{h}(*{p.name}) : (NT_{h})0;")
            call.append(f"{p.name} ? &n_{p.name} : NULL")
            post.append(f"  if ({p.name}) *{p.name} = FROM_N_{h}(n_{p.name});")
        elif h and p.depth == 0:
            call.append(f"TO_N_{h}({p.name})")
        elif h:
            raise SystemExit(f"generate: unhandled handle parameter {name}.{p.name}")
        else:
            call.append(p.name)
    body = []
    rh = ret[4:] if ret.startswith("MPI_") and ret[4:] in HANDLE_TYPES else None
    if name in FREES_AFTER_FINALIZE:
        t = FREES_AFTER_FINALIZE[name]
        p0 = params[0].name
        body.append(f"  if (mpic_mpi_is_finalized()) {{ if ({p0}) *{p0} = FROM_N_{t}(NV_{t.upper()}_NULL); return 0; }}")
    body += pre
    native_call = f"FAMILY(fn).{name}({', '.join(call)})"
    if name in COMPLETING:
        req = "array_of_requests" if any(p.name == "array_of_requests" for p in params) else "request"
        cnt = "1" if req == "request" else [p.name for p in params if p.name in ("count", "incount")][0]
        body.append(f"  uintptr_t *pending = FAMILY(pending_snapshot)({req}, {cnt});")
    if rh:
        body.append(f"  {abi_type(ret)} ret = FROM_N_{rh}({native_call});")
    else:
        body.append(f"  {abi_type(ret)} ret = {native_call};")
    body += post
    if cleanup:
        body.append("  if (ret == 0) FAMILY(keep_until_complete)(request ? *request : 0, "
                    + ", ".join(cleanup) + ");")
    if name in COMPLETING:
        body.append(f"  if (pending) FAMILY(pending_release)(pending, {req}, {cnt});")
    body.append("  return ret;")
    head = "static inline " + prototype(ret, name, params, "FAMILY_") + " {"
    head = head.replace(f"FAMILY_{name}(", f"FAMILY({name})(")
    return "\n".join([head] + body + ["}"])


def native_fn_struct(funcs):
    out = ["struct FAMILY(functions) {"]
    for ret, name, params in funcs:
        args = ", ".join("int (*)[3]" if p.suffix else native_type(p.type) + ("*" if p.array else "")
                         for p in params) or "void"
        out.append(f"  {native_type(ret)} (*{name})({args});")
    out.append("};")
    out.append("static struct FAMILY(functions) FAMILY(fn);")
    out.append("static const char *const FAMILY(fn_names)[] = {")
    out += [f'  "{native_symbol(name)}",' for _, name, _ in funcs]
    out.append("};")
    return "\n".join(out)


def gen_forwarders(funcs):
    out = ["/* Generated by native/gen/generate.py; do not edit.",
           " * Included once per ABI family, after the family's config header has",
           " * defined FAMILY(), the native types NT_* and conversions TO_N_/FROM_N_. */",
           "", native_fn_struct(funcs), "", "#include \"family_helpers.inc\"", "",
           "#include \"special.inc\"", ""]
    for ret, name, params in funcs:
        if name not in SPECIAL:
            out.append(forwarder(ret, name, params))
            out.append("")
    return "\n".join(out)


def gen_family_constants(family, rows):
    """NV_<NAME>, the family's native value of each constant, and
    FAMILY(set_constants)(lib), which fills in the exported MPIABI_* from them.
    Values that are addresses in the library (Open MPI's predefined handles)
    or variables of it are read with dlsym when the library is loaded."""
    out = [f"/* Generated by native/gen/generate.py from native/abi/{family}_constants.txt. */"]
    runtime = []
    for n, (kind, value) in rows.items():
        if kind == "int":
            out.append(f"#define NV_{n} ({value})")
        elif kind.startswith("handle:") and value.startswith("&"):
            t = kind[7:]
            out.append(f"static NT_{t} {family}_nv_{n};")
            out.append(f"#define NV_{n} {family}_nv_{n}")
            runtime.append(f"  {family}_nv_{n} = lib ? (NT_{t})dlsym(lib, \"{value[1:]}\") : (NT_{t})0;")
        elif kind.startswith("handle:"):
            out.append(f"#define NV_{n} ((NT_{kind[7:]})(uintptr_t){value}ULL)")
        elif kind == "pointer":
            out.append(f"#define NV_{n} ((void *)(intptr_t)({value}))")
    out.append("")
    out.append("static void FAMILY(set_constants)(void *lib) {")
    out.append("  (void)lib;")
    out += runtime
    for n in CONSTANTS:
        if n in FUNCTION_CONSTANTS:
            out.append(f"  MPIABI_{n} = mpic_{n.lower()};")
            continue
        kind, value = rows[n]
        decl = constant_decl(n)
        if kind == "int":
            out.append(f"  MPIABI_{n} = NV_{n};")
        elif kind.startswith("handle:"):
            out.append(f"  MPIABI_{n} = FROM_N_{kind[7:]}(NV_{n});")
        elif kind == "pointer":
            out.append(f"  MPIABI_{n} = ({decl})NV_{n};")
        elif kind == "symbol":
            out.append(f"  {{ {decl} *v = lib ? ({decl} *)dlsym(lib, \"{value}\") : NULL; MPIABI_{n} = v ? *v : NULL; }}")
        elif kind == "missing":  # the family has no such constant
            out.append(f"  MPIABI_{n} = 0;")
    out.append("}")
    undef = [f"#undef NV_{n}" for n, (kind, _) in rows.items() if kind in ("int", "pointer") or kind.startswith("handle:")]
    return "\n".join(out) + "\n", "\n".join(["/* Generated: ends the NV_* of one family. */"] + undef) + "\n"


def outputs():
    funcs = parse_functions()
    files = {
        "mpiabi.h": gen_header(funcs),
        "exports.c.inc": gen_exports(funcs),
        "forwarders.inc": gen_forwarders(funcs),
    }
    for fam in FAMILIES:
        files[f"{fam}_constants.inc"], files[f"{fam}_constants_end.inc"] = gen_family_constants(fam, TABLES[fam])
    return files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    stale = []
    for name, text in outputs().items():
        path = os.path.join(OUT, name)
        if args.check:
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(name)
        else:
            os.makedirs(OUT, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("generate: stale generated files: " + ", ".join(stale) +
              "; run python native/gen/generate.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
