"""What users see, beside the per-collective loop: the loops as a training
program writes them, run by the bench's jax-mpi and jax-gloo paths.

- psum-kept: `y = f(x)` with the psum's result replicated (`out_specs=P()`) and
  kept until the next call replaces it, read back every call: two outputs
  alive at once, as in a training loop (the per-collective loop drops a
  sharded result at once).
- train-step: a data-parallel MLP step as a `jit` user writes it: LAYERS
  dense layers of WIDTH x WIDTH float32, weights stored [in, out] (flax's
  Dense), replicated; a batch of BATCH rows per rank, sharded; plain SGD.
  XLA inserts the gradient all-reduce and combines the LAYERS gradients into
  one. Beside it, to find where the step's time goes: the same step on this
  rank's own rows on one device (compute alone, no collective); the psum of
  LAYERS arrays of the gradients' shape alone (the collective alone); and the
  step with weights stored [out, in] (`h @ w.T`), which XLA partitions
  without a transpose after the all-reduce (docs/benchmarks.md, "The
  training step").
- the fully sharded step (FSDP, issue 54): the same model, its weights and
  their gradients sharded over the ranks on their first axis; each weight
  all-gathered before use, each gradient reduce-scattered, LAYERS of each a
  step. Written with shard_map, as FSDP is by hand, so that these are the
  collectives it makes: `jit` over weights sharded with NamedSharding leaves
  the choice to XLA's propagation, which for this MLP (4 devices) gathered the
  activations as well and all-reduced one weight-sized gradient instead. Beside
  it, its LAYERS all-gathers alone and its LAYERS reduce-scatters alone.
"""
import time

import numpy as np

WIDTH, LAYERS, BATCH = 2048, 3, 32
SMOKE_WIDTH = 256


def _timed(fn, calls: int) -> list:
    """Seconds per call of fn(), each call's result waited for; after two calls not timed."""
    import jax

    for _ in range(2):
        jax.block_until_ready(fn())
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return times


