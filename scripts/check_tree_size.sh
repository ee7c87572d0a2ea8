#!/usr/bin/env bash
# Fails when the tracked files of this checkout add up to more than MAX MB (default 40): the
# working tree must stay well under the 64 MiB a GPU device machine accepts, and models,
# checkpoints and plots over 1 MB are fetched or regenerated, never committed (README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
max_mb=${1:-40}
if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "check_tree_size: not a git checkout, nothing to measure"
  exit 0
fi
bytes=$(git ls-files -z | xargs -0 stat --format=%s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
mb=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}')
largest=$(git ls-files -z | xargs -0 stat --format='%s %n' -- 2>/dev/null | sort -rn | awk 'NR <= 3' |
          awk '{printf "%s%s (%.1f MB)", (NR > 1 ? ", " : ""), $2, $1 / 1e6}')
if awk -v b="$bytes" -v m="$max_mb" 'BEGIN {exit !(b > m * 1e6)}'; then
  echo "check_tree_size: tracked files are $mb MB, over the $max_mb MB limit; largest: $largest" >&2
  exit 1
fi
echo "check_tree_size: tracked files $mb MB (limit $max_mb MB; largest: $largest)"
