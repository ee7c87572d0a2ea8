#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into .device/ (git-ignored through .git/info/exclude):
# the CUDA-enabled binaries of build/ and the shared libraries they need beyond glibc, so the
# device tool can carry them to a GPU machine whose image lacks GTest, Google Benchmark, PCRE2
# or this compiler's libstdc++. Build first: scripts/test.sh or cmake --build build.
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
du -sh "$DEST"
