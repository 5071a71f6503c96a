#!/bin/sh
# adjoin-plan --calibrate end to end on 2 ranks: it prints both fits (ping-pong
# and all-reduce) and writes them; --calibration reads the file back and the
# planner prices the collectives with the all-reduce fit (the table changes
# against the ping-pong-only file, the header names the fit); a file of the
# ping-pong alone, as older versions wrote, still works; bad files exit 2
# naming the bad value.
#
#   sh t413-adjoin-plan-calibrate.sh ADJOIN_PLAN MPIEXEC NETWORK_DIR
set -u
plan=$1 mpiexec=$2 nets=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
errors=0
fail() { echo "t413: FAIL: $*"; errors=$((errors + 1)); }

"$mpiexec" -n 2 "$plan" --calibrate "$work/cal.txt" > "$work/cal.out" 2>&1 || fail "calibrate: $(cat "$work/cal.out")"
cat "$work/cal.out"
grep -q "^ping-pong (2 ranks): *alpha [0-9.e+-]* s, beta" "$work/cal.out" || fail "no ping-pong fit printed"
grep -q "^all-reduce (2 ranks): alpha [0-9.e+-]* s, beta" "$work/cal.out" || fail "no all-reduce fit printed"
for key in alpha beta allreduce_alpha allreduce_beta allreduce_ranks; do
  grep -q "^$key [0-9]" "$work/cal.txt" || fail "the file has no $key line: $(cat "$work/cal.txt")"
done

ask() { "$plan" --calibration "$1" --mode adjoin --procs 4 --batch 64 --grid 2x2 "$nets/lenet5.net"; }
ask "$work/cal.txt" > "$work/both.out" 2>&1 || fail "plan with both fits: $(cat "$work/both.out")"
grep -q "^collectives: alpha .* from an all-reduce sweep" "$work/both.out" ||
  fail "the header does not name the all-reduce fit"
head -2 "$work/cal.txt" > "$work/old.txt"
ask "$work/old.txt" > "$work/old.out" 2>&1 || fail "plan with a ping-pong-only file: $(cat "$work/old.out")"
grep -q "^collectives:" "$work/old.out" && fail "a ping-pong-only file claims an all-reduce fit"
both=$(grep "^total" "$work/both.out") old=$(grep "^total" "$work/old.out")
echo "t413: totals with both fits:     $both"
echo "t413: totals with ping-pong only: $old"
[ -n "$both" ] && [ "$both" != "$old" ] || fail "the all-reduce fit did not change the plan"

bad() {
  printf "$1" > "$work/bad.txt"
  ask "$work/bad.txt" > "$work/bad.out" 2>&1
  status=$?
  [ $status -eq 2 ] && grep -q "$2" "$work/bad.out" || fail "bad file '$1': exit $status, $(cat "$work/bad.out")"
  echo "t413: bad file: $(head -1 "$work/bad.out")"
}
bad 'alpha 1e-6\nbeta 1e-9\nallreduce_alpha 0\nallreduce_beta 1e-9\nallreduce_ranks 2\n' "allreduce_alpha 0 must be > 0"
bad 'alpha 1e-6\nbeta 1e-9\nallreduce_beta 1e-9\n' "allreduce_ranks together"
bad 'alpha 1e-6\n' "lacks beta"

[ $errors -eq 0 ] && echo "t413: No Errors" || echo "t413: $errors errors"
[ $errors -eq 0 ]
