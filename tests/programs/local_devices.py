"""Every collective with several CPU devices per process (JAX_NUM_CPU_DEVICES,
set by the launching test), over MPI (argv[1] == "mpi", through
mpi_collectives.initialize()) or over JAX's gloo (argv[1] == "gloo").

    python local_devices.py mpi|gloo OUT_DIR

Meshes over all P x L devices: a line in device order, a line in a shuffled
order, a (P, L) grid (one axis across processes, one within each), and a
shuffled grid of the other shape (groups that mix local and remote devices,
unevenly when P != L). On each: psum, pmax, pmin, all_gather (stacked and
tiled), psum_scatter, ppermute, all_to_all, over each axis and over all of
them, in shard_map on float32 and int32; then multi-process pmap, and jit
over sharded arrays (XLA's own all-reduce, all-gather, permute and
all-to-all from sharding alone). Inputs are small integers, so every result
is exact: each is checked here against NumPy on every addressable device, and
its bytes go to OUT_DIR/<backend>-rank<R>.npz for the launching test to
compare with gloo's. Prints "DONE rank R: C checks" at the end.
"""
import itertools
import os
import sys

backend, out_dir = sys.argv[1], sys.argv[2]
from launcher_env import jax_compat, start  # noqa: E402  (the package's jax_compat, without importing it)

jax, rank, size = start(backend)

import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


jnp, lax = jax.numpy, jax.lax
L = jax.local_device_count()
D = jax.device_count()
assert D == L * size, (D, L, size)
N = 240  # per device: divisible by every group size up to 8
devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
perm = np.random.default_rng(7).permutation(D)  # the same on every process
MESHES = {
    "line": Mesh(devices, ("x",)),
    "shuffled": Mesh(devices[perm], ("x",)),
    "grid": Mesh(devices.reshape(size, L), ("p", "l")),
    "shuffled_grid": Mesh(devices[perm].reshape(L, size), ("a", "b")),
}
results, checks = {}, 0


def check(key, got, want):
    global checks
    got = np.asarray(got)
    assert got.shape == want.shape and got.tobytes() == want.astype(got.dtype).tobytes(), (
        f"{key} rank {rank}: got {got.ravel()[:12].tolist()}... want {want.ravel()[:12].tolist()}...")
    results[key] = np.frombuffer(got.tobytes(), np.uint8)
    checks += 1


def value_of(flat_index, dtype):
    """The input of the device at this flat position of the mesh: small integers."""
    return ((flat_index * 31 + np.arange(N)) % 7 - 3).astype(dtype)


def groups(mesh, axes):
    """For each mesh position: (its group's mesh positions in group order, its place in the group)."""
    shape, names = mesh.devices.shape, mesh.axis_names
    on = [names.index(a) for a in axes]
    out = {}
    for pos in np.ndindex(shape):
        members = []
        for sub in itertools.product(*(range(shape[i]) for i in on)):
            q = list(pos)
            for i, s in zip(on, sub):
                q[i] = s
            members.append(tuple(q))
        out[pos] = (members, members.index(pos))
    return out


def collectives(v, axes, g, shift):
    return {
        "psum": lax.psum(v, axes), "pmax": lax.pmax(v, axes), "pmin": lax.pmin(v, axes),
        "all_gather": lax.all_gather(v, axes), "all_gather_tiled": lax.all_gather(v, axes, tiled=True),
        "psum_scatter": lax.psum_scatter(v.reshape(g, -1), axes, scatter_dimension=0),
        "ppermute": lax.ppermute(v, axes, shift),
        "all_to_all": lax.all_to_all(v.reshape(g, -1), axes, 0, 0, tiled=True),
    }


def expected(name, inputs, members, place):
    vs = np.stack([inputs[m] for m in members]).astype(np.int64)
    g = len(members)
    return {
        "psum": vs.sum(0), "pmax": vs.max(0), "pmin": vs.min(0),
        "all_gather": vs, "all_gather_tiled": vs.reshape(-1),
        "psum_scatter": vs.reshape(g, g, -1).sum(0)[place],
        "ppermute": vs[(place - 1) % g],
        "all_to_all": vs.reshape(g, g, -1)[:, place].reshape(g, -1),
    }[name]


