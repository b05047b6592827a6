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

from ..base import mpi

_SIG = 16  # bytes of the tree signature sent in front of packed data
# A tree whose packed leaves fit in a slot of this size travels in the same
# MPI call as its signature: small trees (a step, a loss, a few metrics) then
# cost one collective instead of two. Larger ones send the signature first,
# in a slot of the same size, so that every rank's first call matches.
_SLOT = 256


_WORLD = None  # (rank, size), once MPI is up: MPI_COMM_WORLD never changes


def _ready():
    global _WORLD
    if _WORLD is None:
        if not mpi.is_initialized():
            if mpi.family() == "none":
                raise RuntimeError("mpi-collectives: " + mpi.not_loaded_message())
            mpi.init()
        _WORLD = mpi.rank_size()
    return _WORLD


_jax_tree = None  # jax.tree_util once imported (an import statement per call costs as much as a leaf)


def _tree_flatten(tree):
    global _jax_tree
    if _jax_tree is None:
        try:
            import jax.tree_util
        except ImportError:  # plain NumPy use: a single array or a flat list
            leaves = tree if isinstance(tree, (list, tuple)) else [tree]
            return leaves, lambda xs: type(tree)(xs) if isinstance(tree, (list, tuple)) else xs[0]
        _jax_tree = jax.tree_util
    leaves, treedef = _jax_tree.tree_flatten(tree)
    return leaves, lambda xs: _jax_tree.tree_unflatten(treedef, xs)


def _host_array(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "is_fully_addressable") and not x.is_fully_addressable:
        return np.asarray(x.addressable_data(0))
    return np.asarray(x)


class _Layout:
    """Where each leaf sits in the packed bytes, and the signature of the
    whole (dtype and shape of every leaf), computed once per structure.

    The packed bytes are one record of a structured dtype with a field per
    leaf: packing is one assignment per leaf into a buffer kept with the
    layout, where slicing, viewing and reshaping bytes cost three NumPy calls
    per leaf; process_allgather reads a field per leaf of every rank's record."""

    def __init__(self, key):
        self.signature_bytes = hashlib.blake2b(repr(key).encode(), digest_size=_SIG).digest()
        self.signature = np.frombuffer(self.signature_bytes, np.uint8)
        self.leaves = []  # (dtype, shape, start, end) in the packed buffer
        offset = _SIG
        for dtype, shape in key:
            offset += -offset % dtype.alignment  # leaves come back as views: keep them aligned
            n = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
            self.leaves.append((dtype, shape, offset, offset + n))
            offset += n
        self.nbytes = offset
        self.one_call = offset <= _SLOT
        # Zeros, then the signature: padding too is compared (assert_equal compares bytes). The
        # helpers send from it and receive into fresh arrays, so it is reused call after call.
        self.packed = np.zeros(max(self.nbytes, _SLOT), np.uint8)
        self.packed[:_SIG] = self.signature
        self.record = None
        try:
            self.record = np.dtype({"names": [f"l{i}" for i in range(len(key))],
                                    "formats": [(dtype, shape) if shape else dtype for dtype, shape in key],
                                    "offsets": [start for _, _, start, _ in self.leaves],
                                    "itemsize": self.nbytes})
        except (TypeError, ValueError):  # a dtype a record cannot hold: byte slices instead
            pass
        self.fields = [f"l{i}" for i in range(len(key))]
        self.inputs = None  # a view of the packed buffer per leaf, for packing by assignment
        if self.record is not None:
            record = self.packed[:self.nbytes].view(self.record).reshape(())
            self.inputs = [record[f] for f in self.fields]


_LAYOUTS = {}


def _key(x):
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype, x.shape
    a = np.asarray(_host_array(x))
    return a.dtype, a.shape


def _pack(leaves):
    """(layout, packed bytes: the signature, then every leaf's bytes)."""
    key = tuple(_key(x) for x in leaves)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _LAYOUTS[key] = _Layout(key)
    if layout.inputs is not None:
        for view, x in zip(layout.inputs, leaves):
            view[...] = x if isinstance(x, (np.ndarray, np.generic)) else _host_array(x)
    else:
        for x, (_, _, start, end) in zip(leaves, layout.leaves):
            layout.packed[start:end] = np.asarray(_host_array(x), order="C").reshape(-1).view(np.uint8)
    return layout, layout.packed


def _unpack(buffer, layout):
    """The leaves, as views of one rank's packed bytes (which nobody else holds):
    one array constructor per leaf, the cheapest view NumPy makes."""
    return [np.ndarray(shape, dtype, buffer, start) for dtype, shape, start, _ in layout.leaves]


