#!/usr/bin/env bash
# The training stack (training/README.md), called by `scripts/setup.sh --training`; runs alone too.
#   1. Debian packages: the python that makes the environment, spm_train (tokenizer training),
#      bible-kjv and jargon-text (corpora), gcc + binutils (training/cuda_stubs.py).
#   2. A virtual environment at ${MAGICPIG_CACHE:-~/.cache/magicpig}/venv-training (never
#      system-wide) with exactly the pinned wheels of training/requirements.txt: PyTorch 2.x for
#      the CPU, numpy, sentencepiece. Debian's own python3-torch is 1.13, without
#      scaled_dot_product_attention.
#   3. A check that torch imports, runs a matmul and scaled_dot_product_attention on the CPU.
# Idempotent: the environment is rebuilt only when requirements.txt or cuda_stubs.py changed (or
# it is incomplete); otherwise only the check runs. About 1 minute and 1.4 GB the first time.
# Env: MAGICPIG_CACHE (default $HOME/.cache/magicpig).
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
VENV="$CACHE/venv-training"
REQ=training/requirements.txt
STUBS=training/cuda_stubs.py
# Debian's python (3.11.2), not the pyenv build first on PATH: apt reinstalls it, with its venv
# module, on any new machine, and the wheels in $REQ are its cp311 builds.
BASE_PY=/usr/bin/python3

log() { echo "setup_training: $*"; }
die() { echo "setup_training: ERROR: $*" >&2; exit 1; }

# --- 1. Debian packages ---------------------------------------------------------------------------
packages=(python3 python3-venv sentencepiece bible-kjv jargon-text gcc libc6-dev binutils)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -x "$BASE_PY" ] || die "$BASE_PY not found after installing python3"

# --- 2. the virtual environment -------------------------------------------------------------------
# The stamp names what the environment was built from; a build that did not finish leaves none.
stamp="$(cat "$REQ" "$STUBS" | sha256sum | cut -d' ' -f1) $("$BASE_PY" -c 'import platform; print(platform.python_version())')"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.magicpig-stamp" 2>/dev/null)" = "$stamp" ]; then
    log "$VENV is up to date"
else
    t0=$SECONDS
    log "creating $VENV ($("$BASE_PY" --version 2>&1))"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    "$BASE_PY" -m venv "$VENV" || die "python3 -m venv failed (Debian needs python3-venv)"
    # --no-deps: $REQ pins every package the environment gets; without it pip would also fetch
    # torch's nvidia-* CUDA wheels. Binary wheels only, no pip cache (the torch wheel is 540 MB).
    "$VENV/bin/python" -m pip install -q --no-deps --only-binary :all: --no-cache-dir \
        --disable-pip-version-check -r "$REQ" || die "pip install -r $REQ failed"
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$VENV/bin/python" "$STUBS" "$site" >/dev/null || die "$STUBS failed"
    echo "$stamp" > "$VENV/.magicpig-stamp.new"
    log "installed in $((SECONDS - t0)) s, $(du -sh "$VENV" | cut -f1)"
    pending=1
fi

# --- 3. check -------------------------------------------------------------------------------------
"$VENV/bin/python" - <<'PY' || { rm -f "$VENV/.magicpig-stamp" "$VENV/.magicpig-stamp.new"; die "the training environment does not work"; }
import numpy, sentencepiece, torch
import torch.nn.functional as F
torch.manual_seed(0)
a, b = torch.randn(256, 256), torch.randn(256, 256)
assert torch.allclose(a @ b, torch.from_numpy(a.numpy().astype("float64") @ b.numpy().astype("float64")).float(), atol=1e-3)
q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
ref = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5 + torch.full((16, 16), float("-inf")).triu(1), -1) @ v
assert torch.allclose(F.scaled_dot_product_attention(q, k, v, is_causal=True), ref, atol=1e-5)
assert not torch.cuda.is_available()
print(f"setup_training: torch {torch.__version__} (CPU), numpy {numpy.__version__}, sentencepiece {sentencepiece.__version__}: ok")
PY
if [ "${pending:-0}" = 1 ]; then
    mv "$VENV/.magicpig-stamp.new" "$VENV/.magicpig-stamp"
fi
log "done: training scripts run with $VENV/bin/python"
