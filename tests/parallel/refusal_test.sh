#!/bin/sh
# What --context-parallel does not support is refused up front with one clear line and a non-zero
# exit, alone and under mpirun: the prompt cache, sliding-window models (Gemma 3; the real file
# when scripts/fetch_models.sh fetched it, the engine's own check runs in test_parallel), and bench
# settings it cannot honour. Usage: refusal_test.sh MAGICPIG MPIEXEC MODEL PROMPT
set -u
bin=$1 mpiexec=$2 model=$3 prompt=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

# expect NAME "ERROR LINE" COMMAND...: the command fails within 120 s and prints the line
expect() {
  name=$1 line=$2
  shift 2
  if timeout 120 "$@" >"$out/$name.out" 2>"$out/$name.err"; then
    echo "FAIL $name: exit 0"; fail=1
  elif [ $? -eq 124 ]; then
    echo "FAIL $name: no answer within 120 s"; fail=1
  fi
  if grep -qF -- "$line" "$out/$name.err"; then echo "ok   $name: $line"
  else echo "FAIL $name: no line '$line'"; cat "$out/$name.err"; fail=1; fi
}

mpi="$mpiexec --oversubscribe --allow-run-as-root -np 2"
cache_line="error: --prompt-cache does not work with --context-parallel"
expect prompt_cache "$cache_line" "$bin" run -m "$model" -f "$prompt" -n 4 --prompt-cache "$out/pc.bin" --context-parallel
expect prompt_cache_mpi "$cache_line" $mpi "$bin" run -m "$model" -f "$prompt" -n 4 --prompt-cache "$out/pc.bin" --context-parallel
[ ! -e "$out/pc.bin" ] || { echo "FAIL prompt_cache: the cache file was written"; fail=1; }

expect bench_random "error: --depth-fill random does not work with --context-parallel" \
  "$bin" bench -m "$model" -p 0 -n 4 -d 256 --depth-fill random --context-parallel
expect bench_batch "error: -np: --context-parallel decodes one sequence (use -np 1)" \
  "$bin" bench -m "$model" -p 0 -n 4 -np 2 --context-parallel

gemma="${MAGICPIG_CACHE:-$HOME/.cache/magicpig}/models/gemma-3-270m-q4_k_m.gguf"
if [ -f "$gemma" ]; then
  swa_line="error: --context-parallel does not support models with sliding-window layers (gemma3)"
  expect gemma_run "$swa_line" $mpi "$bin" run -m "$gemma" -p hi -n 4 --context-parallel
  expect gemma_bench "$swa_line" $mpi "$bin" bench -m "$gemma" -p 16 -n 4 -r 1 --context-parallel
  expect gemma_serve "$swa_line" $mpi "$bin" serve -m "$gemma" --port 0 -np 1 --context-parallel
else
  echo "skipped the Gemma 3 CLI checks: no $gemma (scripts/fetch_models.sh)"
fi
exit $fail
