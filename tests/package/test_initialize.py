"""mpi_collectives.initialize(): jax.distributed from MPI, and its errors."""
import os
import re
import subprocess
import sys
import time

import pytest

from helpers import (EXPECTED_FAMILY, FAMILY_CONFIG, PROGRAMS, SAME_ON_EVERY_FAMILY, explain, mpiexec_path, mpirun,
                     needs_mpi4py, said_on_every_rank)
from mpi_collectives.tools import launching

# Its answers can differ between jax versions: scripts/test.sh runs it on each jax it tests.
pytestmark = pytest.mark.version_dependent

PROGRAM = os.path.join(PROGRAMS, "init_cases.py")
PY = sys.executable


def launch(case, n=2, env=None, timeout=300):
    base = {"MPI_COLLECTIVES_INIT_TIMEOUT": "60"}
    base.update(env or {})
    return mpirun(n, [PY, PROGRAM, case], env=base, timeout=timeout)


def no_jax_env():
    """As a user's shell would be: nothing set by us or by the test runner."""
    return {"MPITRAMPOLINE_LIB": None, "JAX_CPU_COLLECTIVES_IMPLEMENTATION": None}


@pytest.mark.jax
@pytest.mark.parametrize("n", [2, 4])
def test_initialize_then_psum(n):
    proc = launch("plain", n, env=no_jax_env())
    assert proc.returncode == 0, explain(proc)
    passes = re.findall(r"PASS plain rank (\d+) of (\d+) coordinator (\S+)", proc.stdout)
    assert sorted(int(r) for r, _, _ in passes) == list(range(n)), explain(proc)
    assert {s for _, s, _ in passes} == {str(n)}
    coordinators = {c for _, _, c in passes}
    assert len(coordinators) == 1 and next(iter(coordinators)).startswith("127.0.0.1:"), coordinators
    # Intel MPI's launcher sets HYDRA_BSTRAP_PROXY_ID, which JAX took for an HTTP proxy, warning on
    # every rank that the start may hang.
    assert "JAX detected proxy variable" not in proc.stderr, explain(proc)


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_only_a_real_proxy_variable_keeps_jaxs_warning():
    """A launcher's variables alone turn JAX's proxy check off; an HTTP proxy beside them keeps it."""
    import jax

    from mpi_collectives.integration.jax_compat import quiet_launchers_proxy_warning
    try:
        assert jax.config._read("jax_check_proxy_envs")
    except (AttributeError, KeyError):
        pytest.skip(f"jax {jax.__version__} has no proxy check")
    try:
        assert not quiet_launchers_proxy_warning({"PATH": "/bin"})
        assert not quiet_launchers_proxy_warning({"HYDRA_BSTRAP_PROXY_ID": "0", "https_proxy": "http://p:3128"})
        assert jax.config._read("jax_check_proxy_envs")
        assert quiet_launchers_proxy_warning({"HYDRA_BSTRAP_PROXY_ID": "0", "PATH": "/bin"})
        assert not jax.config._read("jax_check_proxy_envs")
    finally:
        jax.config.update("jax_check_proxy_envs", True)


@pytest.mark.jax
def test_two_jobs_on_one_node_do_not_collide():
    """Each job's rank 0 binds its own port: both start at once and both pass."""
    cmd = [mpiexec_path(), "-n", "2", PY, PROGRAM, "plain"]
    env = dict(os.environ, MPI_COLLECTIVES_INIT_TIMEOUT="120")
    jobs = [launching.start(cmd, env=env) for _ in range(2)]
    outs = []
    for job in jobs:
        try:
            outs.append(job.communicate(timeout=300) + (job.returncode,))
        except subprocess.TimeoutExpired:
            for j in jobs:
                launching.end(j)
            pytest.fail("two concurrent jobs timed out")
    for out, err, rc in outs:
        assert rc == 0 and out.count("PASS plain") == 2, f"exit {rc}\n{out}\n{err}"
    ports = [set(re.findall(r"coordinator (\S+)", out)) for out, _, _ in outs]
    assert ports[0] != ports[1], ports


@pytest.mark.jax
def test_jax_imported_too_early_is_one_clear_error_on_every_rank():
    proc = launch("jax-too-early", env=no_jax_env())
    assert proc.returncode != 0, explain(proc)
    assert said_on_every_rank(proc, "mpi-collectives: error: jax was imported before MPITRAMPOLINE_LIB was set", 2), \
        explain(proc)
    assert "python -m mpi_collectives run" in proc.stderr


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_run_command_makes_the_early_import_work():
    cmd = [PY, "-m", "mpi_collectives", "run", PROGRAM, "jax-too-early"]
    proc = mpirun(2, cmd, env=no_jax_env())
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_initialize_after_backend_exists_is_an_error():
    proc = launch("backend-exists")
    assert proc.returncode != 0, explain(proc)
    assert said_on_every_rank(proc, "mpi-collectives: error: initialize() was called after JAX created its backend",
                              2), explain(proc)
    assert "a JAX computation ran before initialize()" in proc.stderr, explain(proc)
    assert "mpi-collectives run --initialize script.py" in proc.stderr, explain(proc)


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_no_mpi_library_is_an_error():
    proc = launch("plain", env={"MPI_COLLECTIVES_LIBMPI": "/nonexistent/libmpi.so.12"})
    assert proc.returncode != 0, explain(proc)
    assert "/nonexistent/libmpi.so.12" in proc.stderr and "MPI_COLLECTIVES_LIBMPI" in proc.stderr, explain(proc)


