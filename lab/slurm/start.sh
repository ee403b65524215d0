#!/bin/bash
# start.sh [24.11]        (run as root)
# Single-host loopback Slurm lab: munged (if not running), slurmctld and two slurmd (n1, n2), all on 127.0.0.1.
# Renders 24.11/*.conf.in into $LAB_DIR/etc, creates fake GPU device nodes and a JWT key, then waits until both
# nodes are idle. Start slurmrestd afterwards with start-restd.sh; stop everything with stop.sh.
# Copied from the reference pack (shared/reference/slurm/lab/start.sh) into spurinv. Changed: 24.11 only (the version
# argument is optional); umask 022; LAB_DIR made absolute, chmod 755, and o+x added to any parent that lacks it (so
# slurmrestd running as nobody can read slurm.conf; checked before any daemon starts, fatal instead of a warning);
# a munged started here is recorded in $LAB_DIR/munged.pid (stop.sh --munge stops only that one); the wait for idle
# nodes fails fast when a daemon dies.
set -euo pipefail
umask 022
HERE=$(cd "$(dirname "$0")" && pwd); V=${1:-24.11}
[ -f "$HERE/$V/lab.env" ] || { echo "usage: start.sh [24.11]" >&2; exit 2; }
case "${LAB_DIR:-}" in ""|/*) ;; *) LAB_DIR="$PWD/$LAB_DIR" ;; esac
# shellcheck source=24.11/lab.env
source "$HERE/$V/lab.env"
mkdir -p "$LAB_DIR"/{etc,state,spool/n1,spool/n2,log,dev,jobs}
# the JWT slurmrestd drops to nobody: it must reach and read slurm.conf (mktemp -d dirs are 0700)
chmod 755 "$LAB_DIR" "$LAB_DIR/etc"
d=$LAB_DIR
while d=$(dirname "$d"); [ "$d" != / ]; do
  [ $(( 0$(stat -c %a "$d") & 1 )) -eq 1 ] || { echo "chmod o+x $d (so user nobody can reach $LAB_DIR)"; chmod o+x "$d"; }
done
render() {  # gres.conf is read from the directory of slurm.conf
  sed -e "s|@LAB_DIR@|$LAB_DIR|g" -e "s|@HOST@|$(hostname -s)|g" -e "s|@CTLD_PORT@|$LAB_PORT|g" \
      -e "s|@N1_PORT@|$((LAB_PORT + 1))|g" -e "s|@N2_PORT@|$((LAB_PORT + 2))|g" "$1" > "$2"
}
render "$HERE/$V/slurm.conf.in" "$LAB_DIR/etc/slurm.conf"
render "$HERE/$V/gres.conf.in" "$LAB_DIR/etc/gres.conf"
runuser -u nobody -- test -r "$SLURM_CONF" \
  || { echo "user nobody cannot read $SLURM_CONF; slurmrestd -u nobody would fail" >&2; exit 1; }
# fake GPUs: DRM render-node style char devices, 8 for n1 and 4 for n2 (gres.conf File=)
for i in 0 1 2 3 4 5 6 7; do [ -e "$LAB_DIR/dev/fakegpu$i" ] || mknod "$LAB_DIR/dev/fakegpu$i" c 226 $((128 + i)); done
for i in 0 1 2 3; do [ -e "$LAB_DIR/dev/n2gpu$i" ] || mknod "$LAB_DIR/dev/n2gpu$i" c 226 $((136 + i)); done
# HS256 key for auth/jwt (AuthAltTypes): 32 random bytes, readable only by SlurmUser (root here)
[ -s "$LAB_DIR/jwt_hs256.key" ] || { dd if=/dev/urandom of="$LAB_DIR/jwt_hs256.key" bs=32 count=1 status=none
                                      chmod 0600 "$LAB_DIR/jwt_hs256.key"; }
# munged is shared by all labs on the host; Debian's munge package ships /etc/munge/munge.key.
# If this lab starts it, its pid goes to $LAB_DIR/munged.pid so that stop.sh --munge stops it (and only it).
if ! munge -n >/dev/null 2>&1; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge; chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged             # daemonizes; pid in /run/munge/munged.pid
  for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  munge -n >/dev/null || { echo "munged did not come up; see /var/log/munge/munged.log" >&2; exit 1; }
  cp /run/munge/munged.pid "$LAB_DIR/munged.pid"
  echo "started munged (pid $(cat "$LAB_DIR/munged.pid"))"
fi
t0=$(date +%s%N)
"$SBIN/slurmctld" -f "$SLURM_CONF"                  # forks; pid in $LAB_DIR/slurmctld.pid
for n in n1 n2; do "$SBIN/slurmd" -f "$SLURM_CONF" -N "$n"; done
daemons_dead() {  # a pid file whose process is gone, or a pid file still missing after 5 s
  local f
  for f in slurmctld slurmd-n1 slurmd-n2; do
    if [ -s "$LAB_DIR/$f.pid" ]; then
      kill -0 "$(head -n1 "$LAB_DIR/$f.pid")" 2>/dev/null || { echo "$f died; see $LAB_DIR/log/$f.log" >&2; return 0; }
    elif [ $(( $(date +%s%N) - t0 )) -gt 5000000000 ]; then
      echo "$f wrote no pid file within 5 s; see $LAB_DIR/log/$f.log" >&2; return 0
    fi
  done
  return 1
}
for _ in $(seq 1 300); do                           # <= 30 s; a node stuck in INVAL never becomes idle
  [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" -ge 2 ] && break
  daemons_dead && exit 1
  sleep 0.1
done
sinfo -N -o '%N %t %G %f'
[ "$(sinfo -h -N -o '%N %t' | grep -c ' idle$')" -ge 2 ] || { echo "nodes not idle; see $LAB_DIR/log/" >&2; exit 1; }
echo "controller + nodes ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms; export SLURM_CONF=$SLURM_CONF"
