#!/bin/sh
# adjoin-train --placement auto end to end on 2 ranks (a measurement cache of
# the test's own, a small slice of the provisioned MNIST digits):
#   - the MLP (shallowspeed.net) trains on the plan adjoin-plan --net calls best for the same
#     ranks and batch (both read the one cache, so they plan alike), and the
#     run ends with the table of predicted and measured time per stage and
#     phase, every phase's two figures positive;
#   - refusals, exit 2, the reason on one line: --placement auto with
#     --replicas or with --micro-batches (the planner chooses the replicas and
#     plans one pass per step).
# Skipped (77) when data/mnist has not been provisioned.
#
#   sh t444-adjoin-train-auto.sh ADJOIN_PLAN ADJOIN_TRAIN MPIEXEC NETWORK_DIR DATA_DIR
set -u
plan=$1 train=$2 mpiexec=$3 nets=$4 data=$5
[ -r "$data/train-images-idx3-ubyte" ] || { echo "t444: skipped: no MNIST under $data: provision it with \`sh tools/provision-data.sh mnist\`"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ADJ_PLAN_CACHE="$work/cache"
errors=0
fail() { echo "t444: FAIL: $*"; errors=$((errors + 1)); }

net=$nets/shallowspeed.net
"$mpiexec" -n 2 "$plan" --net "$net" --batch 16 --keep 1 >"$work/plan.out" 2>&1 || fail "adjoin-plan: $(cat "$work/plan.out")"
best=$(sed -n 's/^best plan: //p' "$work/plan.out")
[ -n "$best" ] || fail "adjoin-plan printed no best plan: $(cat "$work/plan.out")"
echo "t444: adjoin-plan's best plan: $best"

small="--net $net --data $data --train-limit 128 --test-limit 32 --batch 16 --epochs 1 --seed 3"
# shellcheck disable=SC2086 # word list
"$mpiexec" -n 2 "$train" $small --placement auto >"$work/train.out" 2>&1 ||
  fail "adjoin-train --placement auto: $(tail -5 "$work/train.out")"
head -1 "$work/train.out"
grep -qF "layout auto: $best on 2 ranks" "$work/train.out" ||
  fail "adjoin-train did not run adjoin-plan's best plan: $(head -1 "$work/train.out")"
grep -q '^test_accuracy=' "$work/train.out" || fail "no test accuracy: $(tail -5 "$work/train.out")"
grep -q '^predicted and measured per training step' "$work/train.out" || fail "no predicted against measured table"
sed -n '/^phase /,$p' "$work/train.out"
for phase in forward backward step; do
  awk -v phase="$phase" '$1 == phase && $2 + 0 > 0 && $3 + 0 > 0 { found = 1 } END { exit !found }' "$work/train.out" ||
    fail "no positive predicted and measured $phase time"
done
for stage in fc1 fc2 fc3; do
  grep -q "^[0-9][0-9]* .* $stage " "$work/train.out" || fail "no row for stage $stage"
done

# refused PATTERN ARGS...: exit 2, PATTERN on one line.
refused() {
  pattern=$1
  shift
  # shellcheck disable=SC2086 # word list
  "$mpiexec" -n 2 "$train" $small --placement auto "$@" >"$work/r.out" 2>"$work/r.err"
  status=$?
  echo "t444: --placement auto $* -> exit $status: $(head -1 "$work/r.err")"
  [ $status -eq 2 ] || fail "--placement auto $*: exit $status, not 2"
  [ "$(grep -c -- "$pattern" "$work/r.err")" -eq 1 ] || fail "--placement auto $*: \"$pattern\" not on one line: $(cat "$work/r.err")"
}
refused "--placement auto chooses the replicas" --replicas 2
refused "--placement auto chooses the replicas" --micro-batches 2

[ $errors -eq 0 ] && echo "t444: No Errors" || echo "t444: $errors errors"
[ $errors -eq 0 ]
