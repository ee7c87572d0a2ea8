#!/usr/bin/env bash
# Calibration profiles of the fetched models (docs/calibration.md): `magicpig calibrate` on RULER
# needle episodes of calibration seed 7 (reports use seed 42), written to
# models/profiles/<model file>.profile.json with the tables and heat maps in $OUT/<model>/.
#
#   scripts/calibrate_models.sh [MODEL...]     # smollm2 qwen0.5b qwen1.5b gemma3; default: those fetched
#
# The sampler is ranked MagicPIG (docs/attention.md "Ranked sampling") ranking by keys quantised
# to 4 bits a dimension (scanning them reads 1/8 of the bytes dense reads), the top 3% of
# prompt keys and a 1% importance-sampled tail, chosen on calibration-seed RULER runs and the
# KJV calibration text (docs/quality.md). Calibration then measures
# every sparse head with that sampler and makes exact the heads that still miss needle mass,
# within a cost target of 8% of the prompt keys read per sparse layer, exact heads included.
# Gemma 3's only sparse layers are its 3 global ones (one KV head each), where an exact head
# costs a third of the keys, so its target is 1 (every failing head).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${MAGICPIG_CACHE:-$HOME/.cache/magicpig}
OUT=${OUT:-$CACHE/calibration}
BIN=${BIN:-build/bin/magicpig}
[ -x "$BIN" ] || { echo "calibrate_models: build first ($BIN missing)" >&2; exit 1; }
declare -A FILE=([smollm2]=SmolLM2-135M-Instruct.Q4_1.gguf [qwen0.5b]=qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf
                 [qwen1.5b]=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf [gemma3]=gemma-3-270m-q4_k_m.gguf)
declare -A ARGS=([smollm2]="--rank-key-bits 4 --length 4096 --samples 4 --cost-target 0.08"
                 [qwen0.5b]="--rank-key-bits 4 --length 4096 --samples 4 --cost-target 0.08"
                 [qwen1.5b]="--rank-key-bits 4 --length 4096 --samples 4 --cost-target 0.08"
                 [gemma3]="--rank-key-bits 4 --length 8192 --samples 2 --cost-target 1")
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(smollm2 qwen0.5b qwen1.5b gemma3)
mkdir -p models/profiles
for m in "${models[@]}"; do
  [ -n "${FILE[$m]:-}" ] || { echo "calibrate_models: unknown model '$m' (smollm2 qwen0.5b qwen1.5b gemma3)" >&2; exit 1; }
  gguf=$CACHE/models/${FILE[$m]}
  if [ ! -f "$gguf" ]; then
    [ $# -gt 0 ] && { echo "calibrate_models: $gguf is not fetched (scripts/fetch_models.sh)" >&2; exit 1; }
    echo "calibrate_models: $m not fetched, skipped"
    continue
  fi
  # shellcheck disable=SC2086
  OMP_WAIT_POLICY=passive "$BIN" calibrate -m "$gguf" --budget 0.03 --tail 0.01 --seed 7 ${ARGS[$m]} --out "$OUT/$m" --plot \
    -o "models/profiles/${FILE[$m]}.profile.json"
done
