#!/usr/bin/env bash
# Fetch llama.cpp (our peer implementation for cross-checks) and its tokenizer test vectors
# into the magicpig cache, OUTSIDE the source tree.
#
# Source: the source distribution of the PyPI package llama-cpp-python, which vendors
# llama.cpp under vendor/llama.cpp (pip builds its library from there). The sdist is only
# downloaded and unpacked: it is never installed, and none of its Python code is run by us.
# Only PyPI is needed.
#
# Idempotent: does nothing when $CACHE/llama.cpp/.magicpig-source names the pinned sdist.
#
# Env:
#   MAGICPIG_CACHE              cache dir (default: $HOME/.cache/magicpig)
#   LLAMA_CPP_PYTHON_VERSION    sdist version (default: 0.3.36; another version skips the
#                               sha256 check, since only the default's hash is pinned here)
set -euo pipefail

CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
DEFAULT_VERSION="0.3.36"
DEFAULT_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-$DEFAULT_VERSION}"
DEST="$CACHE/llama.cpp"
SOURCE_FILE="$DEST/.magicpig-source"
DOWNLOADS="$CACHE/downloads"
SDIST="$DOWNLOADS/llama_cpp_python-$VERSION.tar.gz"
TOP="llama_cpp_python-$VERSION"

log() { echo "fetch_peer: $*"; }
die() { echo "fetch_peer: ERROR: $*" >&2; exit 1; }

if [ -f "$SOURCE_FILE" ] && grep -qx "sdist=llama-cpp-python==$VERSION" "$SOURCE_FILE" \
   && [ -f "$DEST/models/ggml-vocab-llama-spm.gguf" ]; then
    log "already present: $DEST ($(grep '^commit=' "$SOURCE_FILE"); nothing to do)"
    exit 0
fi

for tool in python3 tar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
done
mkdir -p "$DOWNLOADS" || die "cannot create $DOWNLOADS"

if [ ! -f "$SDIST" ]; then
    log "downloading the llama-cpp-python==$VERSION sdist from PyPI (~75 MB, not installed)"
    python3 -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$VERSION" -d "$DOWNLOADS.tmp.$$" >"$CACHE/llama-cpp-python-download.log" 2>&1 \
        || { tail -n 20 "$CACHE/llama-cpp-python-download.log" >&2; rm -rf "$DOWNLOADS.tmp.$$";
             die "pip download llama-cpp-python==$VERSION failed (is PyPI reachable?)"; }
    [ -f "$DOWNLOADS.tmp.$$/$TOP.tar.gz" ] || die "pip download did not produce $TOP.tar.gz"
    mv "$DOWNLOADS.tmp.$$/$TOP.tar.gz" "$SDIST"
    rm -rf "$DOWNLOADS.tmp.$$"
fi

if [ "$VERSION" = "$DEFAULT_VERSION" ]; then
    have="$(sha256sum "$SDIST" | cut -d' ' -f1)"
    if [ "$have" != "$DEFAULT_SHA256" ]; then
        rm -f "$SDIST"
        die "sha256 of $TOP.tar.gz is $have, expected $DEFAULT_SHA256 (file removed; rerun)"
    fi
else
    log "warning: version $VERSION is not the pinned $DEFAULT_VERSION; its sha256 is not checked"
fi

TMP="$(mktemp -d "$CACHE/fetch-peer.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
log "unpacking $TOP/vendor/llama.cpp"
tar -xzf "$SDIST" -C "$TMP" "$TOP/vendor/llama.cpp" "$TOP/.git/modules/vendor/llama.cpp/HEAD" \
    || die "$TOP.tar.gz has no vendor/llama.cpp (or no record of its commit)"
COMMIT="$(tr -d '[:space:]' <"$TMP/$TOP/.git/modules/vendor/llama.cpp/HEAD")"
[[ "$COMMIT" =~ ^[0-9a-f]{40}$ ]] || die "cannot read the vendored llama.cpp commit (got '$COMMIT')"
SRC_TMP="$TMP/$TOP/vendor/llama.cpp"
rm -f "$SRC_TMP/.git"  # a submodule pointer into the sdist's .git, meaningless here
[ -f "$SRC_TMP/models/ggml-vocab-llama-spm.gguf" ] || die "the sdist has no models/ggml-vocab-llama-spm.gguf"
printf 'sdist=llama-cpp-python==%s\nsha256=%s\ncommit=%s\n' \
    "$VERSION" "$(sha256sum "$SDIST" | cut -d' ' -f1)" "$COMMIT" >"$SRC_TMP/.magicpig-source"

if [ -e "$DEST" ]; then
    log "replacing the earlier checkout $DEST"
    rm -rf "$DEST"
fi
mv "$SRC_TMP" "$DEST"
log "done: llama.cpp $COMMIT in $DEST"
log "tokenizer test vectors: $(cd "$DEST/models" && ls ggml-vocab-*.gguf.inp | wc -l) vocabularies"
