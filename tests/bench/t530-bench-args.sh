#!/bin/sh
# The benchmarks' command lines: --help and -h print the usage on stdout and
# exit 0; text that is not a whole number (or real number) in range, an
# unknown option, an unknown or too large layout and an argument beyond the
# last positional one exit 2 with a line naming the argument and the text
# given, and the usage; bench-plan's unreadable calibration file exits 1.  One
# rank says it, every rank exits alike, and a good call still runs.
#
#   sh t530-bench-args.sh MPIEXEC BENCH_LEVELS_SH BENCH_PROGRAM...
set -u
mpiexec=$1 levels=$2
shift 2
programs="$*"
for program in "$@"; do
  case $(basename "$program") in
  bench-train) train=$program ;;
  bench-conv) conv=$program ;;
  bench-layers) layers=$program ;;
  bench-dp) dp=$program ;;
  bench-halo) halo=$program ;;
  bench-deep-halo) deep_halo=$program ;;
  bench-plan) plan=$program ;;
  bench-primitives) primitives=$program ;;
  bench-agreement) agreement=$program ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
errors=0
fail() { echo "t530: FAIL: $*"; errors=$((errors + 1)); }

# expect_exit NAME STATUS PATTERN COMMAND...: exit status STATUS, PATTERN on
# exactly one line of stderr (one rank says it) and no MPI_Abort.
expect_exit() {
  name=$1 expected=$2 pattern=$3
  shift 3
  "$@" > "$work/out" 2> "$work/err"
  status=$?
  echo "t530: $name -> exit $status: $(head -1 "$work/err")"
  [ "$status" -eq "$expected" ] || fail "$name: exit status $status, not $expected"
  lines=$(grep -c -- "$pattern" "$work/err")
  [ "$lines" -eq 1 ] || fail "$name: stderr has \"$pattern\" on $lines lines, not 1: $(cat "$work/err")"
  ! grep -q "MPI_Abort" "$work/err" || fail "$name: aborted: $(cat "$work/err")"
}
expect_refusal() {
  name=$1
  shift
  expect_exit "$name" 2 "$@"
}

# expect_refusal_with_usage NAME PATTERN COMMAND...: a refusal followed by the
# usage line, and no result on stdout.
expect_refusal_with_usage() {
  expect_refusal "$@"
  grep -q "^usage: " "$work/err" || fail "$1: no usage after the refusal: $(cat "$work/err")"
  [ ! -s "$work/out" ] || fail "$1: printed on stdout: $(cat "$work/out")"
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
expect_refusal "bench-layers --dtype f16" "--dtype 'f16' is not one of f32, f64, both" "$mpiexec" -n 1 "$layers" --dtype f16
expect_refusal "bench-layers --rounds 0" "--rounds '0' is not a whole number from 1" "$mpiexec" -n 1 "$layers" --rounds 0
expect_refusal "bench-layers on 2 ranks" "runs on one rank, not 2" "$mpiexec" -n 2 "$layers" --filter none
expect_refusal "bench-layers.sh 2x rounds" "ROUNDS '2x' is not a whole number" \
  sh "$(dirname "$levels")/bench-layers.sh" --skip-lenet 2x
expect_refusal "bench-levels.sh 5x rounds" "ROUNDS '5x' is not a whole number" sh "$levels" 5x
expect_refusal "bench-levels.sh 0 rounds" "ROUNDS must be at least 1" sh "$levels" 0

# Help: the usage on stdout, from one rank, and exit 0.  The options before
# --help would keep a run that ignored it short.
expect_help() {
  name=$1
  shift
  "$@" > "$work/out" 2> "$work/err"
  status=$?
  echo "t530: $name -> exit $status: $(head -1 "$work/out")"
  [ "$status" -eq 0 ] || fail "$name: exit status $status, not 0: $(cat "$work/err")"
  lines=$(grep -c "^usage: " "$work/out")
  [ "$lines" -eq 1 ] || fail "$name: stdout has $lines usage lines, not 1: $(cat "$work/out")"
}
for program in $programs; do
  case $(basename "$program") in
  bench-conv) expect_help "bench-conv --help" "$program" --help ;;
  bench-halo | bench-deep-halo)
    expect_help "$(basename "$program") --help" "$mpiexec" -n 2 "$program" --trials 1 --seconds 0.001 --help ;;
  *) expect_help "$(basename "$program") --help" "$mpiexec" -n 2 "$program" --help ;;
  esac
done
expect_help "bench-primitives -h" "$mpiexec" -n 2 "$primitives" -h
expect_help "bench-train --deep-halos -h" "$mpiexec" -n 1 "$train" --deep-halos -h

# Unknown options.
expect_refusal_with_usage "bench-halo --bogus" "unknown option '--bogus'" \
  "$mpiexec" -n 2 "$halo" --trials 1 --seconds 0.001 --bogus
