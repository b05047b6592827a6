"""The error initialize() raises for a problem with the set-up (its own
module, so that every module of the start-up can raise it), and the line
that ends a process for one."""


class InitializeError(RuntimeError):
    """A problem with the set-up; the message names the cause and the fix."""


def error_line(text: str) -> str:
    """The one line a process or job ends with for an error's sentence `text` (with or without the
    package's prefix): `mpi-collectives: error: <sentence>`, on one line, as docs/troubleshooting.md
    promises for every line that ends a job."""
    text = " ".join(text.split())
    text = text.removeprefix("mpi-collectives:").strip()
    return "mpi-collectives: error: " + text.removeprefix("error:").strip()
