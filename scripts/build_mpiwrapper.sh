#!/usr/bin/env bash
# XLA's own MPI collectives need an MPIwrapper built against the cluster's MPI: what NetKet's
# issue netket#2115 tells CPU users to do (mpibackend4jax builds MPIwrapper inside its wheel with
# CMake and a Fortran compiler). This builds it the same way, against Debian's Open MPI 4.1 (the
# pip mpich wheel has no Fortran bindings, and MPIwrapper's CMake needs them), so that the bench
# can put XLA's own MPI path beside the package's on the same MPI (docs/benchmarks.md):
#   bash scripts/build_mpiwrapper.sh SRC [OUT]     # prints the path of libmpiwrapper.so
# SRC: an MPIwrapper source tree, or a git directory of one (github.com/eschnett/MPIwrapper; CI has
# no copy, so the bench's column appears only where one was built). As root it installs what it
# needs from Debian (openmpi-bin, libopenmpi-dev, gfortran, cmake). OUT: default /tmp/mpiwrapper.
set -euo pipefail
src=${1:?an MPIwrapper source tree or git directory}
out=${2:-/tmp/mpiwrapper}
# (libopenmpi-dev too: Open MPI's runtime alone has mpicc.openmpi but no libmpi.so to link, and CMake's
# first test fails with "cannot find -lmpi")
if [ "$(id -u)" = 0 ] && ! { command -v mpifort.openmpi && command -v gfortran && command -v cmake &&
                             dpkg -s libopenmpi-dev; } > /dev/null 2>&1; then
  { apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi-dev gfortran cmake ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi-dev gfortran cmake; }; } \
    > /tmp/mpiwrapper-apt.log 2>&1 || { echo "build_mpiwrapper.sh: apt-get install failed" >&2; exit 1; }
fi
rm -rf "$out" && mkdir -p "$out/src" "$out/build"
if [ -e "$src/CMakeLists.txt" ]; then
  cp -r "$src/." "$out/src/"
else  # a git directory (a mirror without a work tree)
  git --git-dir="$src" archive HEAD | tar -x -C "$out/src"
fi
log=$out/build.log
{ cmake -S "$out/src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$out/install" \
    -DCMAKE_C_COMPILER=mpicc.openmpi -DCMAKE_CXX_COMPILER=mpicxx.openmpi -DCMAKE_Fortran_COMPILER=mpifort.openmpi \
    -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.openmpi &&
  cmake --build "$out/build" -j "$(nproc)" && cmake --install "$out/build"; } > "$log" 2>&1 ||
  { tail -30 "$log" >&2; echo "build_mpiwrapper.sh: the build failed (whole log: $log)" >&2; exit 1; }
lib=$(find "$out/install" -name 'libmpiwrapper.so' | head -1)
[ -n "$lib" ] || { echo "build_mpiwrapper.sh: no libmpiwrapper.so under $out/install" >&2; exit 1; }
echo "$lib"
