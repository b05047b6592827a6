"""Command line: python -m mpi_collectives {libpath,info}."""
import argparse
import json
import sys

from ._paths import libpath


def native_info() -> dict:
    """What the native layer found when it was loaded in this process."""
    from ._mpiabi import ffi, lib

    def s(p):
        return ffi.string(p).decode(errors="replace")

    levels = {-1: "as requested", 0: "single", 1: "funneled", 2: "serialized", 3: "multiple"}
    missing = s(lib.mpic_missing_functions())
    return {
        "wrapper": libpath(),
        "family": s(lib.mpic_family_name()),
        "library": s(lib.mpic_library_path()),
        "why": s(lib.mpic_family_detail()),
        "search": s(lib.mpic_load_report()),
        "missing_functions": missing.split() if missing else [],
        "thread_level_policy": levels.get(lib.mpic_thread_policy_value(), "?"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mpi_collectives")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("libpath", help="print the path to put in MPITRAMPOLINE_LIB")
    p_info = sub.add_parser("info", help="show which MPI library the native layer loads and why")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)

    if args.command == "libpath":
        print(libpath())
        return 0
    info = native_info()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            if key == "missing_functions":
                value = ", ".join(value) or "none"
            print(f"{key:20s} {value}")
    if info["family"] == "none":
        print("mpi-collectives: no usable MPI library was found; set MPI_COLLECTIVES_LIBMPI "
              "to your MPI's libmpi.so, or `pip install mpich`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
