#!/bin/sh
# bench --context-parallel at 2 ranks: rank 0 alone prints the table (here JSON, which one more
# rank's output would break), with a prompt test of depth + N tokens, decode at a depth, and a
# magicpig cost over both ranks' shards below dense's. Usage: bench_test.sh MAGICPIG MPIEXEC MODEL PROMPT
set -u
bin=$1 mpiexec=$2 model=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
timeout 300 "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$bin" bench -m "$model" -p 64 -n 8 -d 512 \
  --attn dense,magicpig -r 2 -t 1 -o json --context-parallel >"$out/rows.json" 2>"$out/err" ||
  { echo "FAIL: bench exited $?"; cat "$out/err"; exit 1; }
/usr/bin/python3 - "$out/rows.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
def row(attn, n_prompt, n_gen):
    r = [x for x in rows if x["attn"] == attn and x["n_prompt"] == n_prompt and x["n_gen"] == n_gen]
    assert len(r) == 1, (attn, n_prompt, n_gen, rows)
    return r[0]
assert len(rows) == 4, rows
for attn in ("dense", "magicpig"):
    pp, tg = row(attn, 576, 0), row(attn, 0, 8)
    assert tg["n_depth"] == 512 and len(tg["samples_ts"]) == 2, tg
    assert pp["avg_ts"] > 0 and tg["avg_ts"] > 0, (pp, tg)
    print("%-8s pp576 %.0f t/s, tg8 @ d512 %.1f t/s, keys read %.3f" % (attn, pp["avg_ts"], tg["avg_ts"], tg["key_fraction"]))
assert row("dense", 0, 8)["key_fraction"] == 1.0
assert 0 < row("magicpig", 0, 8)["key_fraction"] < 0.5
assert row("magicpig", 0, 8)["table_bytes"] > 0
print("bench_test: passed")
PY
