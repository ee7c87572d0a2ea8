#!/usr/bin/env bash
# Runs one of the Python server tests: run_python_test.sh TEST.py MAGICPIG MODEL.
# openai_client_test.py needs the client environment of scripts/setup_client.sh and
# browser_test.py needs Debian's chromium; without them the test is skipped (exit 77), or
# fails when MAGICPIG_REQUIRE_PEER=1 (CI, after scripts/setup.sh, has both).
set -uo pipefail
test="$1" magicpig="$2" model="$3"
here="$(cd "$(dirname "$0")" && pwd)"
cache="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
missing() {
  if [ "${MAGICPIG_REQUIRE_PEER:-0}" = "1" ]; then echo "FAIL: $1 (run scripts/setup.sh)"; exit 1; fi
  echo "skipped: $1 (run scripts/setup.sh)"; exit 77
}
py=/usr/bin/python3
case "$test" in
  openai_client_test.py)
    py="$cache/venv-client/bin/python"
    [ -x "$py" ] && "$py" -c "import openai" 2>/dev/null || missing "no openai client environment at $cache/venv-client" ;;
  browser_test.py)
    command -v chromium >/dev/null || missing "no chromium" ;;
esac
cd "$here" && exec "$py" "$test" --magicpig "$magicpig" --model "$model"
