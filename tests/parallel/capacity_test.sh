#!/bin/sh
# A context that does not fit one rank's memory budget decodes across 4 ranks with the same
# answer as one process with a big budget. Usage: capacity_test.sh MAGICPIG MPIEXEC MODEL PROMPT
set -u
bin=$1 mpiexec=$2 model=$3 prompt=$4
common="-m $model -f $prompt -n 12 --temp 0 -t 1 -c 4096 --attn dense"
fail=0
# 4096 tokens x 8 KiB of KV = 32 MiB: refused under a 16 MiB budget, alone and as one rank.
if "$bin" run $common --mem-limit 16 >/dev/null 2>err1; then echo "FAIL: one process fit in 16 MiB"; fail=1; fi
grep -q "^error: .*4096 tokens needs 32 MiB" err1 || { echo "FAIL: no refusal line"; cat err1; fail=1; }
if timeout 120 "$mpiexec" --oversubscribe --allow-run-as-root -np 1 "$bin" run $common --mem-limit 16 \
  --context-parallel >/dev/null 2>err2; then echo "FAIL: one rank fit in 16 MiB"; fail=1; fi
grep -q "^error: rank 0: its shard of 4096 context tokens does not fit" err2 || { echo "FAIL: no shard refusal"; cat err2; fail=1; }
# The reference with a big budget, then 4 ranks of 1024 tokens (8 MiB) each under 16 MiB.
"$bin" run $common >ref.txt 2>/dev/null || { echo "FAIL: reference run"; fail=1; }
timeout 300 "$mpiexec" --oversubscribe --allow-run-as-root -np 4 "$bin" run $common --mem-limit 16 \
  --context-parallel >cp.txt 2>cp.err || { echo "FAIL: 4 ranks"; cat cp.err; fail=1; }
echo "one process: $(cat ref.txt)"
echo "4 ranks:     $(cat cp.txt)"
grep "context parallel\|eval time\|exchange" cp.err
cmp -s ref.txt cp.txt || { echo "FAIL: answers differ"; fail=1; }
rm -f err1 err2 ref.txt cp.txt cp.err
exit $fail
