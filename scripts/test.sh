#!/usr/bin/env bash
# The project's test command (README.md): Release build + every CTest test, then the GGUF
# parser, tokenizer and server tests again under ASan/UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

# First, the cheapest check: the tracked tree stays small (binaries are fetched, not committed).
scripts/check_tree_size.sh 40

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
# Passive OpenMP waiting: tests run side by side on few cores, where spinning threads starve
# each other (benchmarks keep the default).
OMP_WAIT_POLICY=passive ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${MAGICPIG_SKIP_SANITIZE:-0}" != "1" ]; then
  # CUDA off: nvcc takes no sanitizer flags, and these suites have no CUDA code.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMAGICPIG_SANITIZE=ON -DMAGICPIG_BUILD_BENCH=OFF -DMAGICPIG_CUDA=OFF
  cmake --build build-asan -j"$jobs" --target test_gguf test_tokenizer test_common test_server
  # The server suites too (HTTP parsing, malformed and random requests, disconnects, the openai
  # client and the browser against the sanitized binary); not the load test (timing only) nor the
  # flat-RSS test, whose bound ASan's quarantine would break.
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L "gguf|tokenizer|common|server" \
    -E "MemoryStaysFlatOverAThousandRequests|server_load_test"
fi
# A short libFuzzer run over the GGUF parser (longer runs: fuzz/run.sh SECONDS), then a few
# thousand inputs over the tokenizers and over the server's request path, one vocabulary of each kind that setup.sh fetches (in CI
# all must be there; elsewhere a missing one is skipped).
if [ "${MAGICPIG_SKIP_FUZZ:-0}" != "1" ]; then
  fuzz/run.sh "${MAGICPIG_FUZZ_SECONDS:-30}"
  opt="?"
  [ "${MAGICPIG_REQUIRE_PEER:-0}" = "1" ] && opt=""
  MAGICPIG_FUZZ_VOCABS="spm,smollm$opt,qwen2-vocab$opt,llama-bpe$opt,gpt2-default$opt,llama-spm$opt" \
    fuzz/run.sh tokenizer 60 -runs="${MAGICPIG_FUZZ_TOKENIZER_RUNS:-6000}"
  # The server's request path (headers, JSON bodies, the magicpig extension, chat messages):
  # a few thousand raw HTTP requests grown from the malformed battery and the OpenAI client's.
  MAGICPIG_FUZZ_SERVER_MODELS="$PWD/models/default.gguf,${MAGICPIG_CACHE:-$HOME/.cache/magicpig}/models/SmolLM2-135M-Instruct.Q4_1.gguf$opt" \
    fuzz/run.sh server 60 -runs="${MAGICPIG_FUZZ_SERVER_RUNS:-20000}"
fi
echo "test: all passed"
