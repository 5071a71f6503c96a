#!/bin/sh
# adjoin-plan --net end to end:
#   - on this host under mpiexec -n 2 (the machine measured into a cache of
#     the test's own): the best plan stage by stage, the runners-up, the plan
#     written as a placement file that adjoin-dottest --net --placement builds
#     and proves; a second run reads the cache instead of measuring;
#   - for a machine file (--machine): --procs, --predict, --uniform, --sweep,
#     a memory budget below every plan (exit 1, naming the budget);
#   - refusals, exit 2 with the option and value named, from one rank: a bad
#     --batch, --memory, --keep, --sweep, --dtype, an unknown option, --sweep
#     or --procs without --machine, a machine file without rates; exit 1 for
#     a machine file with a bad line (named) and a network file that is not
#     there.
#
#   sh t443-adjoin-plan-net.sh ADJOIN_PLAN ADJOIN_DOTTEST MPIEXEC NETWORK_DIR
set -u
plan=$1 dottest=$2 mpiexec=$3 nets=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ADJ_PLAN_CACHE="$work/cache"
errors=0
fail() { echo "t443: FAIL: $*"; errors=$((errors + 1)); }

# On the host, 2 ranks: plans, a written placement, and its proof.
"$mpiexec" -n 2 "$plan" --net "$nets/mlp.net" --batch 16 --keep 3 --write "$work/best.place" \
  --write-dir "$work" >"$work/host.out" 2>&1 || fail "host plan: $(cat "$work/host.out")"
head -4 "$work/host.out"
grep -q "^best plan: fc1 " "$work/host.out" || fail "no best plan printed"
grep -q "^step .* s: forward .* backward .* optimizer" "$work/host.out" || fail "no step prediction printed"
[ "$(grep -c '^[1-3] ' "$work/host.out")" -eq 3 ] || fail "not three ranked plans: $(cat "$work/host.out")"
[ -f "$work/cache/machine-2" ] && [ -f "$work/cache/layer-times" ] || fail "the host's measurements were not cached"
for f in best.place plan-1.place plan-2.place plan-3.place; do
  grep -q "^fc1 " "$work/$f" || fail "$f has no fc1 line: $(cat "$work/$f" 2>&1)"
done
cmp -s "$work/best.place" "$work/plan-1.place" || fail "--write and --write-dir's plan-1 differ"
"$mpiexec" -n 2 "$dottest" --net "$nets/mlp.net" --placement "$work/best.place" >"$work/proof.out" 2>&1 ||
  fail "adjoin-dottest on the written placement: $(tail -5 "$work/proof.out")"
tail -2 "$work/proof.out"
entries=$(wc -l <"$work/cache/layer-times")
"$mpiexec" -n 2 "$plan" --net "$nets/mlp.net" --batch 16 --keep 3 >"$work/again.out" 2>&1 ||
  fail "second host plan: $(cat "$work/again.out")"
[ "$(wc -l <"$work/cache/layer-times")" -eq "$entries" ] || fail "the second run measured again"
cmp -s "$work/host.out" "$work/again.out" || fail "the second run, from the cache, planned differently"

# Another machine, from a file.
machine=$work/m.machine
printf 'machine t443\ncores 8\nmemory 1GiB\nbaseline 32MiB\nflops 1e11\nbandwidth 2e10\np2p 2e-6 1e-10 2\n' >"$machine"
"$plan" --net "$nets/lenet5.net" --machine "$machine" --procs 4 --batch 64 >"$work/m.out" 2>&1 ||
  fail "--machine --procs 4: $(cat "$work/m.out")"
grep -q "^best plan: conv1 " "$work/m.out" || fail "--machine: no best plan: $(cat "$work/m.out")"
"$plan" --net "$nets/lenet5.net" --machine "$machine" --procs 4 --batch 64 --predict "replicas=4" >"$work/p.out" 2>&1 ||
  fail "--predict replicas=4: $(cat "$work/p.out")"
grep -q "^memory of rank 0 .* MiB: baseline 32.00" "$work/p.out" || fail "--predict: no memory line: $(cat "$work/p.out")"
"$plan" --net "$nets/lenet5.net" --machine "$machine" --procs 2 --batch 64 --uniform >"$work/u.out" 2>&1 ||
  fail "--uniform: $(cat "$work/u.out")"
grep -qx "window=2x1x1x1,fc=grid:1x2" "$work/u.out" && grep -qx "replicas=2" "$work/u.out" ||
  fail "--uniform misses window=2x1x1x1,fc=grid:1x2 or replicas=2: $(cat "$work/u.out")"
"$plan" --net "$nets/mlp.net" --machine "$machine" --sweep 1:8 --batch 64 >"$work/s.out" 2>&1 ||
  fail "--sweep 1:8: $(cat "$work/s.out")"
cat "$work/s.out"
[ "$(grep -c '^ *[1248] ' "$work/s.out")" -eq 4 ] || fail "--sweep 1:8 printed not 4 rows"
"$plan" --net "$nets/mlp.net" --machine "$machine" --procs 2 --batch 64 --memory 1MiB >"$work/b.out" 2>&1
status=$?
[ $status -eq 1 ] && grep -q "no plan of network mlp on 2 ranks fits 1048576 bytes" "$work/b.out" ||
  fail "--memory 1MiB: exit $status, $(cat "$work/b.out")"

# refused STATUS PATTERN ARGS...: exit STATUS, PATTERN on one line, from one rank.
refused() {
  expected=$1 pattern=$2
  shift 2
  "$mpiexec" -n 2 "$plan" "$@" >"$work/r.out" 2>"$work/r.err"
  status=$?
  echo "t443: $* -> exit $status: $(head -1 "$work/r.err")"
  [ $status -eq "$expected" ] || fail "$*: exit $status, not $expected"
  [ "$(grep -c -- "$pattern" "$work/r.err")" -eq 1 ] || fail "$*: \"$pattern\" not on one line: $(cat "$work/r.err")"
}
net=$nets/mlp.net
refused 2 "--batch '0' is out of range" --net "$net" --batch 0
refused 2 "--memory '2XB'" --net "$net" --batch 8 --memory 2XB
refused 2 "--keep '0' is out of range" --net "$net" --batch 8 --keep 0
refused 2 "--sweep '8' is not P0:P1" --net "$net" --batch 8 --machine "$machine" --sweep 8
refused 2 "--dtype 'f16' is not float32 or float64" --net "$net" --batch 8 --dtype f16
refused 2 "option '--fast' is not known" --net "$net" --batch 8 --fast 1
refused 2 "give --machine FILE" --net "$net" --batch 8 --sweep 1:4
refused 2 "--procs is for --machine" --net "$net" --batch 8 --procs 4
printf 'p2p 2e-6 1e-10 2\n' >"$work/norates.machine"
refused 2 "give flops and bandwidth" --net "$net" --batch 8 --machine "$work/norates.machine" --procs 2
printf 'flops 1e11\nbandwidth 1e10\np2p 2e-6 1e-10 2\nmemory lots\n' >"$work/bad.machine"
refused 1 "bad.machine:4: memory 'lots'" --net "$net" --batch 8 --machine "$work/bad.machine" --procs 2
refused 1 "$work/none.net" --net "$work/none.net" --batch 8

[ $errors -eq 0 ] && echo "t443: No Errors" || echo "t443: $errors errors"
[ $errors -eq 0 ]
