#!/usr/bin/env bash
# Decode tokens/s vs context length for magicpig (dense and magicpig attention) and llama.cpp
# (llama-bench, built by scripts/build_peer.sh) on the same GGUF and threads; writes JSON, a
# Markdown table and decode_vs_context.png (issue 6). One command regenerates the chart:
#
#   scripts/bench_decode_chart.sh -m MODEL.gguf [-d 0,4096,16384,65536] [-t 2] [-n 32] [-r 3]
#                                 [--attn dense,magicpig] [--fill random|prefill] [--out DIR]
#                                 [--dense-layers LIST]
#
# Depth is filled by magicpig with --fill (default random: synthetic K/V, see docs/engine.md;
# dense speed does not depend on the values, magicpig's does, so results.md says which fill);
# llama-bench always runs a real prefill of the depth first (slow at large depth).
# --dense-layers is passed to magicpig bench (e.g. 0 for a 2-layer file, whose default dense
# layers {0, n/2} would be every layer and make the magicpig line equal dense's).
set -euo pipefail
cd "$(dirname "$0")/.."
model="" depths="0,4096,16384" threads="2" ngen=32 reps=3 attn="dense,magicpig" fill=random out=bench-out dense_layers=""
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    -d) depths="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    -n) ngen="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    --attn) attn="$2"; shift 2 ;;
    --fill) fill="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --dense-layers) dense_layers="$2"; shift 2 ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
[ -n "$model" ] || { echo "error: give -m MODEL.gguf" >&2; exit 1; }
[ -f "$model" ] || { echo "error: model '$model' not found" >&2; exit 1; }
bin=build/bin/magicpig
[ -x "$bin" ] || { echo "error: $bin missing: build first (scripts/test.sh or cmake --build build)" >&2; exit 1; }
peer="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}/llama.cpp/build/bin"
mkdir -p "$out"

echo "== magicpig bench ($attn, depth fill $fill)" >&2
"$bin" bench -m "$model" -p 0 -n "$ngen" -d "$depths" -r "$reps" -t "$threads" --attn "$attn" \
  --depth-fill "$fill" ${dense_layers:+--dense-layers "$dense_layers"} -o json > "$out/magicpig.json"

if [ -x "$peer/llama-bench" ]; then
  echo "== llama-bench" >&2
  LD_LIBRARY_PATH="$peer${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$peer/llama-bench" -m "$model" -p 0 -n "$ngen" \
    -d "$depths" -r "$reps" -t "$threads" -o json > "$out/llamacpp.json"
else
  echo "warning: $peer/llama-bench not built (scripts/build_peer.sh); chart without llama.cpp" >&2
  echo "[]" > "$out/llamacpp.json"
fi

py=python3
$py -c "import matplotlib" 2>/dev/null || py=/usr/bin/python3
"$py" scripts/plot_decode_speed.py "$out/magicpig.json" "$out/llamacpp.json" "$out"
