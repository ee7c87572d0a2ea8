#!/usr/bin/env bash
# The model card's quality table (models/README.md) for one GGUF, in one command:
#   1. RULER with exact attention: niah_single_1 (noise haystack), niah_single_2 (natural text),
#      niah_multikey_1 (3 distractors) at 1024 / 2048 / 4096 tokens, $SAMPLES per cell;
#   2. the same prompts with MagicPIG (10,150), $MP_SAMPLES per cell (0 skips it);
#   2b. the single-needle tasks with the needle at 10 depths from 0% to 100% (--depths 10,
#      $SAMPLES per cell: issue 4's form of the target), with the by-depth table;
#   3. perplexity on each corpus's held-out split (first 7,000 characters, last 1,024 tokens of
#      a 2,048-token window scored) — needs scripts/fetch_corpora.sh;
#   4. the examples/ prompts, greedy, dense and magicpig.
#
#   scripts/model_quality.sh [GGUF=models/default.gguf] [OUT=/tmp/model_quality]
#
# Env: SAMPLES (50), MP_SAMPLES (20), LENGTHS (1024,2048,4096), BIN (build/bin/magicpig),
# MAGICPIG_CACHE ($HOME/.cache/magicpig). Writes OUT/ruler_dense, OUT/ruler_magicpig (each with
# summary.md and predictions.jsonl), OUT/ruler_depths, OUT/perplexity.txt, OUT/examples.txt.
# About 13 minutes on the 2-core development machine.
set -euo pipefail
cd "$(dirname "$0")/.."
gguf="${1:-models/default.gguf}"
out="${2:-/tmp/model_quality}"
bin="${BIN:-build/bin/magicpig}"
samples="${SAMPLES:-50}"
mp_samples="${MP_SAMPLES:-20}"
lengths="${LENGTHS:-1024,2048,4096}"
cache="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
tasks=niah_single_1,niah_single_2,niah_multikey_1

[[ -x "$bin" ]] || { echo "error: $bin not built (cmake --build build)" >&2; exit 1; }
[[ -f "$gguf" ]] || { echo "error: no model file $gguf" >&2; exit 1; }
mkdir -p "$out"

echo "== RULER, dense, $samples samples per cell"
rm -rf "$out/ruler_dense"
"$bin" eval ruler -m "$gguf" --attn dense --tasks "$tasks" --lengths "$lengths" --samples "$samples" \
    --out "$out/ruler_dense" -q
grep '^|' "$out/ruler_dense/summary.md"

if [[ "$mp_samples" != 0 ]]; then
    echo "== RULER, dense and magicpig (10,150), $mp_samples samples per cell"
    rm -rf "$out/ruler_magicpig"
    "$bin" eval ruler -m "$gguf" --attn dense,magicpig --tasks "$tasks" --lengths "$lengths" \
        --samples "$mp_samples" --out "$out/ruler_magicpig" -q
    grep '^|' "$out/ruler_magicpig/summary.md"
fi

echo "== RULER single needle at 10 depths, dense, $samples samples per cell"
rm -rf "$out/ruler_depths"
"$bin" eval ruler -m "$gguf" --attn dense --tasks niah_single_1,niah_single_2 --lengths "$lengths" \
    --samples "$samples" --depths 10 --out "$out/ruler_depths" -q
grep '^|' "$out/ruler_depths/summary.md"

echo "== perplexity, held-out text"
: > "$out/perplexity.txt"
for c in austen kjv jargon; do   # the corpora of scripts/fetch_corpora.sh
    split="$cache/corpora/split/$c.heldout.txt"
    if [[ ! -f "$split" ]]; then
        echo "$c: skipped, no $split (run scripts/fetch_corpora.sh)" | tee -a "$out/perplexity.txt"
        continue
    fi
    head -c 7000 "$split" > "$out/$c.heldout7000.txt"
    if ! "$bin" eval perplexity -m "$gguf" -f "$out/$c.heldout7000.txt" -c 2048 --n-eval 1024 --attn dense \
            > "$out/$c.perplexity.log" 2>&1; then
        echo "error: perplexity on $c failed; its output:" >&2; tail -5 "$out/$c.perplexity.log" >&2; exit 1
    fi
    echo "$c: $(grep '^| dense' "$out/$c.perplexity.log" | tail -1)" | tee -a "$out/perplexity.txt"
done

echo "== examples, greedy"
: > "$out/examples.txt"
for f in examples/*.txt; do
    for a in dense magicpig; do
        got=$("$bin" run -m "$gguf" -f "$f" -n 12 --temp 0 --attn "$a" 2>/dev/null | tail -c 40 | tr '\n' ' ')
        echo "$f $a: ...$got" | tee -a "$out/examples.txt"
    done
done
