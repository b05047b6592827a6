"""Where the native layer is, found without loading it (loading it loads MPI)."""
import importlib.util
import os


def not_built() -> RuntimeError:
    """The one sentence for a package whose native layer is missing: a source checkout that shadows the
    installed package (the current folder comes first in sys.path), or an install without it."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package's folder
    if os.path.exists(os.path.join(os.path.dirname(here), "native", "build_native.py")):
        return RuntimeError(
            f"mpi-collectives: imported from the source checkout {os.path.dirname(here)}, where "
            "the native layer is not built; run from another directory (the installed package "
            "is shadowed here) or build in place with `pip install -e .`")
    return RuntimeError(
        "mpi-collectives: the native layer mpi_collectives._mpiabi is not built; "
        "reinstall the package with `pip install .` (it needs a C compiler, not MPI)")


def libpath() -> str:
    """Absolute path of the wrapper library to put in MPITRAMPOLINE_LIB."""
    spec = importlib.util.find_spec("mpi_collectives._mpiabi")
    if spec is None or not spec.origin:
        raise not_built()
    return os.path.abspath(spec.origin)


def search_prefixes() -> list:
    """Installation prefixes where a wheel's libmpi may be, most specific first."""
    import site
    import sys

    prefixes = [sys.prefix, getattr(site, "USER_BASE", None), sys.base_prefix]
    return [p for i, p in enumerate(prefixes) if p and p not in prefixes[:i]]


def publish_search_prefixes() -> None:
    """Tell the native layer (which cannot see sys.prefix) where to look.

    Set before the native layer is first loaded, in this process or (through
    the environment) in any process it starts. An existing value is kept.
    """
    os.environ.setdefault("MPI_COLLECTIVES_PREFIXES", os.pathsep.join(search_prefixes()))
