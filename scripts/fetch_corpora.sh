#!/usr/bin/env bash
# Fetch the public-domain training/haystack corpora (docs: training/README.md) into
#   $CACHE/corpora/{austen,kjv,jargon}.txt                          full text, one file per corpus
#   $CACHE/corpora/split/{name}.train.txt / {name}.heldout.txt       deterministic split
# Held-out split: the LAST 5% of each corpus's characters, cut at the next line boundary
# (so held-out text is a contiguous tail never seen in training: Revelation for KJV, the end of
# Persuasion for Austen, the last entries for the Jargon File).
#
# Sources: Debian apt only (r-cran-janeaustenr via `apt-get download`, bible-kjv, jargon-text).
# Austen is extracted without R by ../shared/tools/extract_austen.py (outside this repository).
# The shipped model was also trained on two npm corpora (State of the Union addresses, Moby
# Dick) that can no longer be fetched here; training/README.md says what that changes.
#
# Idempotent: each corpus is fetched only if its .txt is missing; the split is redone only if
# missing. Env: MAGICPIG_CACHE (default $HOME/.cache/magicpig).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}"
OUT="$CACHE/corpora"
EXTRACT_AUSTEN="$HERE/../../shared/tools/extract_austen.py"
HELDOUT_FRACTION=0.05

log() { echo "fetch_corpora: $*"; }
die() { echo "fetch_corpora: ERROR: $*" >&2; exit 1; }

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# A new machine may have empty or stale package lists: on a failed install or download, refresh
# them once (apt-get update) and try again.
APT_UPDATED=0
apt_update_once() {
    [ "$APT_UPDATED" = 1 ] && return 1
    APT_UPDATED=1
    log "apt-get update"
    $SUDO apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed"
}
apt_install() {  # apt_install PKG: install a Debian package if it is not installed yet
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" && return 0
    log "apt-get install $1"
    until DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$1" >/dev/null; do
        apt_update_once || die "cannot install apt package $1"
    done
}
apt_download() {  # apt_download PKG DIR: the package's .deb into DIR, without installing it
    until ( cd "$2" && apt-get download -q "$1" >/dev/null 2>&1 ); do
        apt_update_once || die "apt-get download $1 failed"
    done
}

mkdir -p "$OUT/split" || die "cannot create $OUT"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/magicpig-corpora.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# --- Jane Austen (six novels), Debian r-cran-janeaustenr -------------------------------------
if [ ! -s "$OUT/austen.txt" ]; then
    [ -f "$EXTRACT_AUSTEN" ] || die "missing $EXTRACT_AUSTEN (the shared tools folder next to the repository)"
    command -v python3 >/dev/null || die "python3 not found"
    apt_download r-cran-janeaustenr "$TMP"
    dpkg-deb -x "$TMP"/r-cran-janeaustenr_*.deb "$TMP/ja"
    python3 "$EXTRACT_AUSTEN" "$TMP/ja/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb" "$TMP/austen" >/dev/null \
        || die "extract_austen.py failed"
    # fixed order (publication order) so the tail (held-out) is always the same book
    for b in sense_and_sensibility pride_and_prejudice mansfield_park emma northanger_abbey persuasion; do
        [ -s "$TMP/austen/$b.txt" ] || die "Austen book $b not found in the extracted data"
        cat "$TMP/austen/$b.txt"; echo
    done > "$OUT/austen.txt.part"
    mv "$OUT/austen.txt.part" "$OUT/austen.txt"
    log "austen.txt $(wc -c < "$OUT/austen.txt") bytes"
fi

# --- King James Bible, Debian bible-kjv --------------------------------------------------------
if [ ! -s "$OUT/kjv.txt" ]; then
    apt_install bible-kjv
    bible gen1:1-rev22:21 > "$OUT/kjv.txt.part" || die "bible gen1:1-rev22:21 failed"
    mv "$OUT/kjv.txt.part" "$OUT/kjv.txt"
    log "kjv.txt $(wc -c < "$OUT/kjv.txt") bytes"
fi

# --- The Jargon File, Debian jargon-text -------------------------------------------------------
if [ ! -s "$OUT/jargon.txt" ]; then
    apt_install jargon-text
    gz=/usr/share/doc/jargon-text/jargon.txt.gz
    [ -f "$gz" ] || die "$gz not found after installing jargon-text"
    gzip -dc "$gz" > "$OUT/jargon.txt.part"
    mv "$OUT/jargon.txt.part" "$OUT/jargon.txt"
    log "jargon.txt $(wc -c < "$OUT/jargon.txt") bytes"
fi

# --- deterministic held-out split: last 5% of characters, at a line boundary -------------------
for name in austen kjv jargon; do
    tr="$OUT/split/$name.train.txt"; ho="$OUT/split/$name.heldout.txt"
    [ -s "$tr" ] && [ -s "$ho" ] && [ "$tr" -nt "$OUT/$name.txt" ] && continue
    python3 - "$OUT/$name.txt" "$tr" "$ho" "$HELDOUT_FRACTION" <<'PY' || die "split of $name failed"
import sys
src, tr, ho, frac = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
text = open(src, encoding="utf-8", errors="replace").read()
cut = int(len(text) * (1.0 - frac))
nl = text.find("\n", cut)
cut = len(text) if nl < 0 else nl + 1
open(tr, "w", encoding="utf-8").write(text[:cut])
open(ho, "w", encoding="utf-8").write(text[cut:])
PY
    log "split $name: train $(wc -c < "$tr") / held-out $(wc -c < "$ho") bytes"
done
log "done: $OUT"
