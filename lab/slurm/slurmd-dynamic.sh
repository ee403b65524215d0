#!/bin/bash
# slurmd-dynamic.sh NAME PORT ENV_FILE     (run as root, with the lab's environment: LAB_DIR, SLURM_CONF, SLURM_PREFIX)
# (Re)starts a dynamic node's slurmd (`slurmd -Z`), as a site's systemd unit with EnvironmentFile=ENV_FILE and
#   ExecStart=slurmd -Z --conf "… Gres=${SLURMD_GRES}"
# would: the running one (its pid file, checked to be this lab's slurmd) gets SIGTERM and is waited for, then slurmd
# starts again with the Gres= that ENV_FILE holds now. Written for spurinv (issue #23: dynamic nodes re-register).
set -euo pipefail
NAME=$1; PORT=$2; ENV_FILE=$3
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=24.11/lab.env
source "$HERE/24.11/lab.env"
SLURMD_GRES=
# shellcheck disable=SC1090
[ -f "$ENV_FILE" ] && . "$ENV_FILE"
PIDFILE="$LAB_DIR/slurmd-$NAME.pid"
pid=$(head -n1 "$PIDFILE" 2>/dev/null | tr -cd '0-9' || true)
if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$SBIN/slurmd" ]; then
  kill -TERM "$pid"
  for _ in $(seq 1 400); do [ -e "/proc/$pid" ] || break; sleep 0.025; done
  [ ! -e "/proc/$pid" ] || { echo "slurmd $NAME (pid $pid) did not stop" >&2; exit 1; }
fi
mkdir -p "$LAB_DIR/spool/$NAME"
"$SBIN/slurmd" -f "$SLURM_CONF" -N "$NAME" -Z \
  --conf "NodeAddr=127.0.0.1 Port=$PORT CPUs=2 RealMemory=1000 Feature=dynamic${SLURMD_GRES:+ Gres=$SLURMD_GRES}"
for _ in $(seq 1 200); do [ -s "$PIDFILE" ] && break; sleep 0.025; done
[ -s "$PIDFILE" ] || { echo "slurmd $NAME wrote no pid file; see $LAB_DIR/log/slurmd-$NAME.log" >&2; exit 1; }