expect_refusal_with_usage "bench-deep-halo --bogus" "unknown option '--bogus'" \
  "$mpiexec" -n 2 "$deep_halo" --trials 1 --seconds 0.001 --bogus
expect_refusal_with_usage "bench-agreement --bogus" "unknown option '--bogus'" "$mpiexec" -n 2 "$agreement" --bogus
expect_refusal_with_usage "bench-primitives --bogus" "unknown option '--bogus'" "$mpiexec" -n 2 "$primitives" --bogus
expect_refusal_with_usage "bench-train --bogus" "unknown option '--bogus'" "$mpiexec" -n 1 "$train" --bogus

# Option values out of range, named with the option.
expect_refusal_with_usage "bench-halo --trials 0" "--trials '0' is not a whole number from 1" \
  "$mpiexec" -n 2 "$halo" --seconds 0.001 --trials 0
expect_refusal_with_usage "bench-halo --trials -3" "--trials '-3' is not a whole number from 1" \
  "$mpiexec" -n 2 "$halo" --seconds 0.001 --trials -3
expect_refusal_with_usage "bench-halo --seconds -1" "--seconds '-1' is not a number above 0" \
  "$mpiexec" -n 2 "$halo" --trials 1 --seconds -1
expect_refusal_with_usage "bench-halo --seconds nan" "--seconds 'nan' is not a number above 0" \
  "$mpiexec" -n 2 "$halo" --trials 1 --seconds nan
expect_refusal_with_usage "bench-deep-halo --trials 0" "--trials '0' is not a whole number from 1" \
  "$mpiexec" -n 2 "$deep_halo" --seconds 0.001 --trials 0
expect_refusal_with_usage "bench-deep-halo --batch 0" "--batch '0' is not a whole number from 1" \
  "$mpiexec" -n 2 "$deep_halo" --seconds 0.001 --trials 1 --batch 0
expect_refusal_with_usage "bench-deep-halo --seconds nan" "--seconds 'nan' is not a number above 0" \
  "$mpiexec" -n 2 "$deep_halo" --trials 1 --seconds nan
expect_refusal_with_usage "bench-primitives --max-mb 0" "--max-mb '0' is not a number above 0" \
  "$mpiexec" -n 2 "$primitives" --max-mb 0

# Layouts: known, and within the run's ranks, checked before any result row.
expect_refusal_with_usage "bench-train layout foo" "LAYOUT 'foo' is not one of sequential" \
  "$mpiexec" -n 1 "$train" foo 8 1 8 f32
expect_refusal_with_usage "bench-train dist4 on 1 rank" "LAYOUT 'dist4' needs 4 ranks, the run has 1" \
  "$mpiexec" -n 1 "$train" dist4 64 1 8 f32

# Arguments beyond the last positional one.
expect_refusal_with_usage "bench-conv 1 extra" "unexpected argument 'extra'" "$conv" 1 extra
expect_refusal_with_usage "bench-train 6 positionals" "unexpected argument 'extra'" \
  "$mpiexec" -n 1 "$train" sequential 64 1 32 f32 extra
expect_refusal_with_usage "bench-plan 3 positionals" "unexpected argument 'extra'" \
  "$mpiexec" -n 2 "$plan" "$work/none.cal" 3 extra

# An unreadable calibration file: one line and exit 1 on every rank, no abort.
expect_exit "bench-plan missing file" 1 "bench-plan: calibration: .*none.cal" "$mpiexec" -n 2 "$plan" "$work/none.cal"

"$mpiexec" -n 1 "$train" sequential 64 1 32 f32 > "$work/out" 2>&1 || fail "a good bench-train call failed: $(cat "$work/out")"
grep -q "sequential float32 *[0-9]* images/s" "$work/out" || fail "a good bench-train call printed no rate: $(cat "$work/out")"
"$mpiexec" -n 2 "$train" --deep-halos dist2 64 1 32 f32 > "$work/out" 2>&1 ||
  fail "a good bench-train --deep-halos call failed: $(cat "$work/out")"
grep -q "LeNet-5 dist2 (deep halos)" "$work/out" && grep -q "conv1 \.\. relu (deep halo)" "$work/out" &&
  grep -q "dist2 *float32 *[0-9]* images/s" "$work/out" ||
  fail "bench-train --deep-halos did not say so, fuse the blocks or print a rate: $(cat "$work/out")"

"$mpiexec" -n 1 "$layers" --filter "lenet relu1" --rounds 1 --seconds 0.001 --dtype f32 > "$work/out" 2>&1 ||
  fail "a good bench-layers call failed: $(cat "$work/out")"
grep -q "^lenet relu1 6x14 *f32 *[0-9.]* *[0-9.]*$" "$work/out" ||
  fail "a good bench-layers call printed no times: $(cat "$work/out")"

[ "$errors" -eq 0 ] && echo "t530: all refusals name their argument" && exit 0
exit 1
