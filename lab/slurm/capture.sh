#!/bin/bash
# capture.sh NAME METHOD PATH [JSON_BODY]
# Sends one request to a lab slurmrestd; saves the body to $OUT_DIR/NAME.json, the status line and headers to
# NAME.headers, and appends "time name method path body code" to $OUT_DIR/index.tsv.
# OUT_DIR must be given.
# Transport: REST_SOCK=/path/to/slurmrestd.sock (rest_auth/local), or REST_URL=http://127.0.0.1:PORT plus
# SLURM_JWT (and REST_USER, default root) for the rest_auth/jwt headers.
# Copied from the reference pack (capture.sh) into spurinv for the captures listed in
# tests/fixtures/slurm/PROVENANCE.md. Changed: OUT_DIR has no default (the pack's responses/ is not in this repository).
set -u
NAME=$1; METHOD=$2; P=$3; BODY=${4:-}
OUT=${OUT_DIR:?set OUT_DIR}; mkdir -p "$(dirname "$OUT/$NAME")"
args=(-sS -X "$METHOD" -o "$OUT/$NAME.json" -D "$OUT/$NAME.headers" -w '%{http_code}')
if [ -n "${REST_SOCK:-}" ]; then args+=(--unix-socket "$REST_SOCK"); base=http://localhost; else base=${REST_URL:?}; fi
if [ -n "${SLURM_JWT:-}" ]; then args+=(-H "X-SLURM-USER-NAME: ${REST_USER:-root}" -H "X-SLURM-USER-TOKEN: $SLURM_JWT"); fi
if [ -n "$BODY" ]; then args+=(-H 'Content-Type: application/json' --data-binary "$BODY"); fi
code=$(curl "${args[@]}" "$base$P")
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$NAME" "$METHOD" "$P" "${BODY:--}" "$code" >> "$OUT/index.tsv"
echo "HTTP $code  $METHOD $P ${BODY:+body=$BODY} -> $NAME.json"
