"""What initialize() changes in the process for speed, each measured in the
benchmark (README "Tunings") and each switched off by its setting:

- CPU binding (MPI_COLLECTIVES_BIND_CPUS): when the ranks on a node all
  share one CPU set (the launcher bound nothing: MPICH's Hydra by default),
  each takes its own slice of it, whole cores first. Unbound, XLA's thread
  pool of each rank spins on every core and steals cycles from the rank
  that is inside MPI (on 2 ranks x 2 cores, a 64 KiB psum took 151 us
  unbound and 65 us bound). Slices follow the node's NUMA domains and
  sockets where the rank count allows (slices()), so that one rank per
  socket gets one socket's cores and memory. A launcher's or user's binding is never
  changed: any difference between the ranks' CPU sets leaves them as
  they are.
- Keeping freed memory (MPI_COLLECTIVES_KEEP_MEMORY): glibc returns every
  freed block over its mmap threshold (32 MiB at most) to the OS, so each
  large output buffer JAX allocates page-faults afresh (a 16 MiB
  all-gather: 24 ms, of which 20 ms was JAX's output buffer; 4.4-5.4 ms
  with freed memory kept). mallopt(M_MMAP_MAX, 0) serves large blocks from
  the heap, where freed ones are reused; M_TRIM_THRESHOLD bounds what is
  kept unused at the heap's top; M_TOP_PAD of a thread heap's size keeps
  the heaps of threads' arenas (XLA's pool threads allocate there) from
  being unmapped whenever they empty (TOP_PAD), on ranks that keep several
  arenas only. Skipped when the user set glibc's malloc
  variables, or when malloc is not glibc's (jemalloc, tcmalloc preloaded).
  On a rank that starts with at most ONE_ARENA_UP_TO CPUs, instead of the pad,
  M_ARENA_MAX=1, so that XLA's pool threads allocate from the main heap
  too, where large freed blocks stay (in a thread's own arena, of at most
  64 MiB per heap, they were unmapped and page-faulted again: a 64 MiB
  all-reduce took 80 ms, 27 ms in one arena). The main heap needs no pad
  (the trim threshold keeps its top), and the pad costs every small call:
  a top chunk of 64 MiB makes each free next to it consolidate glibc's fast
  bins (FASTBIN_CONSOLIDATION_THRESHOLD), and an 8-byte psum loop took
  8.3-10.0 us a call with the pad and 7.4-7.9 without (2 ranks of 1 CPU,
  Debian's Open MPI; perf: malloc_consolidate and unlink_chunk 7.5% of the
  rank's time against 2%), as a 16 MiB one took the same either way. glibc fixes its arena limit
  when the first thread asks for an arena, so this comes before MPI and JAX
  start threads, before binding: the CPU set the rank starts with decides. With more CPUs per rank, contention on
  the one arena's lock could cost more; it is left at glibc's default.

The thread pool's size is fixed when JAX creates its backend, from the
CPU set of the thread that creates it: binding must come before that,
which initialize() guarantees.
"""
import ctypes
import ctypes.util
import functools
import os

from ..base.topology import Topology

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX, M_ARENA_MAX = -1, -2, -4, -8
ONE_ARENA_UP_TO = 4  # CPUs of a rank: where one malloc arena was measured (1 and 2 CPUs), and more
TRIM_THRESHOLD = 1 << 30  # unused memory kept at the heap's top, at most
# A thread's arena is made of heaps of at most 64 MiB (glibc's HEAP_MAX_SIZE on 64-bit); glibc
# unmaps such a heap as soon as all of it is free, whatever the trim threshold, unless the top
# pad is at least a heap's size. XLA's pool threads allocate collectives' output buffers from
# their own arenas: without the pad, a psum of three 16 MiB gradients page-faulted its 48 MiB
# afresh on every call (2 ranks, 8 CPUs each: 53-58 ms against 23-25 ms with it; a 16-core
# node's 16 ranks: 139 ms against the C loop's 87).
TOP_PAD = 64 << 20
CALLERS_ONLY = 2          # MPI_COLLECTIVES_BIND_CPUS=2: only the threads that call MPI move
_GLIBC_MALLOC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_",
                           "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")


# ---- keeping freed memory ----

