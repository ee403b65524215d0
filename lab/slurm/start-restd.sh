#!/bin/bash
# start-restd.sh [24.11]  (run as root, after start.sh)
# Starts two slurmrestd; PIDs in $LAB_DIR/slurmrestd-{local,jwt}.pid:
#  local: rest_auth/local on the unix socket $LAB_DIR/slurmrestd.sock, running as root. Needs
#         SLURMRESTD_SECURITY=disable_user_check (else "fatal: slurmrestd should not be run as the root user.");
#         the client must have the same uid. 25.05+ release builds abort on that variable: use JWT there.
#  jwt:   rest_auth/jwt on 127.0.0.1:$LAB_PORT+3, dropped to nobody after binding. Clients send
#         X-SLURM-USER-NAME and X-SLURM-USER-TOKEN (token: scontrol token username=root lifespan=7200).
# Copied from the reference pack (shared/reference/slurm/lab/start-restd.sh) into spurinv. Changed: 24.11 only (the
# version argument is optional); LAB_DIR made absolute; waits for the JWT TCP listener too, and fails fast when a
# slurmrestd dies.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); V=${1:-24.11}
[ -f "$HERE/$V/lab.env" ] || { echo "usage: start-restd.sh [24.11]" >&2; exit 2; }
case "${LAB_DIR:-}" in ""|/*) ;; *) LAB_DIR="$PWD/$LAB_DIR" ;; esac
# shellcheck source=24.11/lab.env
source "$HERE/$V/lab.env"
cd "$LAB_DIR"; rm -f slurmrestd.sock
SLURMRESTD_SECURITY=disable_user_check nohup "$SBIN/slurmrestd" -a rest_auth/local -s "$RESTD_PLUGINS" \
  "unix:$LAB_DIR/slurmrestd.sock" > log/slurmrestd-local.log 2>&1 < /dev/null &   # stays in the foreground: & and $!
echo $! > slurmrestd-local.pid
SLURM_JWT=daemon nohup "$SBIN/slurmrestd" -a rest_auth/jwt -s "$RESTD_PLUGINS" -u nobody -g nogroup \
  "127.0.0.1:$((LAB_PORT + 3))" > log/slurmrestd-jwt.log 2>&1 < /dev/null &
echo $! > slurmrestd-jwt.pid
JWT_URL="http://127.0.0.1:$((LAB_PORT + 3))/openapi/v3"   # no token: 401 once it listens, 000 before
ready() {
  curl -s -o /dev/null --unix-socket slurmrestd.sock http://localhost/openapi/v3 \
    && [ "$(curl -s -o /dev/null -w '%{http_code}' "$JWT_URL")" != 000 ]
}
for _ in $(seq 1 100); do                           # <= 5 s
  ready && break
  for n in local jwt; do
    kill -0 "$(cat "slurmrestd-$n.pid")" 2>/dev/null \
      || { echo "slurmrestd-$n died; see $LAB_DIR/log/slurmrestd-$n.log" >&2; exit 1; }
  done
  sleep 0.05
done
ready || { echo "slurmrestd not answering; see $LAB_DIR/log/" >&2; exit 1; }
echo "slurmrestd local: curl --unix-socket $LAB_DIR/slurmrestd.sock http://localhost/... (pid $(cat slurmrestd-local.pid))"
echo "slurmrestd jwt:   http://127.0.0.1:$((LAB_PORT + 3))/... (pid $(cat slurmrestd-jwt.pid))"
