#!/usr/bin/env bash
# Builds the fuzzers (clang, libFuzzer + ASan + UBSan) and runs one for N seconds.
# Usage: fuzz/run.sh [gguf|tokenizer|server] [SECONDS=60] [extra libFuzzer flags, e.g. -runs=5000 -jobs=2]
# The target defaults to gguf. Env: MAGICPIG_FUZZ_BUILD (build dir, default build-fuzz), CXX
# (default clang++), MAGICPIG_FUZZ_VOCABS (tokenizer only: which vocabularies, see README.md),
# MAGICPIG_FUZZ_SERVER_MODELS (server only: which models, see README.md).
# Exit status is non-zero if the fuzzer found a crash; the reproducer is left in the build dir
# (crash-*); replay it with: build-fuzz/fuzz_TARGET crash-FILE
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=gguf
case "${1:-}" in gguf|tokenizer|server) target=$1; shift ;; esac
secs=${1:-60}
shift || true
build=${MAGICPIG_FUZZ_BUILD:-build-fuzz}

cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="${CXX:-clang++}" >/dev/null
fuzzer=fuzz_$target
[ "$target" = server ] && fuzzer=fuzz_server_request
cmake --build "$build" -j2 --target "$fuzzer" make_seeds

if [ "$target" = gguf ]; then
  corpus="$build/corpus"
  mkdir -p "$corpus"
  "$build/make_seeds" "$corpus"
  flags=(-dict="$root/fuzz/gguf.dict" -max_len=4096)
elif [ "$target" = server ]; then
  corpus="$build/corpus-server"
  mkdir -p "$corpus"
  "$build/make_seeds" --server "$corpus"
  cp "$root"/fuzz/seeds/server/*.http "$corpus/"
  # 10,000 bytes: the longest seed (a 4,096-id prompt) fits whole.
  flags=(-dict="$root/fuzz/server.dict" -max_len=10000)
else
  corpus="$build/corpus-tokenizer"
  mkdir -p "$corpus"
  "$build/make_seeds" --tokenizer "$corpus"
  flags=(-dict="$root/fuzz/tokenizer.dict" -max_len=512)
fi

corpus=$(cd "$corpus" && pwd)
cd "$build"  # crash-* reproducers land here
exec "./$fuzzer" "$corpus" "${flags[@]}" -max_total_time="$secs" \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$@"
