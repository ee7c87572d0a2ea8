#!/usr/bin/env bash
# The device check of the GPU work: what a lent GPU machine (the device tool) measures in one
# run of at most ~8 minutes. Results go to $OUT (default /tmp/gpu_check).
#
#   scripts/gpu_bundle.sh                       # here: pack binaries + libraries into .device/
#   device run (carry .device): scripts/gpu_check.sh .device
#   scripts/gpu_check.sh                        # or build with CUDA on the machine itself
#
# Steps, each under its own time limit so one slow step cannot eat the others:
#   1. the machine: GPU, driver, CPU, memory
#   2. `magicpig devices --check` and the CUDA probe tests (device query, a kernel against the CPU)
#   3. the CPU kernel and attention test suites on this CPU (its ISA may differ from ours)
#   4. bench_attention at 128k context: dense and magicpig decode attention, 2, 8, 16 threads
#   5. CPU-only decode of a random Llama-3.1-8B-shaped model (32 layers, Q8_0), dense and
#      magicpig, at 16k and 96k (GPU_CHECK_DEPTHS) on all cores
# GPU_CHECK_QUICK=1 shrinks steps 4-5 to seconds (to try the script on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
# The device tool returns at most 8 files: every step writes into RAW, and RAW is packed into
# $OUT/gpu_check.tar.gz after each step, so a run cut short still returns what it measured.
RAW="${GPU_CHECK_RAW:-/tmp/gpu_check_raw}"
mkdir -p "$OUT" "$RAW"
LOG="$RAW/gpu_check.log"
QUICK="${GPU_CHECK_QUICK:-0}"
NPROC=$(nproc)
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }
step() {  # step NAME SECONDS CMD...: runs CMD with a time limit, output to $OUT/NAME.txt
  local name=$1 secs=$2; shift 2
  log "step $name (limit ${secs}s): $*"
  local t0=$SECONDS
  timeout "$secs" "$@" >"$RAW/$name.txt" 2>&1
  local rc=$?
  log "step $name: rc=$rc in $((SECONDS - t0))s"
  tar czf "$OUT/gpu_check.tar.gz" -C "$RAW" .
  return 0
}

if [ -n "${1:-}" ]; then
  BIN="$1/bin"
  export LD_LIBRARY_PATH="$(cd "$1/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  log "building with CUDA (sm_90) in build-gpu"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMAGICPIG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$RAW/build.txt" 2>&1 && cmake --build build-gpu -j"$NPROC" >>"$RAW/build.txt" 2>&1 \
    || { log "build failed (see build.txt)"; exit 1; }
  BIN=build-gpu/bin
fi

# 1. the machine
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  nvidia-smi -L 2>&1
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)|L3|Flags' | sed 's/\(Flags:\s*\).*\(avx512[a-z_0-9]*\).*/\1... avx512 present .../'
  grep -o -w -E 'avx2|avx512f|avx512_bf16|avx512_vnni|amx_tile' /proc/cpuinfo | sort | uniq -c
  free -g
  uname -a
} >"$RAW/machine.txt" 2>&1
log "machine: $(head -2 "$RAW/machine.txt" | tail -1)"

# 2. CUDA
step devices 60 "$BIN/magicpig" devices --check
step test_backends 120 "$BIN/test_backends"
# 3. CPU suites on this CPU
step test_kernels 120 "$BIN/test_kernels" --gtest_brief=1
step test_attention 180 "$BIN/test_attention" --gtest_brief=1

# 4. attention kernel at 128k
ctx=131072; reps=3
[ "$QUICK" = 1 ] && { ctx=4096; reps=1; }
for t in 2 8 16; do
  [ "$t" -le "$NPROC" ] || continue
  BENCH_THREADS=$t step "bench_attention_t$t" 240 "$BIN/bench_attention" \
    --benchmark_filter="BM_DenseDecode/$ctx/|BM_Policy/magicpig/$ctx/" \
    --benchmark_repetitions=$reps --benchmark_counters_tabular=true \
    --benchmark_out="$RAW/bench_attention_t$t.json" --benchmark_out_format=json
done

# 5. CPU-only decode of an 8B-shaped model
layers=32; depths="${GPU_CHECK_DEPTHS:-16384,98304}"; ngen=4
[ "$QUICK" = 1 ] && { layers=2; depths=1024; ngen=2; }
model=/tmp/llama3-8b-shape-q8_0.gguf
step random_model 240 "$BIN/magicpig" random-model --preset llama3-8b --layers "$layers" --type q8_0 -o "$model"
if [ -f "$model" ]; then
  for d in ${depths//,/ }; do  # one step per depth: a slow depth keeps the others' rows
    step "bench_cpu_8b_d$d" 200 "$BIN/magicpig" bench -m "$model" -p 0 -n "$ngen" -d "$d" -r 1 \
      --depth-fill random --attn dense,magicpig -t "$NPROC" -np 1 -o md
  done
fi
rm -f "$model"
log "done"
tar czf "$OUT/gpu_check.tar.gz" -C "$RAW" .