def psum_kept(jax, mesh, rank, sizes, calls_for) -> dict:
    """{bytes: [seconds]} of the psum loop as a training step writes it, from 64 KiB; every result checked."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ...integration.jax_compat import process_local_array, shard_map
    from .inputs import expected, rank_input

    size = jax.process_count()
    f = jax.jit(shard_map()(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    out = {}
    for nbytes in [n for n in sizes if n >= 65536]:
        count = nbytes // 4
        x = process_local_array(NamedSharding(mesh, P("x")), rank_input(count, rank)[None])
        want = expected("all-reduce", count, rank, size)
        state = {"y": f(x)}
        if not np.array_equal(np.asarray(state["y"].addressable_data(0))[0], want):
            raise SystemExit(f"mpi-collectives bench: WRONG result: psum-kept {nbytes} B on rank {rank}")

        def step():
            state["y"] = f(x)  # the previous result stays alive until this one replaces it
            return state["y"]
        out[nbytes] = _timed(step, calls_for(nbytes))
    return out


def _checked(jax, mesh, rank, name, got, want, start):
    """A training step's first result against one device's: its update (the change from `start`)
    within 1e-3 of the reference's, in norm. The ranks and the one device sum the gradient's float32
    terms in different orders (the batch split, the library's or gloo's reduction order, XLA's
    blocking), which moved weights by up to 3.3e-6 in the fully sharded step over gloo (2 ranks, 2-core
    VM), past an elementwise 1e-6; a collective that loses or doubles one rank's part changes the update
    by about 1/ranks of it (6% at 16 ranks) or more. Every rank then learns whether every rank's check
    held, so that one wrong rank ends the launch instead of leaving the others in their next collective."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ...integration.jax_compat import process_local_array, shard_map

    error = float(np.linalg.norm((got - start) - (want - start)) / max(np.linalg.norm(want - start), 1e-30))
    ok = error <= 1e-3
    agree = jax.jit(shard_map()(lambda v: jax.lax.pmin(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    every = int(np.asarray(agree(process_local_array(NamedSharding(mesh, P("x")),
                                                     np.array([[int(ok)]], np.int32))).addressable_data(0)).min())
    if not ok:
        raise SystemExit(f"mpi-collectives bench: WRONG result: train-{name} on rank {rank} (its update "
                         f"{error:.2g} off one device's, in norm; largest difference {np.abs(got - want).max():g})")
    if not every:
        raise SystemExit(f"mpi-collectives bench: WRONG result: train-{name} on another rank (rank {rank}'s held)")


def _mlp(jnp, out_in: bool):
    def loss(params, x, y):
        h = x
        for w in params:
            h = jnp.tanh(h @ w.T if out_in else h @ w)
        return jnp.mean((h - y) ** 2)
    return loss


PARTS = ("step", "step-out-in", "local", "gradients", "step-fsdp", "fsdp-all-gather", "fsdp-reduce-scatter")
FSDP_PARTS = PARTS[4:]


def train_step(jax, mesh, rank, smoke: bool, steps: int, parts=PARTS, rows: int = None) -> dict:
    """{"step", "step-out-in", "local", "gradients": [seconds per step]}, "params": count}, those
    of `parts`; the
    step's parameters after it are checked against the same step computed on one device from
    the global batch (they agree to float32 rounding: the sum's order differs). `rows`: the
    global batch (default BATCH a rank); one rank given a multi-rank run's global batch runs
    the same step's whole work alone (the bench's one-rank row)."""
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ...integration.jax_compat import shard_map

    size = jax.process_count()
    width = SMOKE_WIDTH if smoke else WIDTH
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(LAYERS)]
    rows = BATCH * size if rows is None else rows
    xs = rng.standard_normal((rows, width)).astype(np.float32)
    ys = rng.standard_normal((rows, width)).astype(np.float32)
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("x"))

    def global_array(a, sharding):
        return jax.make_array_from_callback(a.shape, sharding, lambda index: a[index])

    def make_step(out_in):
        loss = _mlp(jnp, out_in)

        @jax.jit
        def step(params, x, y):
            grads = jax.grad(loss)(params, x, y)
            return [p - 0.01 * g for p, g in zip(params, grads)]
        return step

    out = {"params": LAYERS * width * width}
    x, y = global_array(xs, batch), global_array(ys, batch)
    for name, out_in in (("step", False), ("step-out-in", True)):
        if name not in parts:
            continue
        step = make_step(out_in)
        start = [w.T.copy() if out_in else w for w in weights]
        params = [global_array(w, replicated) for w in start]
        once = step(params, x, y)
        got = np.asarray(once[0].addressable_data(0))
        want = np.asarray(step([jnp.asarray(w) for w in start], jnp.asarray(xs), jnp.asarray(ys))[0])
        _checked(jax, mesh, rank, name, got, want, start[0])
        state = {"p": params}

        def run():
            state["p"] = step(state["p"], x, y)
            return state["p"]
        out[name] = _timed(run, steps)

    if "local" in parts:
        # The step's compute alone: this rank's rows on its one device, no collective.
        local_step = make_step(False)
        device = jax.local_devices()[0]
        local = {"p": [jax.device_put(w, device) for w in weights]}
        mine = slice(rank * (rows // size), (rank + 1) * (rows // size))
        lx, ly = jax.device_put(xs[mine], device), jax.device_put(ys[mine], device)

        def run_local():
            local["p"] = local_step(local["p"], lx, ly)
            return local["p"]
        out["local"] = _timed(run_local, steps)

    if "gradients" in parts:
        # The collective alone: one jit that psums LAYERS arrays of the gradients' shape.
        psum = jax.jit(shard_map()(lambda *g: [jax.lax.psum(v, "x") for v in g], mesh=mesh,
                                   in_specs=P("x"), out_specs=P()))
        grads = [global_array(np.tile(w, (size, 1)), batch) for w in weights]
        out["gradients"] = _timed(lambda: psum(*grads), steps)

    if set(parts) & set(FSDP_PARTS) and width % size == 0:  # the first axis divides: 2, 4, 8, 16 ranks
        out.update(_fsdp(jax, mesh, rank, weights, xs, ys, global_array, steps, parts))
    return out


def _fsdp(jax, mesh, rank, weights, xs, ys, global_array, steps, parts) -> dict:
    """The fully sharded step and its collectives alone (see the module's text); its first
    step's weights are checked against the data-parallel step's, computed on one device."""
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ...integration.jax_compat import shard_map

    size = jax.process_count()
    loss = _mlp(jnp, False)
    sharded, batch = NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P("x"))

    def local_step(shards, x, y):
        def local_loss(shards):
            # all_gather's transpose is psum_scatter: the gradient of each shard arrives reduce-scattered.
            full = [jax.lax.all_gather(w, "x", tiled=True) for w in shards]
            return loss(full, x, y) / size  # the mean over every rank's rows
        grads = jax.grad(local_loss)(shards)
        return [w - 0.01 * g for w, g in zip(shards, grads)]

    specs = [P("x", None)] * len(weights)
    step = jax.jit(shard_map()(local_step, mesh=mesh, in_specs=(specs, P("x"), P("x")), out_specs=specs))
    x, y = global_array(xs, batch), global_array(ys, batch)
    params = [global_array(w, sharded) for w in weights]
    once = step(params, x, y)
    got = np.asarray(once[0].addressable_data(0))
    rows = weights[0].shape[0] // size
    want = np.asarray(jax.jit(lambda p, x, y: [w - 0.01 * g for w, g in zip(p, jax.grad(loss)(p, x, y))])(
        [jnp.asarray(w) for w in weights], jnp.asarray(xs), jnp.asarray(ys))[0])[rank * rows:(rank + 1) * rows]
    _checked(jax, mesh, rank, "step-fsdp", got, want, weights[0][rank * rows:(rank + 1) * rows])
    out, state = {}, {"p": params}

    def run():
        state["p"] = step(state["p"], x, y)
        return state["p"]
    if "step-fsdp" in parts:
        out["step-fsdp"] = _timed(run, steps)
    if "fsdp-all-gather" in parts:
        gather = jax.jit(shard_map()(lambda *w: [jax.lax.all_gather(v, "x", tiled=True) for v in w], mesh=mesh,
                                     in_specs=P("x", None), out_specs=P("x", None)))  # a whole weight a rank
        out["fsdp-all-gather"] = _timed(lambda: gather(*params), steps)
    if "fsdp-reduce-scatter" in parts:
        scatter = jax.jit(shard_map()(lambda *g: [jax.lax.psum_scatter(v, "x", tiled=True) for v in g], mesh=mesh,
                                      in_specs=P("x", None), out_specs=P("x", None)))
        # every rank's whole gradient: the global array stacks one weight-sized block a rank
        grads = [global_array(np.tile(w, (size, 1)), sharded) for w in weights]
        out["fsdp-reduce-scatter"] = _timed(lambda: scatter(*grads), steps)
    return out