@functools.lru_cache(maxsize=None)
def _glibc():
    """glibc, when it is the malloc this process uses; else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        default = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc's own: musl and others lack it
    except (OSError, AttributeError):
        return None
    ours = ctypes.cast(default.malloc, ctypes.c_void_p).value
    theirs = ctypes.cast(libc.malloc, ctypes.c_void_p).value
    if ours == theirs:
        return libc
    # The addresses differ in two cases: another malloc comes first (jemalloc or tcmalloc
    # preloaded), or the executable is not position-independent and its own code takes
    # malloc's address (Ubuntu's and Debian's /usr/bin/python3): the linker then makes the
    # executable's PLT entry malloc's address for everyone, though glibc's malloc serves every
    # call. Only glibc's own accounting tells them apart.
    return libc if _served_by_glibc(default.malloc, default.free, libc) else None


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]


class _MallInfo(ctypes.Structure):  # glibc before 2.33: the same fields as int
    _fields_ = [(name, ctypes.c_int) for name, _ in _MallInfo2._fields_]


PROBE_BYTES = 96 << 10  # below glibc's smallest mmap threshold (128 KiB), so it comes from an arena


def _served_by_glibc(malloc, free, libc, tries=3) -> bool:
    """Whether a block taken through `malloc` (the process's malloc, whatever its address) shows
    up in glibc's own count of bytes in use. Another malloc's blocks never do; glibc's always do,
    unless another thread frees as much at the same moment, hence a few tries."""
    try:
        mallinfo, struct, bits = libc.mallinfo2, _MallInfo2, 64
    except AttributeError:
        mallinfo, struct, bits = libc.mallinfo, _MallInfo, 32
    mallinfo.restype, mallinfo.argtypes = struct, []
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]

    def in_use():
        info = mallinfo()
        return info.uordblks + info.hblkhd

    for _ in range(tries):
        before = in_use()
        block = malloc(PROBE_BYTES)
        after = in_use()
        free(block)
        if block and (after - before) % (1 << bits) >= PROBE_BYTES:  # int fields wrap past 2 GiB
            return True
    return False


def keep_memory_reason(environ=os.environ):
    """Why freed memory cannot or must not be kept (None: it can)."""
    users = [v for v in _GLIBC_MALLOC_VARIABLES if v in environ]
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        users.append("GLIBC_TUNABLES")
    if users:
        return f"left to your {', '.join(users)}"
    if _glibc() is None:
        return "malloc is not glibc's"
    return None


def several_arenas(cpus: int = None) -> bool:
    """Whether a rank starting on `cpus` CPUs (default: this process's) keeps glibc's arenas, one
    per thread up to glibc's limit: more than ONE_ARENA_UP_TO CPUs (one_arena() sets one below)."""
    return (len(os.sched_getaffinity(0)) if cpus is None else cpus) > ONE_ARENA_UP_TO


def keep_freed_memory(enabled=True, apply=True, environ=os.environ) -> str:
    """Apply it (with apply=False only decide); what was done, in words for Info and the log."""
    if not enabled:
        return "keep-memory: off (MPI_COLLECTIVES_KEEP_MEMORY=0)"
    reason = keep_memory_reason(environ)
    if reason:
        return f"keep-memory: not applied ({reason})"
    pad = several_arenas()  # thread arenas' heaps to keep; one arena needs no pad (the module's text)
    shown = f"M_MMAP_MAX=0, M_TRIM_THRESHOLD={TRIM_THRESHOLD}" + (f", M_TOP_PAD={TOP_PAD}" if pad else "")
    if not apply:
        return f"keep-memory: would set {shown}"
    libc = _glibc()
    if not (libc.mallopt(M_MMAP_MAX, 0) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
            and (not pad or libc.mallopt(M_TOP_PAD, TOP_PAD))):
        return "keep-memory: not applied (mallopt refused)"
    return f"keep-memory: mallopt {shown}"


def one_arena(kept: str, apply=True) -> str:
    """Right after keep_freed_memory applied (or, with apply=False, would apply), before any thread:
    M_ARENA_MAX=1 on a rank with few CPUs. "" when keeping memory is off or not applied."""
    if not kept.startswith(("keep-memory: mallopt", "keep-memory: would set")):
        return ""
    cpus = len(os.sched_getaffinity(0))
    if several_arenas(cpus):
        return f"one-arena: not applied ({cpus} CPUs, more than {ONE_ARENA_UP_TO})"
    if not apply:
        return f"one-arena: would set M_ARENA_MAX=1 ({cpus} CPU{'' if cpus == 1 else 's'})"
    if not _glibc().mallopt(M_ARENA_MAX, 1):
        return "one-arena: not applied (mallopt refused)"
    return f"one-arena: mallopt M_ARENA_MAX=1 ({cpus} CPU{'' if cpus == 1 else 's'})"


# ---- CPU binding ----

def _even(units, parts: int) -> list:
    """`units` (lists of CPUs) cut into `parts` runs of adjacent units, as even as their count
    allows (the first runs take one more when they do not divide)."""
    each, extra = divmod(len(units), parts)
    out, start = [], 0
    for r in range(parts):
        take = each + (1 if r < extra else 0)
        out.append(sorted(cpu for unit in units[start:start + take] for cpu in unit))
        start += take
    return out


def slices(cpus, local_size: int, topology=None):
    """`cpus` (one shared set) cut into local_size slices of whole cores, as even as the count
    of cores allows; by single CPUs when there are fewer cores than ranks, or the topology cannot
    be read. A slice never spans two NUMA domains (or, where the kernel names none, two sockets)
    when the ranks are as many as the domains, or a multiple of them, or a divisor of them (then
    each takes whole adjacent domains: one socket each, for 2 ranks on 2 sockets of 2 domains):
    memory stays local to the rank that uses it. Other counts cut the node evenly, across a
    domain's edge where they must. `topology`: base.topology.Topology (default: this node's)."""
    topology = topology if topology is not None else Topology.read()
    domains = topology.domains(cpus)
    cores = [core for domain in domains for core in domain]
    if len(cores) < local_size:  # fewer cores than ranks: by single CPUs, in the same order
        return _even([[cpu] for core in cores for cpu in core], local_size)
    count = len(domains)
    if count > 1 and local_size % count == 0 and all(len(d) >= local_size // count for d in domains):
        return [s for domain in domains for s in _even(domain, local_size // count)]
    if count > 1 and count % local_size == 0:
        per = count // local_size
        return [sorted(cpu for domain in domains[i * per:(i + 1) * per] for core in domain for cpu in core)
                for i in range(local_size)]
    return _even(cores, local_size)


def binding_for(rank: int, records) -> tuple:
    """(this rank's new CPU set or None, why): from every rank's (host, CPU set)."""
    host, mine = records[rank]
    local = [r for r, (h, _) in enumerate(records) if h == host]
    if len(local) < 2:
        return None, "one rank on this node"
    if any(records[r][1] != mine for r in local):
        return None, "the launcher or you bound the ranks already"
    if len(mine) < len(local):
        return None, f"{len(local)} ranks share {len(mine)} CPUs"
    return set(slices(mine, len(local))[local.index(rank)]), f"{len(local)} ranks on this node"


def bind_cpus(rank: int, placements, enabled=True, apply=True, bind_callers=None, source="") -> str:
    """Bind this thread (and the threads it starts later: JAX's) to its slice of the node's CPUs,
    decided from every rank's host and CPU set (`placements`: layout.gather()'s, an exchange every
    rank makes whatever its setting). With enabled == CALLERS_ONLY, bind_callers(slice) instead:
    the wrapper moves only the threads that call MPI. `source`: where `enabled` came from, when
    not from you. What was done, in words."""
    cpus = os.sched_getaffinity(0)
    records = [(p.host, p.cpus) for p in placements]
    if not enabled:
        return f"bind-cpus: off ({source or 'MPI_COLLECTIVES_BIND_CPUS=0'})"
    callers_only = enabled == CALLERS_ONLY
    chosen, why = binding_for(rank, records)
    why = f"{why}; {source}" if source else why
    if chosen is None:
        return f"bind-cpus: not applied ({why})"
    who = "the threads that call MPI" if callers_only else "the process"
    if not apply:
        return f"bind-cpus: would bind {who} of rank {rank} to CPUs {_ranges(chosen)} of {_ranges(cpus)} ({why})"
    if callers_only:  # the wrapper moves each calling thread itself, at its first call
        bind_callers(chosen)
        return f"bind-cpus: threads that call MPI to CPUs {_ranges(chosen)} of {_ranges(cpus)}, " \
               f"XLA's other threads on all ({why})"
    try:
        os.sched_setaffinity(0, chosen)
    except OSError as e:  # CPUs taken away meanwhile (cgroups): run as the launcher left us
        return f"bind-cpus: not applied (sched_setaffinity: {e.strerror})"
    return f"bind-cpus: CPUs {_ranges(chosen)} of {_ranges(cpus)} ({why})"


def _ranges(cpus) -> str:
    """1,2,3,7 -> '1-3,7'."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(c)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
