"""The stderr the process had when the package was imported (or the one the pytest plugin kept
before pytest captured descriptor 2): every line of the package goes there, not to whatever
descriptor 2 is when it is written. A job-ending line written into pytest's capture file is lost
with the job. The native layer holds the same descriptor (native/src/base/terminal.c)."""
import os

_TERMINAL = 2


def keep(fd: int = None) -> int:
    """Keep a copy of `fd` (default: descriptor 2 now) as the terminal; returns the copy."""
    global _TERMINAL
    try:
        copy = os.dup(2 if fd is None else fd)
        os.set_inheritable(copy, False)
    except OSError:
        return _TERMINAL
    _TERMINAL = copy
    return copy


def fd() -> int:
    return _TERMINAL


keep()
