#!/bin/bash
# ensure-slurm.sh         (run as root on Debian 12; idempotent)
# Makes sure the e2e lab can run: the runtime packages it needs (munge, curl and the shared libraries that Slurm's
# binaries and plugins link against) are installed, a munge key exists, and Slurm 24.11.5 is installed at
# $SLURM_PREFIX (default /opt/slurm-24.11). If `$SLURM_PREFIX/sbin/slurmctld -V` already prints "slurm 24.11.5" it
# prints "cached" and builds nothing; otherwise it runs build-slurm-24.11-from-debian-src.sh (~5 min on 2 cores).
# When nothing is missing a run takes well under a second (no apt-get at all).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX="${SLURM_PREFIX:-/opt/slurm-24.11}"
WANT="slurm 24.11.5"
[ "$(id -u)" = 0 ] || { echo "ensure-slurm.sh must run as root" >&2; exit 1; }
# Runtime dependencies of the 24.11 build (ldd over sbin, bin, lib and lib/slurm/*.so), plus munge and curl for the
# lab scripts. They matter when $SLURM_PREFIX comes from a cache onto a machine that never ran the build.
RUNTIME_PKGS=(munge curl libmunge2 libjson-c5 libjwt0 libhttp-parser2.9 libyaml-0-2 liblz4-1 libreadline8)
missing=()
for p in "${RUNTIME_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
# Debian's munge package creates the key on install; make one if it is missing anyway
if [ ! -s /etc/munge/munge.key ]; then
  echo "creating /etc/munge/munge.key"
  runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
fi
if [ -x "$PREFIX/sbin/slurmctld" ] && [ "$("$PREFIX/sbin/slurmctld" -V 2>/dev/null)" = "$WANT" ]; then
  echo "cached: $WANT at $PREFIX"
  exit 0
fi
echo "$WANT not found at $PREFIX: building it"
SLURM_PREFIX="$PREFIX" "$HERE/build-slurm-24.11-from-debian-src.sh"
[ "$("$PREFIX/sbin/slurmctld" -V)" = "$WANT" ] || { echo "build did not produce $WANT" >&2; exit 1; }