def _mismatch(what, ranks):
    raise ValueError(f"mpi-collectives: {what}: the tree's structure, shapes or dtypes differ between "
                     f"processes (rank(s) {ranks} differ from rank 0); every process must pass the same.")


def _allgather_checked(what, layout, packed, size):
    """Every rank's packed bytes, one row per rank, after checking that every
    rank packed the same structure (ValueError on every rank otherwise)."""
    first = mpi.allgather(packed[:_SLOT], size)
    odd = np.flatnonzero((first[:, :_SIG] != first[0, :_SIG]).any(axis=1))
    if odd.size:
        _mismatch(what, odd.tolist())
    if layout.one_call:
        return first
    return mpi.allgather(packed[:layout.nbytes], size)


def broadcast_one_to_all(in_tree, is_source=None):
    """The source process's tree on every process (the source: process 0, or
    the lowest-ranked one passing is_source=True). Leaves come back as NumPy arrays."""
    rank, size = _ready()
    leaves, rebuild = _tree_flatten(in_tree)
    layout, packed = _pack(leaves)
    root = 0
    if is_source is not None:
        flags = mpi.allgather(np.array([1 if is_source else 0], np.uint8), size).reshape(-1)
        if not flags.any():
            raise ValueError("mpi-collectives: broadcast_one_to_all: no process passed is_source=True")
        root = int(np.argmax(flags))
    # The signature first (with the data when both fit one slot): with other
    # shapes the data would not fit the buffers.
    first = mpi.bcast(packed[:_SLOT].copy(), root)
    if first[:_SIG].tobytes() != layout.signature_bytes:
        _mismatch("broadcast_one_to_all", rank)
    packed = first if layout.one_call else mpi.bcast(packed[:layout.nbytes].copy(), root)  # (layout's own)
    return rebuild(_unpack(packed, layout))


def process_allgather(in_tree, tiled=False):
    """Every process's tree, stacked along a new axis 0 (or concatenated along
    axis 0 when tiled=True). Leaves come back as NumPy arrays."""
    _, size = _ready()
    leaves, rebuild = _tree_flatten(in_tree)
    layout, packed = _pack(leaves)
    gathered = _allgather_checked("process_allgather", layout, packed, size)
    if layout.record is not None:  # a field per leaf of one record per rank
        records = np.ascontiguousarray(gathered[:, :layout.nbytes]).view(layout.record).reshape(size)
        stacked = [records[f] for f in layout.fields]
    else:
        stacked = [np.ascontiguousarray(gathered[:, start:end]).view(dtype).reshape((size,) + shape)
                   for dtype, shape, start, end in layout.leaves]
    if tiled:
        stacked = [a.reshape((size * a.shape[1],) + a.shape[2:] if a.ndim > 1 else (size,)) for a in stacked]
    return rebuild(stacked)


def assert_equal(in_tree, fail_message=""):
    """Raise AssertionError on every process unless all processes passed equal trees."""
    _, size = _ready()
    leaves, _ = _tree_flatten(in_tree)
    layout, packed = _pack(leaves)
    gathered = _allgather_checked("assert_equal", layout, packed, size)[:, :layout.nbytes]
    odd = np.flatnonzero((gathered != gathered[0]).any(axis=1))
    if odd.size:
        raise AssertionError(f"{fail_message}. mpi-collectives: rank(s) {odd.tolist()} differ from rank 0.")


def sync_global_devices(name: str) -> None:
    """A barrier that also checks every process reached the one with the same name."""
    _, size = _ready()
    h = np.array([zlib.crc32(name.encode())], np.uint32)
    names = mpi.allgather(h, size).reshape(-1)
    odd = [r for r in range(len(names)) if names[r] != names[0]]
    if odd:
        raise AssertionError(f"sync_global_devices name mismatch ('{name}'): rank(s) {odd} are at another "
                             "sync point than rank 0")


def allreduce(in_tree, op: str = "sum"):
    """Element-wise reduction over processes of every leaf of `in_tree`, by `op`: sum, prod, max,
    min, land, lor, band, bor or bxor. Every process passes the same tree structure, shapes and
    dtypes (NumPy numeric dtypes); leaves come back as NumPy arrays, the same on every process."""
    _ready()
    leaves, rebuild = _tree_flatten(in_tree)
    return rebuild([mpi.allreduce(_host_array(x), op) for x in leaves])


def barrier() -> None:
    """Wait until every process has called it (MPI_Barrier on every rank of the job)."""
    _ready()
    mpi.barrier()
