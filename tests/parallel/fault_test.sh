#!/bin/sh
# A rank that dies or stops answering mid-decode must end the whole job with an error in bounded
# time, never a hang. Usage: fault_test.sh MAGICPIG MPIEXEC MODEL PROMPT
set -u
bin=$1 mpiexec=$2 model=$3 prompt=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

# run NAME LIMIT_S MPIEXEC-FLAGS... -- ENV...: one job with rank 1 failing at decode step 3
run() {
  name=$1 limit=$2 mode=$3 flags=$4
  start=$(date +%s)
  timeout 120 "$mpiexec" --oversubscribe --allow-run-as-root $flags -x MAGICPIG_CP_FAIL_RANK=1 \
    -x MAGICPIG_CP_FAIL_STEP=3 -x MAGICPIG_CP_FAIL_MODE="$mode" -np "$np" "$bin" run -m "$model" -f "$prompt" \
    -n 40 --ignore-eos --temp 0 -t 1 -c 640 --attn dense --context-parallel --cp-timeout 8 \
    >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  took=$(( $(date +%s) - start ))
  echo "$name: exit $rc after ${took} s"
  if [ "$took" -gt "$limit" ] || [ "$rc" -eq 124 ]; then
    echo "FAIL $name: took ${took} s (limit ${limit} s)"; cat "$out/$name.err"; fail=1
  fi
}

# 1. rank 1 killed; the MPI runtime notices and ends the job.
np=4 run killed 30 kill ""
[ "$rc" -ne 0 ] || { echo "FAIL killed: exit 0"; fail=1; }
# 2. rank 1 killed, the runtime told to keep the survivors running (--enable-recovery): our
#    deadline must end them, each with an error line.
np=4 run killed_recovery 30 kill "--enable-recovery"
grep -q "^error: rank [023]: " "$out/killed_recovery.err" || { echo "FAIL killed_recovery: no error line"; cat "$out/killed_recovery.err"; fail=1; }
# 3. rank 1 alive but silent (a frozen host): the others give up after --cp-timeout.
np=2 run hang 30 hang ""
[ "$rc" -ne 0 ] || { echo "FAIL hang: exit 0"; fail=1; }
grep -q "^error: rank 0: no answer from the other ranks within 8 s" "$out/hang.err" || { echo "FAIL hang: no error line"; cat "$out/hang.err"; fail=1; }
exit $fail