def run_mesh(mesh_name, mesh):
    names, shape = mesh.axis_names, mesh.devices.shape
    flat = {pos: i for i, pos in enumerate(np.ndindex(shape))}
    spec = P(*names)
    sharding = NamedSharding(mesh, spec)
    axis_sets = [(a,) for a in names] + ([tuple(names)] if len(names) > 1 else [])
    for dtype in (np.float32, np.int32):
        inputs = {pos: value_of(flat[pos], dtype) for pos in flat}
        full = np.stack([inputs[pos] for pos in np.ndindex(shape)]).reshape(shape + (N,))
        x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index])
        for axes in axis_sets:
            g = int(np.prod([shape[names.index(a)] for a in axes]))
            shift = [(i, (i + 1) % g) for i in range(g)]
            lead = (1,) * len(shape)

            def body(v, axes=axes, g=g, shift=shift, lead=lead):
                out = collectives(v.reshape(N), axes if len(axes) > 1 else axes[0], g, shift)
                return {k: o.reshape(lead + o.shape) for k, o in out.items()}
            f = jax.jit(jax_compat.shard_map()(body, mesh=mesh, in_specs=spec, out_specs=spec))
            out = f(x)
            where = groups(mesh, axes)
            position = {d: pos for pos, d in np.ndenumerate(mesh.devices)}
            for coll, arr in out.items():
                for shard in arr.addressable_shards:
                    pos = position[shard.device]
                    members, place = where[pos]
                    want = expected(coll, inputs, members, place)
                    got = np.asarray(shard.data).reshape(want.shape)
                    check(f"{mesh_name}/{'+'.join(axes)}/{np.dtype(dtype).name}/{coll}/{shard.device.id}", got,
                          want)


def run_pmap():
    full = np.stack([value_of(i, np.float32) for i in range(D)])
    mine = full[rank * L:(rank + 1) * L]  # pmap's devices: jax.devices() order, this process's L
    shift = [(i, (i + 1) % D) for i in range(D)]
    out = jax.pmap(lambda v: collectives(v, "i", D, shift), axis_name="i")(mine)
    order = [d.id for d in jax.local_devices()]
    for coll, arr in out.items():
        arr = np.asarray(arr)
        for i in range(L):
            flat = rank * L + i
            want = expected(coll, {k: full[k] for k in range(D)}, list(range(D)), flat)
            check(f"pmap/{coll}/{order[i]}", arr[i], want)


def run_jit(mesh_name, mesh):
    """Collectives XLA inserts from shardings alone."""
    rows = 4 * D
    full = ((np.arange(rows * 8).reshape(rows, 8) * 13) % 11 - 5).astype(np.float32)
    row_sharded = NamedSharding(mesh, P("x"))
    x = jax.make_array_from_callback(full.shape, row_sharded, lambda index: full[index])
    cases = {
        "column_sums": (lambda a: jnp.sum(a, axis=0), NamedSharding(mesh, P()), full.sum(0)),
        "gram": (lambda a: a.T @ a, NamedSharding(mesh, P()), full.T @ full),
        "replicate": (lambda a: a * 2, NamedSharding(mesh, P()), full * 2),
        "roll": (lambda a: jnp.roll(a, 3, axis=0), row_sharded, np.roll(full, 3, axis=0)),
        "transpose": (lambda a: a.reshape(D, 4, 8).transpose(1, 0, 2).reshape(4, D * 8),
                      NamedSharding(mesh, P(None, "x")), full.reshape(D, 4, 8).transpose(1, 0, 2).reshape(4, D * 8)),
    }
    for name, (fn, out_sharding, want) in cases.items():
        out = jax.jit(fn, out_shardings=out_sharding)(x)
        for shard in out.addressable_shards:
            check(f"jit/{mesh_name}/{name}/{shard.device.id}", shard.data, want[shard.index])


for mesh_name, mesh in MESHES.items():
    run_mesh(mesh_name, mesh)
run_pmap()
run_jit("line", MESHES["line"])
run_jit("shuffled", MESHES["shuffled"])

os.makedirs(out_dir, exist_ok=True)
np.savez(os.path.join(out_dir, f"{backend}-rank{rank}.npz"), **results)
print(f"DONE rank {rank}: {checks} checks", flush=True)
