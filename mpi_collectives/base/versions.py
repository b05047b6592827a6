"""Installed versions of the packages every rank of a job must share."""
# What the ranks compare when they meet (meeting.py): a job whose ranks run
# different versions of these is stopped with a message naming them.
SHARED = ("mpi-collectives", "jax", "jaxlib")


def installed(package: str) -> str:
    """The installed version of `package` (its distribution name), or "none"."""
    import importlib.metadata  # (here: 9 ms that `import mpi_collectives` need not pay)
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"
