#!/usr/bin/env bash
# The folder a lent node's probes install from (it has no network), for scripts/node_probe.sh:
#   bash scripts/device_wheels.sh [OUT]        # default: device-wheels/ (ignored by git)
# OUT/new: this checkout's wheel (scripts/build_wheels.sh x86_64: cp310-abi3, any CPython >= 3.10);
# OUT/deps: the mpich wheel and what the C loop compiles with (cffi, pycparser, setuptools), for the
# node's CPython (DEVICE_PYTHON, 3.12) on x86_64. Then, with OUT carried:
#   PROBE_SET=node-path bash scripts/node_probe.sh device-wheels OUT_DIR 16 8
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/device-wheels}
rm -rf "$out" && mkdir -p "$out/new" "$out/deps"
bash "$root/scripts/build_wheels.sh" x86_64 >&2
cp "$root"/dist/mpi_collectives-*-manylinux_2_17_x86_64.whl "$out/new/"
"${PYTHON:-python3}" -m pip download -q --only-binary=:all: --python-version "${DEVICE_PYTHON:-3.12}" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$out/deps" 'mpich>=5' cffi pycparser setuptools >&2
du -sh "$out" >&2
echo "$out"
