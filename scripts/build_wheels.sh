#!/usr/bin/env bash
# Binary wheels of mpi-collectives, and the sdist, into dist/:
#   bash scripts/build_wheels.sh [ARCH ...]      ARCH: x86_64 (default: x86_64 aarch64)
#
# One wheel per architecture serves every MPI and every CPython from 3.10:
# the native layer holds no MPI header (it loads the MPI at run time) and is
# built against Python's stable ABI (cp310-abi3). It is compiled by zig's C
# compiler (PyPI's `ziglang`) for glibc 2.17 (`-target ARCH-linux-gnu.2.17`),
# so it needs no glibc symbol newer than 2.17: the wheel is tagged
# manylinux_2_17 (RHEL/CentOS 7 and every newer cluster OS), and
# auditwheel (PyPI) checks the tag and that the library links nothing but
# glibc. No docker, no system toolchain: everything comes from PyPI, in a
# build venv (.venv-build; MPI_COLLECTIVES_BUILD_VENV moves it).
#
# Running an aarch64 wheel needs an aarch64 machine (or qemu-user) with
# Python >= 3.10, glibc >= 2.17 and an aarch64 MPI: it is built and checked
# here, not run. The sdist still builds from source where no wheel fits
# (needs a C compiler and Python's headers).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
archs=${*:-x86_64 aarch64}
build=${MPI_COLLECTIVES_BUILD_VENV:-$root/.venv-build}
GLIBC=2.17
PYTHON_ABI=cp310 # the oldest CPython the wheel serves (pyproject.toml's requires-python)

python=${PYTHON:-python3}
[ -x "$build/bin/python" ] || "$python" -m venv "$build" >&2
quiet_pip() {
  local log
  log=$(mktemp)
  "$build/bin/python" -m pip --disable-pip-version-check -q "$@" > "$log" 2>&1 ||
    { grep -v '^WARNING: Location' "$log" >&2; rm -f "$log"; echo "build_wheels.sh: pip $* failed" >&2; exit 1; }
  rm -f "$log"
}
quiet_pip install ziglang auditwheel cffi setuptools wheel build

mkdir -p "$root/dist"
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
for arch in $archs; do
  case $arch in x86_64|aarch64) ;; *) echo "build_wheels.sh: unknown architecture $arch (x86_64, aarch64)" >&2; exit 2 ;; esac
  plat=manylinux_${GLIBC/./_}_$arch
  # zig's cc, for this target, as the compiler and the linker setuptools calls.
  cat > "$tools/cc-$arch" <<EOF
#!/bin/sh
exec "$build/bin/python" -m ziglang cc -target $arch-linux-gnu.$GLIBC "\$@"
EOF
  chmod +x "$tools/cc-$arch"
  # bdist_wheel's options, through setuptools' DIST_EXTRA_CONFIG: the stable-ABI tag and the platform.
  printf '[bdist_wheel]\npy_limited_api = %s\nplat_name = %s\n' "$PYTHON_ABI" "$plat" > "$tools/wheel-$arch.cfg"
  out=$(mktemp -d)
  rm -rf "$root/build" # a host build left there would be packed instead
  (cd "$root" && CC="$tools/cc-$arch" LDSHARED="$tools/cc-$arch -shared" DIST_EXTRA_CONFIG="$tools/wheel-$arch.cfg" \
     "$build/bin/python" -m build --wheel --no-isolation --outdir "$out" . > "$out/build.log" 2>&1) ||
    { tail -30 "$out/build.log" >&2; echo "build_wheels.sh: the $arch build failed" >&2; exit 1; }
  rm -rf "$root/build"
  wheel=$(ls "$out"/*.whl)
  # The checks: the tag, glibc symbol versions, nothing linked but glibc.
  shown=$("$build/bin/auditwheel" show "$wheel" 2>&1)
  echo "$shown" | tr '\n' ' ' | grep -q "consistent with the following platform tag: \"$plat\"" ||
    { echo "$shown" >&2; echo "build_wheels.sh: auditwheel does not accept $(basename "$wheel") as $plat" >&2; exit 1; }
  newest=$(cd "$out" && "$build/bin/python" - "$wheel" <<'EOF'
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    so = [n for n in z.namelist() if n.endswith(".so")]
    data = b"".join(z.read(n) for n in so)
versions = {tuple(map(int, v.split(b"."))) for v in re.findall(rb"GLIBC_(\d+\.\d+(?:\.\d+)?)", data)}
print(".".join(map(str, max(versions))) if versions else "none")
EOF
)
  if [ "$newest" != none ] && [ "$(printf '%s\n%s\n' "$newest" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]; then
    echo "build_wheels.sh: $(basename "$wheel") needs GLIBC_$newest, newer than $GLIBC" >&2; exit 1
  fi
  mv "$wheel" "$root/dist/"
  echo "dist/$(basename "$wheel")  (auditwheel: $plat; newest glibc symbol: GLIBC_$newest)"
  rm -rf "$out"
done
(cd "$root" && "$build/bin/python" -m build --sdist --no-isolation --outdir "$root/dist" . > /dev/null 2>&1) ||
  { echo "build_wheels.sh: the sdist failed" >&2; exit 1; }
echo "dist/$(cd "$root/dist" && ls -t *.tar.gz | head -1)  (sdist: builds from source where no wheel fits)"
