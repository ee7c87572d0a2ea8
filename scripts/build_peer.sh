#!/usr/bin/env bash
# Build llama.cpp (our peer for cross-checks) OUTSIDE the source tree, then
# build our own reference-dump tool (tools/peer/llama_dump.cpp) against it.
#
#   $CACHE/llama.cpp/build/bin/   llama.cpp binaries + shared libs
#   $CACHE/bin/llama-dump         our dump tool (rpath -> the libs above)
#
# Idempotent: the llama.cpp build is skipped when its stamp (commit + cmake
# options + targets) matches and the binaries exist; llama-dump is rebuilt only
# when the sha256 of its source (or the llama.cpp stamp) changes.
#
#   --lib-only   build only the `llama` library target (+ llama-dump), e.g. for CI where
#                the interop test needs nothing else; an existing full build counts as
#                up to date. Default (no flag): all targets below.
#   --server     build only llama-server, in $CACHE/llama.cpp/build-server (its own build dir:
#                the server needs LLAMA_BUILD_SERVER, which the other targets do not), for
#                scripts/serve_bench.sh. Its web UI is left out (it would need npm).
#
# Env:
#   MAGICPIG_CACHE       cache dir (default: $HOME/.cache/magicpig)
#   MAGICPIG_PEER_JOBS   parallel compile jobs (default: 2)
#   CXX                  compiler for llama-dump (default: g++)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
JOBS="${MAGICPIG_PEER_JOBS:-2}"
CXX="${CXX:-g++}"
SRC="$CACHE/llama.cpp"
BUILD="$SRC/build"
BIN="$CACHE/bin"
DUMP_SRC="$REPO_ROOT/tools/peer/llama_dump.cpp"
LIB_ONLY=0
SERVER=0

log() { echo "build_peer: $*"; }
die() { echo "build_peer: ERROR: $*" >&2; exit 1; }

for arg in "$@"; do
    case "$arg" in
        --lib-only) LIB_ONLY=1 ;;
        --server) SERVER=1 ;;
        -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) die "unknown argument '$arg' (only --lib-only or --server)" ;;
    esac
done

for tool in cmake "$CXX" sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH"
done
[ -f "$DUMP_SRC" ] || die "missing $DUMP_SRC"

# 1. sources ------------------------------------------------------------------
"$SCRIPT_DIR/fetch_peer.sh" || die "fetch_peer.sh failed"

# 2. llama.cpp ----------------------------------------------------------------
GENERATOR="Unix Makefiles"
if command -v ninja >/dev/null 2>&1; then GENERATOR="Ninja"; fi

CMAKE_OPTS=(
    -DCMAKE_BUILD_TYPE=Release
    -DGGML_NATIVE=ON
    -DBUILD_SHARED_LIBS=ON
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=ON
    -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_EXAMPLES=ON
    -DLLAMA_BUILD_SERVER=OFF
    -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_UI=OFF
)

