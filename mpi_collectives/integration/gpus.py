"""Which GPUs a rank takes on a GPU node: what JAX's own start gives.

JAX's `jax.distributed.initialize()` under Slurm, Open MPI or mpi4py gives
each process the GPU of its local rank (`local_device_ids=[local_process_id]`,
jax/_src/clusters/cluster.py); initialize() passes the coordinator, rank and
size itself, so JAX's cluster detection never runs and, without this, every
rank of a node took every GPU (2 ranks on a 1-GPU node both listed it). The
decision, made once MPI is up and before JAX creates any backend:

- the user chose (`local_device_ids=` or JAX's own `JAX_LOCAL_DEVICE_IDS`):
  that, untouched;
- no GPU JAX could use (no CUDA plugin installed, `JAX_PLATFORMS` without
  cuda, no device): nothing to decide;
- as many GPUs as ranks on the node, or a multiple: each rank its local
  rank's share (local rank r of n with g GPUs: g/n of them, from r*g/n);
- fewer GPUs than ranks, or a count they do not divide: nothing assigned,
  and one line says that the ranks share them.

The CPU collectives over MPI are not touched: they serve the CPU devices.
"""
import glob
import importlib.util
import os
import re
import socket

import numpy as np

from ..base import log
from ..base.errors import InitializeError

CUDA_PLUGINS = ("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13", "jax_cuda12_plugin", "jax_cuda13_plugin")
HOST_BYTES = 256


def parse_ids(text) -> list:
    """"0,1" (or [0, 1], or 0) -> [0, 1]; anything else is refused with a sentence."""
    if isinstance(text, (list, tuple)):
        text = ",".join(map(str, text))
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise InitializeError(
            f"mpi-collectives: local_device_ids / JAX_LOCAL_DEVICE_IDS is {text!r}, not a comma-separated list of "
            "GPU numbers. Fix: e.g. JAX_LOCAL_DEVICE_IDS=0,1, or leave it unset for one GPU per local rank.")
    return [int(p) for p in parts]


def _cuda_plugin_installed() -> bool:
    for name in CUDA_PLUGINS:
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def visible_gpus(environ=os.environ, device_glob="/dev/nvidia[0-9]*", plugin_installed=None) -> int:
    """The NVIDIA GPUs JAX would use in this process, counted without starting CUDA."""
    platforms = environ.get("JAX_PLATFORMS", "")
    if platforms and not any(p.strip() in ("cuda", "gpu") for p in platforms.split(",")):
        return 0
    if not (_cuda_plugin_installed() if plugin_installed is None else plugin_installed):
        return 0
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        if not ids or ids[0].strip() in ("-1", "NoDevFiles"):
            return 0
        return len(ids)
    return len([d for d in glob.glob(device_glob) if re.fullmatch(r".*/nvidia\d+", d)])


def choose(local_rank: int, local_size: int, gpus: int, chosen=None) -> tuple:
    """(local_device_ids to pass to jax.distributed.initialize or None, the line for Info.tunings; "" when
    there is nothing to say)."""
    if chosen is not None:
        ids = parse_ids(chosen)
        return ids, f"gpus: local_device_ids={','.join(map(str, ids))} (yours)"
    if gpus <= 0:
        return None, ""
    if gpus % local_size == 0:
        each = gpus // local_size
        ids = list(range(local_rank * each, (local_rank + 1) * each))
        which = f"GPU {ids[0]}" if each == 1 else f"GPUs {ids[0]}-{ids[-1]}"
        return ids, f"gpus: {which} of {gpus} (local rank {local_rank} of {local_size}, as JAX's own start gives)"
    return None, (f"gpus: not assigned: {local_size} ranks on this node and {gpus} GPU(s), which they do not "
                  "divide, so every rank sees every GPU and they share them. Fix: as many ranks per node as GPUs "
                  "(or a divisor), or choose with local_device_ids= / JAX_LOCAL_DEVICE_IDS")


def local_rank_size(rank: int, size: int, allgather) -> tuple:
    """(this rank's number among the ranks on its node, how many there are), from every rank's host
    name through one allgather."""
    mine = np.zeros(HOST_BYTES, np.uint8)
    name = socket.gethostname().encode()[:HOST_BYTES - 1]
    mine[:len(name)] = np.frombuffer(name, np.uint8)
    hosts = [bytes(r).split(b"\0", 1)[0] for r in allgather(mine, size).reshape(size, HOST_BYTES)]
    local = [r for r in range(size) if hosts[r] == hosts[rank]]
    return local.index(rank), len(local)


def decide(rank: int, size: int, chosen, allgather) -> tuple:
    """choose() for this rank of the job: (local_device_ids or None, its line). Every rank takes part
    in the same allgathers, so that none waits for another; ranks sharing GPUs are told once per node."""
    here = visible_gpus()
    needed = np.array([here > 0 and chosen is None], np.int8)
    if not allgather(needed, size).any():  # no rank on any node has a GPU to assign
        return choose(0, 1, 0, chosen)
    local_rank, local_size = local_rank_size(rank, size, allgather)
    ids, line = choose(local_rank, local_size, here, chosen)
    if ids is None and line and local_rank == 0:
        log.line(f"mpi-collectives: {line.removeprefix('gpus: ')}")
    return ids, line
