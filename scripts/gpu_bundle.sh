#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into .device/ (git-ignored through .git/info/exclude):
# the CUDA-enabled binaries of build/ and the shared libraries they need beyond glibc, so the
# device tool can carry them to a GPU machine whose image lacks GTest, Google Benchmark, PCRE2
# or this compiler's libstdc++. Build first: scripts/test.sh or cmake --build build.
# The copies are stripped, and the script fails when the working tree the tool carries (tracked
# and untracked-unignored files plus .device/) exceeds the tool's 64 MiB. A build configured
# with -DCMAKE_CUDA_ARCHITECTURES=90 (H100/H200 only) makes the bundle smaller: the default
# build embeds five GPU architectures in magicpig and test_backends.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
DEST=.device
bins=(magicpig test_backends test_kernels test_attention bench_attention)
for b in "${bins[@]}"; do
  [ -x "$BUILD/bin/$b" ] || { echo "gpu_bundle: $BUILD/bin/$b not built" >&2; exit 1; }
done
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >>.git/info/exclude
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
for b in "${bins[@]}"; do
  cp "$BUILD/bin/$b" "$DEST/bin/"
  # glibc's own libraries stay: the device's are newer, and mixing them breaks the loader.
  ldd "$BUILD/bin/$b" | awk '$3 ~ /^\// {print $3}' \
    | grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so' \
    | while read -r lib; do cp -Ln "$lib" "$DEST/lib/" 2>/dev/null || true; done
done
# --strip-unneeded keeps the dynamic symbols the loader needs; only the symbol tables go.
strip --strip-unneeded "$DEST"/bin/* "$DEST"/lib/* 2>/dev/null || true
limit=$((64 * 1024 * 1024))
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat --format=%s -- 2>/dev/null |
       awk '{s += $1} END {print s + 0}')
bundle=$(find "$DEST" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
total=$((tree + bundle))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu_bundle: $DEST $(mib "$bundle") + working tree $(mib "$tree") = $(mib "$total") of the device tool's 64 MiB"
if [ "$total" -gt "$limit" ]; then
  echo "gpu_bundle: over the 64 MiB the device tool carries; build with -DCMAKE_CUDA_ARCHITECTURES=90" >&2
  exit 1
fi
