#!/usr/bin/env bash
# The device check of the GPU work: what a lent GPU machine (the device tool) measures in one
# run of at most ~8 minutes. Results go to $OUT (default /tmp/gpu_check).
#
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMAGICPIG_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-gpu -j --target magicpig test_backends test_kernels test_attention bench_attention
#   scripts/gpu_bundle.sh build-gpu             # here: pack binaries + libraries into .device/
#   device run (carry .device): scripts/gpu_check.sh .device
#   scripts/gpu_check.sh                        # or build with CUDA on the machine itself
#
# Every step has its own time limit, and all of them share one budget (GPU_CHECK_BUDGET_S,
# default 460 s, build included): a step gets at most what is left, and steps are skipped
# once less than 15 s remain, so the whole run stays under 8 minutes. Steps in priority order:
#   1. the machine: GPU, driver, CPU, memory
#   2. `magicpig devices --check` and test_backends (CUDA kernels against the CPU, whole-model
#      greedy tokens on the GPU equal to the CPU's, the heterogeneous magicpig path: exact part
#      and query codes on the GPU, sampled part on the CPU, split and unsplit)
#   3. a random Llama-3.1-8B-shaped model (all 32 layers, Q8_0) generated on the machine
#   4. per depth (GPU_CHECK_DEPTHS, default 16384,98304,32768,65536), batches 1, 4, 16
#      (GPU_CHECK_BATCHES), depth filled with synthetic K/V, 4 generated tokens:
#        (a) GPU only: --device cuda --attn dense (weights and all KV on the GPU), then the same
#            under --gpu-mem-limit 24G (what an RTX 4090 holds; rows that do not fit are
#            refused with the plan printed)
#        (b) heterogeneous: --device cuda --attn magicpig (no profile for the random model, so
#            the ranked sampler's uncalibrated setting key-bits=4:budget=0.03:tail=0.01, the one
#            with measured quality: sparse layers' KV and 4-bit key codes on the CPU; their sinks
#            + local window attended on the GPU)
#        (c) CPU only on all cores: --attn dense,magicpig, the same sampler (batch 16 only at the
#            first depth: the CPU batch copies every sequence's whole KV)
#   5. bench_attention at 128k context with 2, 8, 16 threads, then the CPU kernel and attention
#      suites on this CPU (both measured on 2026-12-04; last so the decode rows come first)
# GPU_CHECK_QUICK=1 shrinks the model (the tiny preset) and depths to seconds (to try the script on a machine
# without a GPU: the CUDA steps then fail at once with "no CUDA device", the CPU steps run).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
# The device tool returns at most 8 files: every step writes into RAW, and RAW is packed into
# $OUT/gpu_check.tar.gz after each step, so a run cut short still returns what it measured.
RAW="${GPU_CHECK_RAW:-/tmp/gpu_check_raw}"
mkdir -p "$OUT" "$RAW"
LOG="$RAW/gpu_check.log"
QUICK="${GPU_CHECK_QUICK:-0}"
BUDGET="${GPU_CHECK_BUDGET_S:-460}"
T0=$SECONDS
NPROC=$(nproc)
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }
step() {  # step NAME SECONDS CMD...: runs CMD with a time limit, output to $RAW/NAME.txt
  local name=$1 secs=$2; shift 2
  local left=$((BUDGET - (SECONDS - T0) - 5))
  if [ "$left" -lt 15 ]; then
    log "step $name: skipped (the ${BUDGET}s budget is spent)"
    return 0
  fi
  [ "$secs" -gt "$left" ] && secs=$left
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
    >"$RAW/build.txt" 2>&1 </dev/null && cmake --build build-gpu -j"$NPROC" >>"$RAW/build.txt" 2>&1 </dev/null \
    || { log "build failed (see build.txt)"; tar czf "$OUT/gpu_check.tar.gz" -C "$RAW" .; exit 1; }
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

# 2. CUDA: the probe, the kernels, whole-model decode against the CPU (test_device_cli runs
# this magicpig)
export MAGICPIG_BIN="$PWD/$BIN/magicpig"
[ "${BIN#/}" != "$BIN" ] && export MAGICPIG_BIN="$BIN/magicpig"
step devices 60 "$BIN/magicpig" devices --check
step test_backends 150 "$BIN/test_backends"

# 3. the model
preset=llama3-8b; layers=32; depths="${GPU_CHECK_DEPTHS:-16384,98304,32768,65536}"; batches="${GPU_CHECK_BATCHES:-1,4,16}"
ngen=4
[ "$QUICK" = 1 ] && { preset=tiny; layers=6; depths="${GPU_CHECK_DEPTHS:-1024}"; ngen=2; }
model=/tmp/llama3-8b-shape-q8_0.gguf
step random_model 240 "$BIN/magicpig" random-model --preset "$preset" --layers "$layers" --type q8_0 -o "$model"

# 4. decode: (a) GPU only, (a) capped at 24 GiB, (b) heterogeneous, (c) CPU only; one step each
# per depth, so a slow or refused configuration keeps the others' rows.
if [ -f "$model" ]; then
  first=1
  for d in ${depths//,/ }; do
    common=(-m "$model" -p 0 -n "$ngen" -d "$d" -r 1 --depth-fill random -t "$NPROC" -o md)
    step "gpu_dense_d$d" 120 "$BIN/magicpig" bench "${common[@]}" --attn dense -np "$batches" --device cuda
    step "gpu_dense_24g_d$d" 90 "$BIN/magicpig" bench "${common[@]}" --attn dense -np "$batches" --device cuda \
      --gpu-mem-limit 24G
    step "gpu_magicpig_d$d" 150 "$BIN/magicpig" bench "${common[@]}" --attn magicpig -np "$batches" --device cuda
    cpu_batches=1,4
    [ "$first" = 1 ] && cpu_batches="$batches"
    step "cpu_d$d" 150 "$BIN/magicpig" bench "${common[@]}" --attn dense,magicpig -np "$cpu_batches"
    first=0
  done
fi
rm -f "$model"

# 5. the CPU attention kernel at 128k, then the CPU suites on this CPU
ctx=131072; reps=3
[ "$QUICK" = 1 ] && { ctx=4096; reps=1; }
for t in 2 8 16; do
  [ "$t" -le "$NPROC" ] || continue
  BENCH_THREADS=$t step "bench_attention_t$t" 120 "$BIN/bench_attention" \
    --benchmark_filter="BM_DenseDecode/$ctx/|BM_Policy/magicpig/$ctx/" \
    --benchmark_repetitions=$reps --benchmark_counters_tabular=true \
    --benchmark_out="$RAW/bench_attention_t$t.json" --benchmark_out_format=json
done
step test_kernels 120 "$BIN/test_kernels" --gtest_brief=1
step test_attention 180 "$BIN/test_attention" --gtest_brief=1
log "done in $((SECONDS - T0))s"
tar czf "$OUT/gpu_check.tar.gz" -C "$RAW" .
