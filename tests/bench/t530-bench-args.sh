#!/bin/sh
# The benchmarks' positional numbers: text that is not a whole number in
# range exits 2 with a line naming the argument and the text given (one rank
# says it; every rank exits alike), and a good call still runs.
#
#   sh t530-bench-args.sh BENCH_TRAIN BENCH_CONV BENCH_DP MPIEXEC BENCH_LEVELS_SH
set -u
train=$1 conv=$2 dp=$3 mpiexec=$4 levels=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
errors=0
fail() { echo "t530: FAIL: $*"; errors=$((errors + 1)); }

# expect_refusal NAME PATTERN COMMAND...: exit status 2 and PATTERN on stderr.
expect_refusal() {
  name=$1 pattern=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  status=$?
  echo "t530: $name -> exit $status: $(head -1 "$work/err")"
  [ "$status" -eq 2 ] || fail "$name: exit status $status, not 2"
  grep -q -- "$pattern" "$work/err" || fail "$name: stderr lacks \"$pattern\": $(cat "$work/err")"
}

expect_refusal "bench-train f32 as BATCH" "BATCH 'f32' is not a whole number" "$mpiexec" -n 2 "$train" dist2 64 1 f32
expect_refusal "bench-train 0 epochs" "EPOCHS '0' is not a whole number from 1" "$mpiexec" -n 1 "$train" sequential 64 0
expect_refusal "bench-train 12x images" "IMAGES '12x' is not a whole number" "$mpiexec" -n 1 "$train" sequential 12x
expect_refusal "bench-train dtype f16" "DTYPES 'f16' is not one of f32, f64, both" \
  "$mpiexec" -n 1 "$train" sequential 64 1 32 f16
expect_refusal "bench-train --deep-halos 0 epochs" "EPOCHS '0' is not a whole number from 1" \
  "$mpiexec" -n 2 "$train" --deep-halos dist2 64 0
expect_refusal "bench-conv -3" "REPETITIONS '-3' is not a whole number" "$conv" -3
expect_refusal "bench-dp replicas two" "REPLICAS 'two' is not a whole number" "$mpiexec" -n 2 "$dp" sequential two
expect_refusal "bench-levels.sh 5x rounds" "ROUNDS '5x' is not a whole number" sh "$levels" 5x
expect_refusal "bench-levels.sh 0 rounds" "ROUNDS must be at least 1" sh "$levels" 0

"$mpiexec" -n 1 "$train" sequential 64 1 32 f32 > "$work/out" 2>&1 || fail "a good bench-train call failed: $(cat "$work/out")"
grep -q "sequential float32 *[0-9]* images/s" "$work/out" || fail "a good bench-train call printed no rate: $(cat "$work/out")"
"$mpiexec" -n 2 "$train" --deep-halos dist2 64 1 32 f32 > "$work/out" 2>&1 ||
  fail "a good bench-train --deep-halos call failed: $(cat "$work/out")"
grep -q "LeNet-5 dist2 (deep halos)" "$work/out" && grep -q "conv blocks (deep halo)" "$work/out" &&
  grep -q "dist2 *float32 *[0-9]* images/s" "$work/out" ||
  fail "bench-train --deep-halos did not say so, fuse the blocks or print a rate: $(cat "$work/out")"

[ "$errors" -eq 0 ] && echo "t530: all refusals name their argument" && exit 0
exit 1