if [ "$SERVER" = 1 ]; then
    SBUILD="$SRC/build-server"
    SOPTS=("${CMAKE_OPTS[@]/-DLLAMA_BUILD_SERVER=OFF/-DLLAMA_BUILD_SERVER=ON}" -DLLAMA_USE_PREBUILT_UI=OFF
           -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
    SSTAMP="$(printf '%s\n' "$(sed -n 's/^commit=//p' "$SRC/.magicpig-source")" "$GENERATOR" "${SOPTS[*]}" | sha256sum | cut -d' ' -f1)"
    if [ -x "$SBUILD/bin/llama-server" ] && [ "$(cat "$SBUILD/.magicpig-build.stamp" 2>/dev/null)" = "$SSTAMP" ]; then
        log "llama-server up to date ($SBUILD/bin/llama-server)"
        exit 0
    fi
    t0=$(date +%s)
    cmake -S "$SRC" -B "$SBUILD" -G "$GENERATOR" "${SOPTS[@]}" >"$CACHE/llama-server-cmake.log" 2>&1 \
        || { tail -n 40 "$CACHE/llama-server-cmake.log" >&2; die "cmake configure of llama-server failed"; }
    log "building llama-server (-j $JOBS; ~10 min on 2 cores)"
    cmake --build "$SBUILD" --config Release -j "$JOBS" --target llama-server || die "llama-server build failed"
    echo "$SSTAMP" >"$SBUILD/.magicpig-build.stamp"
    log "llama-server built in $(( $(date +%s) - t0 )) s: $SBUILD/bin/llama-server"
    exit 0
fi
# llama: the library; test-tokenizer-0: runs the ggml-vocab-*.gguf.inp/.out vectors
TARGETS=(llama llama-bench llama-tokenize llama-quantize llama-perplexity llama-simple test-tokenizer-0)
EXES=(llama-bench llama-tokenize llama-quantize llama-perplexity llama-simple test-tokenizer-0)

# fetch_peer.sh records the vendored commit (the sdist carries no usable git checkout)
COMMIT="$(sed -n 's/^commit=//p' "$SRC/.magicpig-source" 2>/dev/null)"
[ -n "$COMMIT" ] || die "$SRC/.magicpig-source names no commit (rerun scripts/fetch_peer.sh)"
stamp_of() { printf '%s\n' "$COMMIT" "$GENERATOR" "${CMAKE_OPTS[*]}" "$*" | sha256sum | cut -d' ' -f1; }
FULL_STAMP_VALUE="$(stamp_of "${TARGETS[*]}")"
PEER_STAMP_VALUE="$FULL_STAMP_VALUE"
PEER_STAMP="$BUILD/.magicpig-build.stamp"
if [ "$LIB_ONLY" = 1 ]; then
    TARGETS=(llama)
    EXES=()
    PEER_STAMP_VALUE="$(stamp_of "${TARGETS[*]}")"
fi

peer_up_to_date() {
    [ -f "$PEER_STAMP" ] || return 1
    local have
    have="$(cat "$PEER_STAMP")"
    # a full build also satisfies --lib-only; keep its stamp (and so llama-dump's) then
    if [ "$LIB_ONLY" = 1 ] && [ "$have" = "$FULL_STAMP_VALUE" ]; then
        PEER_STAMP_VALUE="$FULL_STAMP_VALUE"
    fi
    [ "$have" = "$PEER_STAMP_VALUE" ] || return 1
    local e
    for e in "${EXES[@]}"; do [ -x "$BUILD/bin/$e" ] || return 1; done
    [ -e "$BUILD/bin/libllama.so" ] || return 1
}

if peer_up_to_date; then
    log "llama.cpp build up to date ($BUILD)"
else
    log "configuring llama.cpp ($COMMIT) in $BUILD"
    # a build dir configured with another generator cannot be reused
    if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$GENERATOR" "$BUILD/CMakeCache.txt"; then
        log "generator changed, removing $BUILD/CMakeCache.txt"
        rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
    fi
    t0=$(date +%s)
    cmake -S "$SRC" -B "$BUILD" -G "$GENERATOR" "${CMAKE_OPTS[@]}" >"$CACHE/llama.cpp-cmake.log" 2>&1 \
        || { tail -n 40 "$CACHE/llama.cpp-cmake.log" >&2; die "cmake configure failed (log: $CACHE/llama.cpp-cmake.log)"; }
    log "building targets: ${TARGETS[*]} (-j $JOBS; on 2 cores ~10-15 min, --lib-only less)"
    cmake --build "$BUILD" --config Release -j "$JOBS" --target "${TARGETS[@]}" \
        || die "llama.cpp build failed"
    echo "$PEER_STAMP_VALUE" >"$PEER_STAMP"
    log "llama.cpp built in $(( $(date +%s) - t0 )) s"
fi

# 3. our dump tool --------------------------------------------------------------
mkdir -p "$BIN"
DUMP_BIN="$BIN/llama-dump"
DUMP_STAMP="$BIN/.llama-dump.stamp"
DUMP_STAMP_VALUE="$( { sha256sum <"$DUMP_SRC"; echo "$PEER_STAMP_VALUE" "$CXX"; } | sha256sum | cut -d' ' -f1)"

if [ -x "$DUMP_BIN" ] && [ -f "$DUMP_STAMP" ] && [ "$(cat "$DUMP_STAMP")" = "$DUMP_STAMP_VALUE" ]; then
    log "llama-dump up to date"
else
    log "compiling $DUMP_SRC -> $DUMP_BIN"
    rm -f "$DUMP_STAMP"
    "$CXX" -std=c++17 -O2 -Wall -Wextra \
        -I"$SRC/include" -I"$SRC/ggml/include" \
        "$DUMP_SRC" -o "$DUMP_BIN.tmp" \
        -L"$BUILD/bin" -Wl,-rpath,"$BUILD/bin" \
        -lllama -lggml -lggml-base -lpthread \
        || die "compiling llama-dump failed"
    mv "$DUMP_BIN.tmp" "$DUMP_BIN"
    echo "$DUMP_STAMP_VALUE" >"$DUMP_STAMP"
fi

log "binaries:"
for e in "${EXES[@]}"; do echo "  $BUILD/bin/$e"; done
echo "  $BUILD/bin/libllama.so"
echo "  $DUMP_BIN"
