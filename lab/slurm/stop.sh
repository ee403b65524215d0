#!/bin/bash
# stop.sh [24.11] [--munge]
# Stops the lab by PID, never by name. Before a pid is signalled, /proc/PID/exe must be the lab's binary and
# /proc/PID/environ must hold this lab's SLURM_CONF, so a stale pid file cannot hit an unrelated process (nor another
# lab's daemon). slurmrestd gets SIGINT (its clean shutdown), slurmd/slurmctld SIGTERM. All signals go out first,
# then we wait (each daemon needs ~2 s to exit, so a serial stop took ~10 s); SIGKILL after 10 s.
# The pid files are re-read (a second round) because `scontrol reconfigure` (24.11) re-execs slurmctld AND both slurmd
# under new PIDs. munged is shared by all labs and is stopped only with --munge, and only if this lab started it.
# Copied from the reference pack (shared/reference/slurm/lab/stop.sh) into spurinv. Changed: 24.11 only (the version
# argument is optional); stricter ownership check (exe + SLURM_CONF instead of a cmdline grep); zombies count as gone;
# pid files are read by their first line only (slurmctld's in-place rewrite on reconfigure can leave a tail);
# jobs still in the queue are cancelled first while slurmctld is up (a slurmd that is stopped leaves its running
# jobs' slurmstepd behind); second round for re-exec'd daemons; --munge only stops the munged that start.sh recorded
# in $LAB_DIR/munged.pid, and waits for it; exit 1 if anything survived SIGKILL; every slurmd-*.pid (dynamic nodes
# started by slurmd-dynamic.sh too).
HERE=$(cd "$(dirname "$0")" && pwd); V=24.11; MUNGE=0
for a in "$@"; do case "$a" in --munge) MUNGE=1 ;; *) V=$a ;; esac; done
[ -f "$HERE/$V/lab.env" ] || { echo "usage: stop.sh [24.11] [--munge]" >&2; exit 2; }
case "${LAB_DIR:-}" in ""|/*) ;; *) LAB_DIR="$PWD/$LAB_DIR" ;; esac
# shellcheck source=24.11/lab.env
source "$HERE/$V/lab.env"
# First line only: on `scontrol reconfigure` slurmctld 24.11 rewrites its pid file in place (rewind + write, no
# truncate), so a shorter new pid (after pid wrap-around) leaves the tail of the old one behind: "484\n5\n".
pidof_file() { head -n1 "$1" 2>/dev/null | tr -cd '0-9'; }
gone() { [ ! -e "/proc/$1" ] || [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" = Z ]; }
owned() {  # PID EXE: PID runs EXE, started with this lab's SLURM_CONF
  local e; e=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  [ "$e" = "$2" ] || [ "$e" = "$2 (deleted)" ] || return 1
  tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF"
}
wait_gone() {  # PID NAME: wait up to 10 s, then SIGKILL
  for _ in $(seq 1 400); do gone "$1" && return 0; sleep 0.025; done
  echo "$2 (pid $1) alive after 10 s: SIGKILL"; kill -KILL "$1" 2>/dev/null
  for _ in $(seq 1 200); do gone "$1" && return 0; sleep 0.025; done
  echo "$2 (pid $1) survived SIGKILL" >&2; return 1
}
t0=$(date +%s%N); rc=0
if [ -s "$LAB_DIR/slurmctld.pid" ] && owned "$(pidof_file "$LAB_DIR/slurmctld.pid")" "$SBIN/slurmctld"; then
  mapfile -t jobs < <(timeout 15 squeue -h -o %A 2>/dev/null)
  if [ ${#jobs[@]} -gt 0 ]; then
    echo "cancelling jobs: ${jobs[*]}"; timeout 15 scancel "${jobs[@]}" || true
    for _ in $(seq 1 150); do [ -z "$(timeout 15 squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.1; done
  fi
fi
declare -A SENT
for _round in 1 2; do
  declare -A NOW=()
  for f in "$LAB_DIR"/slurmrestd-*.pid "$LAB_DIR"/slurmd-*.pid "$LAB_DIR"/slurmctld.pid; do
    [ -s "$f" ] || continue
    pid=$(pidof_file "$f"); name=$(basename "$f" .pid); bin=${name%%-*}
    [ -n "$pid" ] || { echo "$name: pid file without a pid (being rewritten?); skipped"; continue; }
    [ -n "${SENT[$pid]:-}" ] && continue
    if ! owned "$pid" "$SBIN/$bin"; then
      echo "$name: pid $pid is not this lab's $bin (or gone); removing stale pid file"; rm -f "$f"; continue
    fi
    sig=TERM; [ "$bin" = slurmrestd ] && sig=INT
    kill -"$sig" "$pid" 2>/dev/null && SENT[$pid]=$name && NOW[$pid]=$name && echo "sent SIG$sig to $name (pid $pid)"
  done
  [ ${#NOW[@]} -eq 0 ] && break
  for pid in "${!NOW[@]}"; do wait_gone "$pid" "${NOW[$pid]}" || rc=1; done
done
for pid in "${!SENT[@]}"; do
  f="$LAB_DIR/${SENT[$pid]}.pid"; [ "$(pidof_file "$f")" = "$pid" ] && rm -f "$f"
done
echo "stopped in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if [ "$MUNGE" = 1 ]; then
  if [ -s "$LAB_DIR/munged.pid" ]; then
    pid=$(pidof_file "$LAB_DIR/munged.pid")
    if owned "$pid" /usr/sbin/munged; then
      echo "stopping munged (pid $pid), started by this lab"; kill -TERM "$pid"; wait_gone "$pid" munged || rc=1
    else
      echo "munged pid $pid (started by this lab) is gone already"
    fi
    rm -f "$LAB_DIR/munged.pid"
  else
    echo "munged was not started by this lab: left running"
  fi
fi
exit $rc