@pytest.mark.jax
def test_ranks_with_different_versions_are_named():
    proc = launch("versions-differ")
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count("ranks run different versions") == 2, explain(proc)
    assert "rank 1 has mpi-collectives=0.0.0-other" in proc.stderr, explain(proc)


@pytest.mark.jax
@pytest.mark.parametrize("missing", [1, 0])
def test_a_rank_that_never_initializes_mpi_stops_the_job(missing):
    """MPI_Init waits for every process, so the others cannot tell which one is missing."""
    proc = launch("missing-rank", n=3, env={"MISSING_RANK": str(missing), "MPI_COLLECTIVES_INIT_TIMEOUT": "5"},
                  timeout=120)
    assert proc.returncode != 0, explain(proc)
    # The first rank to give up ends the job (the launcher kills the rest), so one line or more.
    assert proc.stderr.count("MPI_Init did not complete within 5 s") >= 1, explain(proc)
    assert "PASS" not in proc.stdout


@pytest.mark.jax
@needs_mpi4py
@pytest.mark.parametrize("missing", [1, 0])
def test_a_rank_that_never_calls_initialize_is_named(missing):
    """With MPI already up (mpi4py), initialize() itself names the missing rank."""
    proc = launch("missing-rank-mpi4py", n=3,
                  env={"MISSING_RANK": str(missing), "MPI_COLLECTIVES_INIT_TIMEOUT": "5"}, timeout=120)
    assert proc.returncode != 0, explain(proc)
    if missing == 1:
        assert "rank(s) 1 of 3 had not called it" in proc.stderr, explain(proc)
    else:
        assert proc.stderr.count("rank 0 never called it") >= 1, explain(proc)
    assert "PASS" not in proc.stdout


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_coordinator_port_in_use_is_named():
    """JAX's coordinator service segfaults on a port that is taken: we say so first, on every rank."""
    import socket
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        address = "127.0.0.1:%d" % squatter.getsockname()[1]
        proc = launch("plain", env={"MPI_COLLECTIVES_COORDINATOR": address, "MPI_COLLECTIVES_INIT_TIMEOUT": "10"},
                      timeout=180)
    assert proc.returncode != 0, explain(proc)
    assert proc.stderr.count(f"the coordinator port {address.split(':')[1]} (from MPI_COLLECTIVES_COORDINATOR) "
                             "is already in use") == 2, explain(proc)
    assert "Segmentation" not in proc.stdout + proc.stderr


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_bad_network_interface_is_named():
    proc = launch("plain", env={"MPI_COLLECTIVES_INTERFACE": "nosuchif0"})
    assert proc.returncode != 0, explain(proc)
    assert "MPI_COLLECTIVES_INTERFACE=nosuchif0" in proc.stderr, explain(proc)


@pytest.mark.jax
@needs_mpi4py
@pytest.mark.parametrize("order", ["after", "before"])
def test_mpi4py_and_initialize(order):
    proc = launch(f"mpi4py-{order}")
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)
    assert "Attempting to use an MPI routine" not in proc.stderr


@pytest.mark.jax
def test_plain_jax_distributed_initialize_under_mpiexec(tmp_path):
    """Our cluster environment: no arguments to jax.distributed.initialize()."""
    script = tmp_path / "plain.py"
    script.write_text(
        "import mpi_collectives, jax, numpy as np\n"
        "jax.distributed.initialize()\n"
        "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
        "mesh = Mesh(np.array(jax.devices()), ('x',))\n"
        "from mpi_collectives.integration.jax_compat import process_local_array, shard_map\n"
        "f = jax.jit(shard_map()(lambda x: jax.lax.psum(x, 'x'), mesh=mesh, in_specs=P('x'), out_specs=P()))\n"
        "x = process_local_array(NamedSharding(mesh, P('x')), np.ones((1, 3), np.int32))\n"
        "assert (np.asarray(f(x).addressable_data(0)) == jax.process_count()).all()\n"
        "print('PASS', jax.process_index(), jax.process_count(), flush=True)\n")
    proc = mpirun(2, [PY, str(script)], env=no_jax_env())
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)


