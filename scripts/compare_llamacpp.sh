#!/usr/bin/env bash
# magicpig against llama.cpp on a real GGUF model, teacher-forced over a held-out text, the full
# measurement of tests/interop/test_real_models.cpp (which runs a CI-sized slice):
#
#   scripts/compare_llamacpp.sh MODEL.gguf [TEXT]
#
# TEXT defaults to $CACHE/corpora/split/austen.heldout.txt (scripts/fetch_corpora.sh; never used
# by the project's training), else eval/data/haystack.txt (its last 59 kB, committed).
# Prints: positions compared, top-1 agreement, perplexity of magicpig and of llama.cpp computed
# identically from the two engines' logits (llama-dump --all-logits), max |logit diff| relative to
# the logit range of llama.cpp's row, greedy continuations up to the first near-tie; and, when
# $CACHE/llama.cpp/build/bin/llama-perplexity is built (scripts/build_peer.sh without --lib-only),
# llama-perplexity's own figure at the same context and chunks.
#
# Env: CTX (default 1024) tokens per chunk, as llama-perplexity -c; CHUNKS (default 2: 2,046
# scored positions at CTX 1024; 0 = every full chunk of the text); GREEDY (32) greedy steps per
# chunk; NEAR_TIE (0.5) llama.cpp top-2 logit gap below which greedy tokens may differ;
# THREADS (2); BUILD (build) the magicpig build dir holding bin/compare-llamacpp;
# MAGICPIG_CACHE (~/.cache/magicpig).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
CTX="${CTX:-1024}"
CHUNKS="${CHUNKS:-2}"
GREEDY="${GREEDY:-32}"
NEAR_TIE="${NEAR_TIE:-0.5}"
THREADS="${THREADS:-2}"
BUILD="${BUILD:-$REPO_ROOT/build}"

die() { echo "compare_llamacpp: $*" >&2; exit 1; }
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 2; }
MODEL="$1"
TEXT="${2:-}"
if [ -z "$TEXT" ]; then
    TEXT="$CACHE/corpora/split/austen.heldout.txt"
    [ -f "$TEXT" ] || TEXT="$REPO_ROOT/eval/data/haystack.txt"
fi
[ -f "$MODEL" ] || die "no model file $MODEL (scripts/fetch_models.sh)"
[ -f "$TEXT" ] || die "no text file $TEXT"
DUMP="$CACHE/bin/llama-dump"
[ -x "$DUMP" ] || die "$DUMP is missing: run scripts/build_peer.sh --lib-only"
TOOL="$BUILD/bin/compare-llamacpp"
[ -x "$TOOL" ] || die "$TOOL is missing: cmake --build $BUILD --target compare-llamacpp"

echo "== magicpig vs llama.cpp (llama-dump --all-logits, f16 KV, flash attention off, $THREADS threads)"
"$TOOL" -m "$MODEL" -f "$TEXT" --ctx "$CTX" --chunks "$CHUNKS" --greedy "$GREEDY" --near-tie "$NEAR_TIE" \
    -t "$THREADS" --llama-dump "$DUMP"

PPL="$CACHE/llama.cpp/build/bin/llama-perplexity"
echo
if [ -x "$PPL" ]; then
    # Same tokens (common_tokenize with add_special), same chunks (first id -> BOS when the model
    # adds one), one sequence per batch (-b CTX), same KV type and attention path as llama-dump.
    echo "== llama-perplexity -c $CTX --chunks $CHUNKS (-b $CTX -fa off -ctk f16 -ctv f16 -t $THREADS)"
    n_chunks_arg=()
    [ "$CHUNKS" -gt 0 ] && n_chunks_arg=(--chunks "$CHUNKS")
    # llama-perplexity refuses a text of fewer than 2 x CTX tokens.
    if out="$("$PPL" -m "$MODEL" -f "$TEXT" -c "$CTX" -b "$CTX" "${n_chunks_arg[@]}" -fa off -ctk f16 -ctv f16 \
              -t "$THREADS" 2>&1)"; then
        grep -E "Final estimate|calculating perplexity over" <<<"$out" || echo "$out" | tail -5
    else
        echo "$out" | tail -5
        echo "llama-perplexity failed"
    fi
else
    echo "== llama-perplexity not built ($PPL): scripts/build_peer.sh (without --lib-only) builds it"
fi
