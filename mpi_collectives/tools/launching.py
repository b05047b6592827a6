"""Starting an MPI job from Python, for the test suite, the scripts and the
bench: the mpiexec beside this Python, the environment Open MPI's launcher
needs on CI's machines, a free port for a gloo coordinator, and a launch with
a timeout that ends the whole job.

This module imports nothing but the standard library, so that scripts and
test programs can load it without importing the package (see standalone.py).
"""
import errno
import os
import signal
import socket
import subprocess
import sys

# Open MPI's launcher refuses root and more ranks than cores unless told;
# CI runs as root on 2 cores. The other MPIs ignore these variables.
OPEN_MPI_ANYWHERE = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",  # Open MPI 5
    "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI 4
}


def allow_open_mpi_anywhere(environ) -> None:
    """Set OPEN_MPI_ANYWHERE in `environ` (os.environ, or a launch's own
    environment), keeping what the user set."""
    for key, value in OPEN_MPI_ANYWHERE.items():
        environ.setdefault(key, value)


def mpiexec_path() -> str:
    """The mpiexec of this Python's venv, so that the MPI launched is the one the venv holds."""
    return os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _ephemeral_range() -> tuple:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _free(port: int) -> bool:
    """Nothing listens on `port` on any interface, IPv4 or IPv6 (JAX's coordinator binds [::])."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((address, port))
        except OSError as e:
            if family == socket.AF_INET6 and e.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                continue  # no IPv6 on this host
            return False
    return True


def free_port() -> int:
    """A port nothing listens on, for a coordinator the launching side chooses, taken from below the
    kernel's ephemeral range: a launcher started right after (Open MPI's prterun, its daemons) binds
    ephemeral ports of its own and once took the one chosen here before JAX's coordinator could
    (CI, openmpi configuration: "Failed to add port to server")."""
    import random

    low, _ = _ephemeral_range()
    candidates = list(range(max(1024, low - 12000), low))
    random.shuffle(candidates)
    for port in candidates[:200]:
        if _free(port):
            return port
    with socket.socket() as s:  # everything tried is taken: the kernel's choice, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(changes=None) -> dict:
    """This process's environment with `changes`, where None removes a variable."""
    full = dict(os.environ)
    for key, value in (changes or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return full


def start(cmd, env=None, cwd=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
    """Popen in a process group of its own, with text output, so that end() reaches every rank."""
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=True)


def end(proc) -> None:
    """SIGKILL the launch's whole process group: killing only mpiexec leaves its
    ranks spinning in MPI (seen with MPICH's Hydra), eating the CPU of whatever
    runs next. Nothing to do when the group is already gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(cmd, env=None, timeout=None, cwd=None, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    """Run a launch to its end with a timeout; never hangs.

    On timeout the whole group is killed and subprocess.TimeoutExpired raised,
    with what the launch wrote until then as its output and stderr. Either
    way, what is left of the group (a rank that outlived mpiexec) is killed."""
    proc = start(cmd, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end(proc)
        try:  # a rank outside the group may still hold the pipes open
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            out, err = "(unavailable: pipes still held open)", ""
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    finally:
        end(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
