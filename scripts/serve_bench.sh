#!/usr/bin/env bash
# Server throughput and latency, magicpig serve against llama-server on the same model, threads
# and prompts (docs/results.md "Server"). Prompts are distinct ~4k-token slices of Austen
# (no prefix sharing), 32 greedy output tokens, 1 / 4 / 8 concurrent clients for DURATION seconds
# each; then the arrival test (longest gap of a running stream while a 4k prompt arrives).
#   scripts/serve_bench.sh [MODEL] [DURATION]     (default: SmolLM2 from the cache, 60 s)
# llama-server is built from the same llama.cpp source by scripts/build_peer.sh --server; without
# it only magicpig's rows are printed. SERVE_BENCH_ONLY=llama runs only llama-server's rows.
# SERVE_BENCH_ONLY=poisson runs only the open-loop traffic test (scripts/serve_traffic.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
MODEL="${1:-$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
DURATION="${2:-60}"
TEXT="$CACHE/corpora/austen.txt"
THREADS=2 NP=8 CTX=4608 CHARS=16000 PORT=18431
BENCH=build/bin/serve-bench
LLAMA_SERVER="$CACHE/llama.cpp/build-server/bin/llama-server"
[ -x "$BENCH" ] || { echo "build first (cmake --build build)"; exit 1; }
[ -f "$TEXT" ] || scripts/fetch_corpora.sh
export OMP_WAIT_POLICY=passive

wait_up() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0; sleep 0.5; done; return 1; }
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

if [ "${SERVE_BENCH_ONLY:-}" = poisson ]; then exec scripts/serve_traffic.sh "$MODEL"; fi
echo "# serve_bench $(date -u +%F) $(nproc) cores, model $(basename "$MODEL"), $THREADS threads, -np $NP"
[ "${SERVE_BENCH_ONLY:-}" = llama ] || for attn in dense magicpig; do
  build/bin/magicpig serve -m "$MODEL" --port $PORT -t $THREADS -np $NP -c $CTX --attn $attn 2>/tmp/serve_bench_mp.log &
  pid=$!
  wait_up || { cat /tmp/serve_bench_mp.log; exit 1; }
  $BENCH --port $PORT -f "$TEXT" --prompt-chars $CHARS -n 32 --clients 1,4,8 --duration "$DURATION" --label "magicpig serve --attn $attn"
  $BENCH --port $PORT -f "$TEXT" --prompt-chars $CHARS --arrival --label "magicpig serve --attn $attn"
  stop $pid
done
# The same engine without chunked prefill: the whole arriving prompt in one piece.
[ "${SERVE_BENCH_ONLY:-}" = llama ] || {
build/bin/magicpig serve -m "$MODEL" --port $PORT -t $THREADS -np $NP -c $CTX --prefill-chunk 100000 2>/tmp/serve_bench_mp.log &
pid=$!
wait_up
$BENCH --port $PORT -f "$TEXT" --prompt-chars $CHARS --arrival --label "magicpig serve, prefill unchunked"
stop $pid
}

if [ -x "$LLAMA_SERVER" ]; then
  PORT=$((PORT + 1))  # llama-server does not reuse a port that just closed
  for fa in off on; do
    LD_LIBRARY_PATH="$(dirname "$LLAMA_SERVER")" "$LLAMA_SERVER" -m "$MODEL" --port $PORT -t $THREADS -tb $THREADS \
      -np $NP -c $((CTX * NP)) -fa $fa --no-warmup >/tmp/serve_bench_llama.log 2>&1 &
    pid=$!
    wait_up || { tail -20 /tmp/serve_bench_llama.log; kill $pid 2>/dev/null; exit 1; }
    $BENCH --port $PORT -f "$TEXT" --prompt-chars $CHARS -n 32 --clients 1,4,8 --duration "$DURATION" --label "llama-server -fa $fa"
    $BENCH --port $PORT -f "$TEXT" --prompt-chars $CHARS --arrival --label "llama-server -fa $fa"
    stop $pid
  done
else
  echo "(no llama-server at $LLAMA_SERVER: scripts/build_peer.sh --server builds it)"
fi
