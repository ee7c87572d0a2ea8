#!/usr/bin/env bash
# Fetch llama.cpp (our peer implementation for cross-checks) and its
# tokenizer test vectors into the magicpig cache, OUTSIDE the source tree.
#
# Source: the git bundle shipped inside the npm package node-llama-cpp
# (npm pack does not run install scripts). Only the npm registry is needed.
#
# Idempotent: does nothing if $CACHE/llama.cpp/models/ggml-vocab-llama-spm.gguf
# already exists.
#
# Env:
#   MAGICPIG_CACHE         cache dir (default: $HOME/.cache/magicpig)
#   NODE_LLAMA_CPP_VERSION npm package version (default: 3.21.1)
set -euo pipefail

CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
PKG_VERSION="${NODE_LLAMA_CPP_VERSION:-3.21.1}"
DEST="$CACHE/llama.cpp"
MARKER="$DEST/models/ggml-vocab-llama-spm.gguf"

log() { echo "fetch_peer: $*"; }
die() { echo "fetch_peer: ERROR: $*" >&2; exit 1; }

if [ -f "$MARKER" ]; then
    log "already present: $DEST (nothing to do)"
    exit 0
fi

for tool in npm tar git; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
done

mkdir -p "$CACHE" || die "cannot create cache dir $CACHE"

if [ -e "$DEST" ]; then
    log "removing incomplete previous checkout $DEST"
    rm -rf "$DEST"
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/magicpig-fetch-peer.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "downloading node-llama-cpp@$PKG_VERSION with 'npm pack' (no install scripts run)"
( cd "$TMP" && npm pack "node-llama-cpp@$PKG_VERSION" >npm-pack.log 2>&1 ) \
    || { cat "$TMP/npm-pack.log" >&2 || true; die "npm pack node-llama-cpp@$PKG_VERSION failed (is the npm registry reachable?)"; }

TGZ="$TMP/node-llama-cpp-$PKG_VERSION.tgz"
[ -f "$TGZ" ] || die "npm pack did not produce $TGZ"

log "extracting package/llama/gitRelease.bundle"
tar -xzf "$TGZ" -C "$TMP" package/llama/gitRelease.bundle \
    || die "package/llama/gitRelease.bundle not found in $TGZ"

BUNDLE="$TMP/package/llama/gitRelease.bundle"
log "cloning git bundle into $DEST"
git -c advice.detachedHead=false clone -q "$BUNDLE" "$DEST.tmp.$$" || { rm -rf "$DEST.tmp.$$"; die "git clone of the bundle failed"; }
mv "$DEST.tmp.$$" "$DEST"

[ -f "$MARKER" ] || die "clone finished but $MARKER is missing"

REV="$(git -C "$DEST" describe --tags --always 2>/dev/null || git -C "$DEST" rev-parse --short HEAD)"
log "done: llama.cpp ($REV) in $DEST"
log "tokenizer test vectors:"
for f in "$DEST"/models/ggml-vocab-llama-spm.gguf* "$DEST"/models/ggml-vocab-llama-bpe.gguf*; do
    if [ -e "$f" ]; then echo "  $f"; fi
done