@pytest.mark.jax
def test_a_rank_that_raises_ends_the_job_and_is_named():
    import time
    start = time.monotonic()
    proc = launch("rank-raises", n=3, timeout=120)
    assert proc.returncode != 0, explain(proc)
    assert "ValueError: something went wrong on this rank" in proc.stderr, explain(proc)
    assert "rank 1/3 stopped on an uncaught ValueError" in proc.stderr, explain(proc)
    assert time.monotonic() - start < 60, "the job should end soon after the rank fails"
    assert "PASS" not in proc.stdout


@pytest.mark.jax
def test_an_error_of_the_watch_itself_leaves_the_job_running():
    """The thread that watches for a rank that finished early is the package's, not the program's:
    its own error is printed with one line, and the job's collectives run on to a normal end."""
    proc = launch("watcher-fails", timeout=120)
    assert proc.returncode == 0 and proc.stdout.count("PASS watcher-fails") == 2, explain(proc)
    assert "AttributeError: 'NoneType' object has no attribute 'f_code'" in proc.stderr, explain(proc)
    assert proc.stderr.count("mpi-collectives: warning: rank 1/2: the thread that watches for a rank that finished "
                             "the program while the others wait for it stopped on the error above") == 1, explain(proc)
    assert "stopped on an uncaught" not in proc.stderr, explain(proc)


def test_other_ranks_wait_for_the_coordinator_to_listen():
    """Ranks other than 0 connect only once rank 0's coordinator listens: connecting earlier
    sent JAX's client into a one-second back-off in half the launches. A coordinator that
    never listens is left to jax.distributed's timeout after ours."""
    import socket
    import threading
    import time

    from mpi_collectives.services.coordinator import wait_until_listening

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def listen_later():
        time.sleep(0.3)
        server.bind(("127.0.0.1", port))
        server.listen()

    threading.Thread(target=listen_later).start()
    start = time.monotonic()
    wait_until_listening(f"127.0.0.1:{port}", 30)
    waited = time.monotonic() - start
    server.close()
    assert 0.25 <= waited < 5, waited

    start = time.monotonic()
    wait_until_listening(f"127.0.0.1:{port}", 0.5)  # nothing listens now
    assert 0.5 <= time.monotonic() - start < 5


def test_a_port_taken_on_a_second_address_is_tried_again(monkeypatch):
    """Rank 0 listens on one port on every address it offers; where the port the first address
    found is taken on another, it tries a new port. That retry once ended the job with
    "AttributeError: 'Listeners' object has no attribute '_thread'" (the Open MPI cluster run)."""
    import errno
    import socket

    from mpi_collectives.services import coordinator

    taken = []

    class FirstTryTaken(socket.socket):
        def bind(self, address):
            if address[0] == "127.0.0.2" and not taken:
                taken.append(address[1])
                raise OSError(errno.EADDRINUSE, "Address already in use")
            return super().bind(address)

    monkeypatch.setattr(coordinator.socket, "socket", FirstTryTaken)
    listeners = coordinator.Listeners(["127.0.0.1", "127.0.0.2"], 0, None)
    try:
        assert taken and listeners.port != 0
        assert [s.getsockname() for s in listeners.sockets] == [("127.0.0.1", listeners.port),
                                                                 ("127.0.0.2", listeners.port)]
        listeners.accept_in_background()
        # as the other ranks test it (the listener resets what it accepts, so connecting is the answer)
        assert coordinator.reachable(["127.0.0.1", "127.0.0.2"], listeners.port, timeout=5) == [True, True]
    finally:
        listeners.close()
    assert listeners.sockets == [] and listeners._thread is None


def test_a_probe_the_listener_resets_at_once_counts_as_reached():
    """Rank 0's listener accepts each probe and resets it at once; a reset that arrived before the
    prober looked made it call the address unreachable (7-11 of 300 probes of two loopback
    addresses), so a rank could give up on rank 0's only address."""
    from mpi_collectives.services import coordinator

    missed = 0
    for _ in range(300):
        listeners = coordinator.Listeners(["127.0.0.1", "127.0.0.2"], 0, None)
        listeners.accept_in_background()
        try:
            missed += coordinator.reachable(["127.0.0.1", "127.0.0.2"], listeners.port, timeout=5) != [True, True]
        finally:
            listeners.close()
    assert missed == 0


