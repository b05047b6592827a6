#!/usr/bin/env bash
# A command in this checkout, on the newest Python with the newest jax: what a
# user who runs `pip install jax` on a current distribution gets, and what this
# machine's own Python (3.11: jax 0.10.2 at most) cannot give. The Python is
# Debian trixie's (3.13), in a root made once with debootstrap and kept in
# $MPI_COLLECTIVES_NEWEST_ROOT (default /var/tmp/mpi-collectives-trixie); the
# checkout is bind-mounted at its own path inside it, so the command sees the
# same files, and the mounts live in a mount namespace of their own (gone when
# the command ends, also when it fails). Needs root (debootstrap, chroot,
# mount) and Debian's archive.
#   bash scripts/newest_python.sh 'bash scripts/setup_env.sh mpich'
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/newest_python.sh 'COMMAND'" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
  echo "newest_python.sh: needs root (debootstrap, chroot and mounts); run it as root, or in CI" >&2
  exit 3
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${MPI_COLLECTIVES_NEWEST_ROOT:-/var/tmp/mpi-collectives-trixie}
if [ ! -x "$root/usr/bin/python3.13" ]; then
  command -v debootstrap > /dev/null || {
    apt-get install -y -q --no-install-recommends debootstrap ||
      { apt-get update -q && apt-get install -y -q --no-install-recommends debootstrap; }
  } > /tmp/mpi-collectives-apt.log 2>&1 || { echo "newest_python.sh: apt-get install debootstrap failed" >&2; exit 1; }
  rm -rf "$root.partial"
  # gcc and the headers: the package builds its native layer, the tests build C harnesses.
  # procps: the tests look for a job's leftovers with pgrep.
  if ! debootstrap --variant=minbase --include=python3,python3-venv,python3-dev,gcc,libc6-dev,ca-certificates,procps \
       trixie "$root.partial" http://deb.debian.org/debian > /tmp/mpi-collectives-debootstrap.log 2>&1; then
    echo "newest_python.sh: debootstrap of Debian trixie failed:" >&2
    tail -5 /tmp/mpi-collectives-debootstrap.log >&2
    exit 1
  fi
  mv "$root.partial" "$root"
fi
# pip reaches PyPI from inside as it does outside: the same name servers, and the same
# certificate authorities and pip settings (a site's proxy may sign with its own).
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/hosts "$root/etc/hosts"  # this machine's own name, which gloo resolves
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
[ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$root/etc/pip.conf"
exec unshare --mount --propagation private bash -c '
  set -e
  root=$1 repo=$2 command=$3
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o size=2g tmpfs "$root/dev/shm"
  mount --rbind /sys "$root/sys"
  mount -t tmpfs tmpfs "$root/tmp"
  # The checkout last: it may live under /tmp (a CI clone), which the tmpfs above would hide.
  mkdir -p "$root$repo"
  mount --bind "$repo" "$root$repo"
  exec chroot "$root" env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 \
    TERM="${TERM:-dumb}" MPI_COLLECTIVES_TEST_WHEEL="${MPI_COLLECTIVES_TEST_WHEEL:-}" \
    bash -c "cd \"$repo\" && $command"
' newest "$root" "$repo" "$*"
