#!/usr/bin/env bash
# Installs everything magicpig needs on a fresh Debian 12 (bookworm) machine. Idempotent.
# Usage: scripts/setup.sh              build + test dependencies, llama.cpp test vectors
#        scripts/setup.sh --training   also the training stack (Debian's PyTorch, SentencePiece)
#        MAGICPIG_SKIP_PEER=1 ...       skip fetching and building llama.cpp (interop and
#                                       tokenizer-conformance tests then skip)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libomp-dev
  libopenblas-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libcpp-httplib-dev
  python3 python3-matplotlib  # matplotlib: eval plots (scripts/plot_attention_error.py)
)
# npm fetches llama.cpp (our cross-check peer). NodeSource's nodejs bundles npm and conflicts
# with Debian's npm package, so install Debian's only when no npm is on PATH.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
if [ "${1:-}" = "--training" ]; then
  # libopenblas0-pthread matters: without it torch's matmul runs ~30x slower here.
  packages+=(python3-torch python3-numpy python3-sentencepiece sentencepiece libopenblas0-pthread
             bible-kjv jargon-text)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all apt packages present"
fi

# llama.cpp from npm: its tokenizer test vectors, and the library + our llama-dump tool that the
# interop tests compare against. Built once into ${MAGICPIG_CACHE:-~/.cache/magicpig} (15-35
# minutes on 2 cores the first time, nothing afterwards).
if [ "${MAGICPIG_SKIP_PEER:-0}" != "1" ]; then
  scripts/build_peer.sh --lib-only
fi
echo "setup: done"
