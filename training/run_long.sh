#!/usr/bin/env bash
# Resume the short proof run and extend its curriculum to 4096-token sequences
# (training/curricula/curriculum_long.json = curriculum_short.json's stages + 1024/2048/4096 stages).
# Stops after MAX_MINUTES (default 150) with a checkpoint; run it again in a later session to go on.
#   THREADS=2 MAX_MINUTES=150 training/run_long.sh
# Env: MAGICPIG_CACHE, RUN_DIR (default $CACHE/training/run1), THREADS (2), MAX_MINUTES (150).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
RUN_DIR="${RUN_DIR:-$CACHE/training/run1}"
PY="$CACHE/venv-training/bin/python"   # the training environment (PyTorch 2.x, CPU)
[ -x "$PY" ] || { echo "run_long: $PY not found: run scripts/setup.sh --training" >&2; exit 1; }
mkdir -p "$RUN_DIR"   # for tee, which opens stdout.txt before train.py makes the directory
[ -f "$RUN_DIR/ckpt.pt" ] || echo "run_long: no checkpoint in $RUN_DIR: starting from scratch (short stages first)"
"$PY" training/train.py --curriculum training/curricula/curriculum_long.json --run-dir "$RUN_DIR" \
    --threads "${THREADS:-2}" --max-minutes "${MAX_MINUTES:-150}" --ckpt-minutes 10 \
    --log-every 10 --eval-every 100 --eval-n 32 2>&1 | tee -a "$RUN_DIR/stdout.txt"
