"""What a float16 psum over MPI costs (mpi_collectives/integration/narrow_dtypes.py reduces
it in float32) against a float32 psum of the same element count, and against
gloo's float16 psum. Run under mpiexec, in a venv with this package:

    mpiexec -n 2 python scripts/narrow_dtypes_bench.py [--bytes 1048576] [--reps 200] [--json out.json]
    mpiexec -n 2 python scripts/narrow_dtypes_bench.py --gloo    # the same over gloo (no mpi_collectives)

Prints, on rank 0, the median time of one jitted shard_map psum per dtype
(the float16 array is --bytes long; float32 has as many elements), and
bfloat16 (which XLA reduces over MPI by itself) for reference.
"""
import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--bytes", type=int, default=1 << 20, help="size of the float16 array per rank")
parser.add_argument("--reps", type=int, default=200)
parser.add_argument("--gloo", action="store_true", help="over JAX's gloo instead (port: MPI_COLLECTIVES_TEST_PORT)")
parser.add_argument("--json", help="also write the numbers here (rank 0)")
args = parser.parse_args()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backends  # noqa: E402  (scripts/backends.py)

jax, rank, size = backends.start("gloo" if args.gloo else "mpi", os.environ.get("MPI_COLLECTIVES_TEST_PORT", "12391"))
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))
count = args.bytes // 2
psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
results = {}
for name in ("float16", "float32", "bfloat16"):
    dtype = jax.numpy.dtype(name)
    local = (np.arange(count) % 7).astype(dtype)[None]
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
    out = psum(x)
    np.testing.assert_array_equal(np.asarray(out.addressable_data(0)).astype(np.float32),
                                  local.astype(np.float32) * size)
    for _ in range(10):
        psum(x).block_until_ready()
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        psum(x).block_until_ready()
        times.append(time.perf_counter() - start)
    results[name] = dict(elements=count, bytes=count * dtype.itemsize, median_us=float(np.median(times) * 1e6),
                         p10_us=float(np.percentile(times, 10) * 1e6), p90_us=float(np.percentile(times, 90) * 1e6))

if rank == 0:
    print(f"psum of {count} elements per rank, {size} ranks over {'gloo' if args.gloo else 'MPI'}, "
          f"{args.reps} reps")
    print("| dtype | bytes per rank | median us | p10 us | p90 us |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['bytes']} | {r['median_us']:.1f} | {r['p10_us']:.1f} | {r['p90_us']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(ranks=size, backend="gloo" if args.gloo else "mpi", results=results), f, indent=1)
