"""Host-level helpers over MPI, with the names and meaning of
jax.experimental.multihost_utils, for NumPy arrays, JAX arrays and pytrees,
without compiling anything: the leaves of a tree travel packed in one MPI
call. They need MPI only (initialize() is not required; they initialize MPI
themselves if nobody has).

Leaves must have the same shape and dtype on every process, as for
multihost_utils; a mismatch raises ValueError on the processes that see it.
"""
import hashlib
import zlib

import numpy as np

from . import mpi

_SIG = 16  # bytes of the tree signature sent in front of packed data


_WORLD = None  # (rank, size), once MPI is up: MPI_COMM_WORLD never changes


def _ready():
    global _WORLD
    if _WORLD is None:
        ffi, lib = mpi.native()
        flag = ffi.new("int *")
        lib.MPIABI_Initialized(flag)
        if not flag[0]:
            if mpi.family() == "none":
                raise RuntimeError("mpi-collectives: no MPI library could be loaded (" + mpi.load_report().strip()
                                   + "). Fix: set MPI_COLLECTIVES_LIBMPI, or `pip install mpich`.")
            mpi.init()
        _WORLD = mpi.rank_size()
    return _WORLD


def _tree_flatten(tree):
    try:
        import jax
    except ImportError:  # plain NumPy use: a single array or a flat list
        leaves = tree if isinstance(tree, (list, tuple)) else [tree]
        return leaves, lambda xs: type(tree)(xs) if isinstance(tree, (list, tuple)) else xs[0]
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return leaves, lambda xs: jax.tree_util.tree_unflatten(treedef, xs)


def _host_array(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "is_fully_addressable") and not x.is_fully_addressable:
        return np.asarray(x.addressable_data(0))
    return np.asarray(x)


_SIGNATURES = {}  # (dtype, shape) of every leaf -> its signature bytes


def _signature(arrays) -> np.ndarray:
    key = tuple((a.dtype, a.shape) for a in arrays)
    sig = _SIGNATURES.get(key)
    if sig is None:
        digest = hashlib.blake2b(repr(key).encode(), digest_size=_SIG).digest()
        sig = _SIGNATURES[key] = np.frombuffer(digest, np.uint8)
    return sig


def _pack(leaves):
    arrays = [np.asarray(_host_array(x), order="C") for x in leaves]  # (keeps 0-d shapes)
    out = np.empty(_SIG + sum(a.nbytes for a in arrays), np.uint8)
    out[:_SIG] = _signature(arrays)
    offset = _SIG
    for a in arrays:
        out[offset: offset + a.nbytes] = a.reshape(-1).view(np.uint8)
        offset += a.nbytes
    return arrays, out


def _unpack(buffer, like):
    out, offset = [], _SIG
    for a in like:
        n = a.nbytes
        out.append(buffer[offset: offset + n].view(a.dtype).reshape(a.shape).copy())
        offset += n
    return out


def _same_signature(what, packed):
    """Every process packed the same structure, shapes and dtypes (checked on all)."""
    signatures = mpi.allgather(packed[:_SIG].copy())
    odd = [r for r in range(len(signatures)) if signatures[r].tobytes() != signatures[0].tobytes()]
    if odd:
        _mismatch(what, odd)


def _mismatch(what, ranks):
    raise ValueError(f"mpi-collectives: {what}: the tree's structure, shapes or dtypes differ between "
                     f"processes (rank(s) {ranks} differ from rank 0); every process must pass the same.")


def broadcast_one_to_all(in_tree, is_source=None):
    """The source process's tree on every process (the source: process 0, or
    the lowest-ranked one passing is_source=True). Leaves come back as NumPy arrays."""
    rank, size = _ready()
    leaves, rebuild = _tree_flatten(in_tree)
    arrays, packed = _pack(leaves)
    root = 0
    if is_source is not None:
        flags = mpi.allgather(np.array([1 if is_source else 0], np.uint8)).reshape(-1)
        if not flags.any():
            raise ValueError("mpi-collectives: broadcast_one_to_all: no process passed is_source=True")
        root = int(np.argmax(flags))
    # The signature first: with other shapes the data would not fit the buffers.
    if mpi.bcast(packed[:_SIG].copy(), root).tobytes() != packed[:_SIG].tobytes():
        _mismatch("broadcast_one_to_all", rank)
    packed = mpi.bcast(packed, root)
    return rebuild(_unpack(packed, arrays))


def process_allgather(in_tree, tiled=False):
    """Every process's tree, stacked along a new axis 0 (or concatenated along
    axis 0 when tiled=True). Leaves come back as NumPy arrays."""
    _ready()
    leaves, rebuild = _tree_flatten(in_tree)
    arrays, packed = _pack(leaves)
    _same_signature("process_allgather", packed)
    gathered = mpi.allgather(packed)
    per_rank = [_unpack(row, arrays) for row in gathered]
    out = []
    for i, a in enumerate(arrays):
        parts = [p[i] for p in per_rank]
        if tiled:
            out.append(np.concatenate([np.atleast_1d(p) for p in parts], axis=0))
        else:
            out.append(np.stack(parts, axis=0))
    return rebuild(out)


def assert_equal(in_tree, fail_message=""):
    """Raise AssertionError on every process unless all processes passed equal trees."""
    _ready()
    leaves, _ = _tree_flatten(in_tree)
    _, packed = _pack(leaves)
    _same_signature("assert_equal", packed)
    gathered = mpi.allgather(packed)
    odd = [r for r in range(len(gathered)) if not np.array_equal(gathered[r], gathered[0])]
    if odd:
        raise AssertionError(f"{fail_message}. mpi-collectives: rank(s) {odd} differ from rank 0.")


def sync_global_devices(name: str) -> None:
    """A barrier that also checks every process reached the one with the same name."""
    _ready()
    h = np.array([zlib.crc32(name.encode())], np.uint32)
    names = mpi.allgather(h).reshape(-1)
    odd = [r for r in range(len(names)) if names[r] != names[0]]
    if odd:
        raise AssertionError(f"sync_global_devices name mismatch ('{name}'): rank(s) {odd} are at another "
                             "sync point than rank 0")


def allreduce(in_tree, op: str = "sum"):
    """Element-wise reduction over processes (sum, prod, max, min, land, lor, band, bor, bxor)."""
    _ready()
    leaves, rebuild = _tree_flatten(in_tree)
    return rebuild([mpi.allreduce(_host_array(x), op) for x in leaves])


def barrier() -> None:
    _ready()
    mpi.barrier()
