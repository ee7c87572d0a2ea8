#!/usr/bin/env bash
# Builds the GGUF fuzzer (clang, libFuzzer + ASan + UBSan) and runs it for N seconds.
# Usage: fuzz/run.sh [SECONDS=60] [extra libFuzzer flags, e.g. -jobs=2 -workers=2]
# Env: MAGICPIG_FUZZ_BUILD (build dir, default build-fuzz), CXX (default clang++).
# Exit status is non-zero if the fuzzer found a crash; the reproducer is left in the build dir
# (crash-*); replay it with: build-fuzz/fuzz_gguf crash-FILE
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
build=${MAGICPIG_FUZZ_BUILD:-build-fuzz}

cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="${CXX:-clang++}" >/dev/null
cmake --build "$build" -j2

corpus="$build/corpus"
mkdir -p "$corpus"
"$build/make_seeds" "$corpus"

cd "$build"
exec ./fuzz_gguf corpus -dict=../fuzz/gguf.dict -max_total_time="$secs" -max_len=4096 \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$@"
