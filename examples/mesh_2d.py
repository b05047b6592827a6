"""A 2-D (data x model) mesh over MPI ranks with NamedSharding: a two-layer
network whose hidden layer is split over the model axis. XLA inserts the
collectives itself (an all-reduce or reduce-scatter over the model axis, an
all-gather for the replicated output); the result is checked bit for bit
against NumPy (small integers in float32: every sum is exact).

    mpiexec -n 4 python examples/mesh_2d.py        # 2 x 2
    mpiexec -n 2 python examples/mesh_2d.py        # 1 x 2
"""
import mpi_collectives

info = mpi_collectives.initialize()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

model = 2 if info.size % 2 == 0 else 1
data = info.size // model
mesh = Mesh(np.array(jax.devices()).reshape(data, model), ("data", "model"))
B, D, H = 8 * data, 16, 8 * model

rng = np.random.default_rng(42)  # the same global arrays on every rank
x = rng.integers(-3, 4, (B, D)).astype(np.float32)
w1 = rng.integers(-3, 4, (D, H)).astype(np.float32)
w2 = rng.integers(-3, 4, (H, D)).astype(np.float32)


def sharded(full, *spec):
    """The global array `full`, each rank contributing the block its devices hold."""
    sharding = NamedSharding(mesh, P(*spec))
    (index,) = sharding.addressable_devices_indices_map(full.shape).values()
    return jax.make_array_from_process_local_data(sharding, full[index], full.shape)


def layer(x, w1, w2):
    return jnp.maximum(x @ w1, 0) @ w2


f = jax.jit(layer, out_shardings=NamedSharding(mesh, P()))
args = (sharded(x, "data", None), sharded(w1, None, "model"), sharded(w2, "model", None))
hlo = f.lower(*args).compile().as_text()
inserted = sorted({op for op in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all") if op in hlo})
y = np.asarray(f(*args).addressable_data(0))
expected = np.maximum(x @ w1, 0) @ w2
ok = np.array_equal(y, expected)
print(f"rank {info.rank}: mesh {data}x{model} (data x model), XLA inserted {', '.join(inserted) or 'nothing'}; "
      f"result {'matches NumPy exactly' if ok else 'WRONG'}", flush=True)
if not ok:
    raise SystemExit(1)
