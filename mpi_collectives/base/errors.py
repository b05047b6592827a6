"""The error initialize() raises for a problem with the set-up (its own
module, so that every module of the start-up can raise it)."""


class InitializeError(RuntimeError):
    """A problem with the set-up; the message names the cause and the fix."""
