#!/usr/bin/env bash
# Open-loop traffic against the server (docs/results.md "Server under Poisson traffic"): requests
# arrive as a Poisson process, prompts drawn from a bounded Pareto distribution on 100..8,000
# tokens (shape 0.5: median ~320, mean ~900, 23% above 1k, 5% above 4k), 64 greedy output tokens,
# a pool of 16 clients.
# magicpig serve with the token-budget turn at each --prefill-share of SERVE_TRAFFIC_SHARES
# (default "1 0.5 0": the default budget, half of it, and 0 = the fixed 256-token chunk per turn,
# the schedule before the budget), then llama-server when built (scripts/build_peer.sh --server).
# Same seed, so every server gets the same arrivals.
# Then saturation, for throughput: 16 clients sending back to back for SATURATE seconds (default
# 120), ~1k-token prompts, 64 output tokens. SERVE_TRAFFIC_PARTS=poisson|saturate runs one part.
#   scripts/serve_traffic.sh [MODEL] [DURATION=240] [RATE=0.1]
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
MODEL="${1:-$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
DURATION="${2:-240}" RATE="${3:-0.1}"
TEXT="${SERVE_TRAFFIC_TEXT:-examples/persuasion_7k.txt}"
THREADS=2 NP=16 CTX=8192 PORT=18441
BENCH=build/bin/serve-bench
LLAMA_SERVER="$CACHE/llama.cpp/build-server/bin/llama-server"
[ -x "$BENCH" ] || { echo "build first (cmake --build build)"; exit 1; }
export OMP_WAIT_POLICY=passive
traffic=(--poisson "$RATE" --duration "$DURATION" --clients 16 -n 64 --prompt-min 100 --prompt-max 8000
         --pareto-alpha 0.5 --chars-per-token 4.17 --seed 55 -f "$TEXT")

PARTS="${SERVE_TRAFFIC_PARTS:-all}"
saturate=(--clients 16 -n 64 --prompt-chars 4200 --duration "${SATURATE:-120}" -f "$TEXT")

wait_up() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0; sleep 0.5; done; return 1; }
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

echo "# serve_traffic $(date -u +'%F %H:%M') UTC, $(nproc) cores, $(basename "$MODEL"), $THREADS threads, -np $NP, rate $RATE/s for ${DURATION}s"
for share in ${SERVE_TRAFFIC_SHARES:-1 0.5 0}; do
  build/bin/magicpig serve -m "$MODEL" --port $PORT -t $THREADS -np $NP -c $CTX --prefill-share $share \
    2>/tmp/serve_traffic_mp.log &
  pid=$!
  wait_up || { cat /tmp/serve_traffic_mp.log; exit 1; }
  [ "$PARTS" = saturate ] || $BENCH --port $PORT "${traffic[@]}" --label "magicpig serve --prefill-share $share"
  [ "$PARTS" = poisson ] || $BENCH --port $PORT "${saturate[@]}" --label "magicpig serve --prefill-share $share"
  stop $pid
  PORT=$((PORT + 1))
done
if [ -x "$LLAMA_SERVER" ]; then
  LD_LIBRARY_PATH="$(dirname "$LLAMA_SERVER")" "$LLAMA_SERVER" -m "$MODEL" --port $PORT -t $THREADS -tb $THREADS \
    -np $NP -c $((CTX * NP)) -fa on --no-warmup >/tmp/serve_traffic_llama.log 2>&1 &
  pid=$!
  wait_up || { tail -20 /tmp/serve_traffic_llama.log; stop $pid; exit 1; }
  [ "$PARTS" = saturate ] || $BENCH --port $PORT "${traffic[@]}" --label "llama-server -fa on"
  [ "$PARTS" = poisson ] || $BENCH --port $PORT "${saturate[@]}" --label "llama-server -fa on"
  stop $pid
else
  echo "(no llama-server at $LLAMA_SERVER: scripts/build_peer.sh --server builds it)"
fi
