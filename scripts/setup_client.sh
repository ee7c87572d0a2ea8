#!/usr/bin/env bash
# The OpenAI Python client the server tests drive `magicpig serve` with: a virtual environment
# at ${MAGICPIG_CACHE:-~/.cache/magicpig}/venv-client (never system-wide) holding exactly the
# pinned wheels of tests/server/requirements.txt. Called by scripts/setup.sh; runs alone too.
# Idempotent: rebuilt only when requirements.txt changed or the environment is incomplete.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
VENV="$CACHE/venv-client"
REQ=tests/server/requirements.txt
BASE_PY=/usr/bin/python3  # Debian's python (python3-venv), present on every fresh machine after setup.sh

stamp="$(sha256sum "$REQ" | cut -c1-16)"
if [ -f "$VENV/.stamp" ] && [ "$(cat "$VENV/.stamp")" = "$stamp" ] && "$VENV/bin/python" -c "import openai" 2>/dev/null; then
  echo "setup_client: $VENV is up to date"
  exit 0
fi
echo "setup_client: creating $VENV from $REQ"
rm -rf "$VENV"
mkdir -p "$CACHE"
"$BASE_PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: -r "$REQ"
"$VENV/bin/python" -c "import openai; print('setup_client: openai', openai.__version__)"
echo "$stamp" > "$VENV/.stamp"