@pytest.mark.jax
# One value on each more family (what its launcher does with an error found before MPI starts).
@pytest.mark.parametrize("variable, value, allowed", [
    ("MPI_COLLECTIVES_PORT", "99999", "a whole number from 0 to 65535")] + ([] if FAMILY_CONFIG else [
    ("MPI_COLLECTIVES_INIT_TIMEOUT", "0", "a whole number from 1 to"),
    ("MPI_COLLECTIVES_INIT_TIMEOUT", "-1", "a whole number from 1 to"),
    ("MPI_COLLECTIVES_ABI", "foo", "one of mpich, openmpi, standard"),
    ("MPI_COLLECTIVES_THREAD_LEVEL", "bogus", "one of single, funneled, serialized, multiple, requested"),
    ("MPI_COLLECTIVES_COORDINATOR", "nohost", "host:port"),
    ("MPI_COLLECTIVES_NODE_PATH_COLLECTIVES", "all-reduce,broadcast",
     "a comma-separated list of all-reduce, all-gather, reduce-scatter, all-to-all"),
]))
def test_a_setting_that_is_not_understood_is_an_error_on_every_rank(variable, value, allowed):
    start = time.monotonic()
    proc = launch("plain", env={variable: value}, timeout=120)
    assert proc.returncode != 0, explain(proc)
    # Every rank says it; Open MPI's launcher may end the job after the first has.
    said = proc.stderr.count(f"{variable}={value} is not {allowed}")
    assert said == 2 or (EXPECTED_FAMILY == "openmpi" and said == 1), explain(proc)
    assert time.monotonic() - start < 30, "an error in a setting must not wait for any timeout"
    assert "PASS" not in proc.stdout


@pytest.mark.jax
def test_a_failure_on_rank_0_during_the_meeting_reaches_every_rank_at_once():
    start = time.monotonic()
    proc = launch("choose-fails", env={"MPI_COLLECTIVES_INIT_TIMEOUT": "300"}, timeout=120)
    assert proc.returncode != 0, explain(proc)
    said = proc.stderr.count("rank 0 could not choose jax.distributed's coordinator: OSError: no addresses")
    assert said == 2 or (EXPECTED_FAMILY == "openmpi" and said == 1), explain(proc)
    assert time.monotonic() - start < 30, "the other ranks must not wait for the init timeout"


@pytest.mark.jax
def test_a_failure_on_another_rank_during_the_meeting_ends_the_job_at_once():
    start = time.monotonic()
    proc = launch("hello-fails", env={"MPI_COLLECTIVES_INIT_TIMEOUT": "300"}, timeout=120)
    assert proc.returncode != 0, explain(proc)
    assert "rank 1/2: initialize() failed while meeting the other ranks: RuntimeError: cannot say hello" in \
        proc.stderr, explain(proc)
    assert time.monotonic() - start < 30, "the other ranks must not wait for the init timeout"


@pytest.mark.jax
def test_prepare_then_psum():
    proc = launch("prepare")
    assert proc.returncode == 0 and proc.stdout.count("PASS") == 2, explain(proc)


@SAME_ON_EVERY_FAMILY
@pytest.mark.jax
def test_coordinator_on_one_host_listens_on_loopback_only(tmp_path):
    """JAX's coordination service has no authentication: with every rank on one host it is
    bound to 127.0.0.1, so the machine's other addresses do not reach it (JAX's default
    was every interface). Across hosts: tests/cluster/test_cluster.py."""
    import socket
    import threading
    import time

    go = tmp_path / "go"
    cmd = [mpiexec_path(), "-n", "2", PY, os.path.join(PROGRAMS, "coordinator_hold.py"), str(go)]
    proc = launching.start(cmd, env=dict(os.environ, MPI_COLLECTIVES_INIT_TIMEOUT="60"))
    errors = []
    threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True).start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "".join(lines).count("READY rank") == 2:
                break
        assert "".join(lines).count("READY rank") == 2, "".join(lines + errors)
        host, port = re.search(r"coordinator (\d+\.\d+\.\d+\.\d+):(\d+)", "".join(lines)).groups()
        assert host == "127.0.0.1", lines
        from mpi_collectives.services.coordinator import own_addresses  # (every interface's, from the kernel: no `ip`)
        others = own_addresses()
        reach = {}
        for address in ["127.0.0.1"] + [a for a in others if not a.startswith("127.")]:
            try:
                socket.create_connection((address, int(port)), timeout=3).close()
                reach[address] = "connected"
            except OSError as e:
                reach[address] = type(e).__name__
    finally:
        go.write_text("")
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            launching.end(proc)
            out, _ = proc.communicate()
        time.sleep(0.1)
    lines.append(out)
    assert proc.returncode == 0, "".join(lines + errors)
    assert "".join(lines).count("DONE rank") == 2, "".join(lines + errors)
    assert reach.pop("127.0.0.1") == "connected", reach
    assert all(r == "ConnectionRefusedError" for r in reach.values()), reach


def test_initialize_takes_every_setting_as_a_keyword():
    """initialize()'s keyword arguments are exactly the settings table's rows (the docs' API
    reference reads them from its signature)."""
    import inspect

    from mpi_collectives import initialize

    from mpi_collectives.base import settings
    params = inspect.signature(initialize).parameters
    assert list(params) == list(settings.TABLE), list(params)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None for p in params.values())
