#!/usr/bin/env bash
# The bounded load test of CI (under 60 s): `magicpig serve` with the in-repo model, 1, 4 and 8
# concurrent streaming clients for a few seconds each, dense and then magicpig; serve-bench
# prints throughput and the TTFT / TPOT percentiles and fails on any failed request.
# Usage: load_test.sh MAGICPIG SERVE_BENCH MODEL TEXT
set -euo pipefail
magicpig="$1" bench="$2" model="$3" text="$4"
for attn in dense magicpig; do
  log=$(mktemp)
  "$magicpig" serve -m "$model" --port 0 -t 2 -np 8 --attn "$attn" 2>"$log" &
  pid=$!
  port=""
  for _ in $(seq 200); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$log"; kill $pid; exit 1; }
  status=0
  "$bench" --port "$port" -f "$text" --prompt-chars 2000 -n 16 --clients 1,4,8 --duration 3 \
    --label "in-repo model, --attn $attn" || status=$?
  kill $pid
  wait $pid || true
  rm -f "$log"
  [ $status -eq 0 ] || { echo "FAIL: failed requests under load ($attn)"; exit 1; }
done
