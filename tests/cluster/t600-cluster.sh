#!/bin/sh
# t600: adjoin across the hosts of an emulated cluster (tools/cluster.sh,
# docs/cluster.md): HOSTS network namespaces on a bridge, links shaped to
# 1 Gbit/s, one rank on each, TCP the only transport between them.
#  - the dot-product battery's data-movement cases print, figure for figure,
#    what the same cases print on shared memory;
#  - LeNet-5 distributed == sequential (t401) prints across hosts what it
#    prints on shared memory;
#  - data-parallel training with overlap (adjoin-train --model mlp --replicas
#    HOSTS --trace): the replicas end in sync, the timeline is JSON with every
#    rank, and buckets are posted while the backward still runs;
#  - kill -9 of host h1's rank during training ends the job (no hang), and
#    --resume from its last checkpoint ends with a checkpoint byte-identical
#    to an uninterrupted run's.
# The cluster is taken down on exit, on a signal, and -- should this script be
# killed outright -- by the next `tools/cluster.sh up` (its owner is gone).
# Skipped (77) where network namespaces cannot be made, or without MNIST.
#
#   sh t600-cluster.sh HOSTS SOURCE_DIR MPIEXEC ADJOIN_DOTTEST T401 ADJOIN_TRAIN DATA_DIR
set -u
hosts=$1 src=$2 mpiexec=$3 dottest=$4 t401=$5 train=$6 data=$7
me=t600-np$hosts
skip() { echo "$me: skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (running as uid $(id -u))"
for tool in ip tc unshare nsenter; do
  command -v "$tool" >/dev/null || skip "no '$tool' (Debian's iproute2 and util-linux)"
done
[ -r "$data/train-images-idx3-ubyte" ] || skip "no MNIST under $data: provision it with \`sh tools/provision-data.sh mnist\`"
probe=adjoin-probe$$
ip netns add "$probe" 2>/dev/null || skip "this machine refuses to make a network namespace (ip netns add: no CAP_SYS_ADMIN?)"
ip netns del "$probe"

work=$(mktemp -d)
name=t$$
cleanup() {
  sh "$src/tools/cluster.sh" down --name "$name"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
sh "$src/tools/cluster.sh" up "$hosts" --rate 1gbit --name "$name" --owner $$ >/dev/null ||
  { echo "$me: FAIL: tools/cluster.sh up $hosts"; exit 1; }
errors=0
fail() { echo "$me: FAIL: $*"; errors=$((errors + 1)); }
# across LIMIT OUT DONE PROGRAM ARGS...: PROGRAM on the hosts, its output in
# OUT.  MPICH over UCX's TCP sometimes hangs in MPI_Finalize's cleanup after
# the work is done (openucx/ucx#8738, docs/cluster.md): a launch still running
# 30 s after it printed DONE (its last line's pattern; the programs finalize
# within a second of it) is stopped, said so, and its output up to that line
# stands (the launcher's report of the stop is dropped); the
# checks that follow read it as they read any run's.  (A rerun after such a
# hang hung again, or ended in a process-manager error, in 2 of the 4 reruns
# one rehearsal made.)  LIMIT bounds the whole launch.
across() {
  limit=$1 out=$2 done_pattern=$3
  shift 3
  timeout "$limit" sh "$src/tools/cluster-run.sh" --cluster "$name" --mpiexec "$mpiexec" -n "$hosts" "$@" >"$out" 2>&1 &
  launch=$! since_done=0
  while kill -0 "$launch" 2>/dev/null && [ "$since_done" -le 30 ]; do
    grep -q "$done_pattern" "$out" && since_done=$((since_done + 1))
    sleep 1
  done
  hung=false
  if kill -0 "$launch" 2>/dev/null; then
    hung=true
    kill -TERM "$launch" # timeout passes it to the launch's process group
  fi
  wait "$launch"
  status=$?
  if { $hung || [ "$status" -eq 124 ]; } && grep -q "$done_pattern" "$out"; then
    # What follows the last line is the launcher's report of the stop.
    awk -v done="$done_pattern" '{ line[NR] = $0 } $0 ~ done { last = NR }
      END { for (i = 1; i <= last; i++) print line[i] }' "$out" >"$out.kept" && mv "$out.kept" "$out"
    echo "$me: note: '$(basename "$1") ${2:-}' finished its work, then hung in MPI_Finalize (openucx/ucx#8738); its output stands"
    status=0
  fi
  return "$status"
}
local_run() { "$mpiexec" -n "$hosts" "$@"; }

# Prints what two runs printed differently (the first lines that differ).
same_output() {
  if cmp -s "$work/$1.shm" "$work/$1.cluster"; then
    echo "$me: $1: the same $(wc -l <"$work/$1.cluster") lines across hosts as on shared memory, e.g."
    grep -m 2 -E '[0-9]e-|rel' "$work/$1.cluster" | sed 's/^/    /'
  else
    fail "$1 prints differently across hosts:"
    diff "$work/$1.shm" "$work/$1.cluster" | head -10
  fi
}

# 1. The battery and distributed == sequential: the same figures both ways.
# On 2 ranks the whole battery takes seconds; on more, its data-movement
# families (the whole battery there takes minutes, adjoint-battery-np4).
families=${T600_FAMILIES:-}
[ "$hosts" -le 2 ] || families=${families:-"broadcast all-sum-reduce repartition send_receive all_gather"}
for family in ${families:-all}; do
  filter=
  [ "$family" = all ] || filter="--filter $family"
  # shellcheck disable=SC2086 # an option and its value
  local_run "$dottest" $filter >>"$work/battery.shm" 2>&1 || fail "battery $family on shared memory"
  # shellcheck disable=SC2086
  across 150 "$work/battery.part" ' failed, ' "$dottest" $filter || fail "battery $family across hosts"
  cat "$work/battery.part" >>"$work/battery.cluster"
  echo "$me: battery ($family) across $hosts hosts: $(tail -n 1 "$work/battery.cluster")"
done
same_output battery
local_run "$t401" >"$work/t401.shm" 2>&1 || fail "t401 on shared memory: $(tail -n 2 "$work/t401.shm")"
across 150 "$work/t401.cluster" 'No Errors' "$t401" || fail "t401 across hosts: $(tail -n 2 "$work/t401.cluster")"
same_output t401

# 2. Data-parallel training with overlap, traced.
mlp="--model mlp --layout sequential --replicas $hosts --data $data --test-limit 256 --batch 64 --seed 5
--bucket-cap 64K --first-bucket-cap 16K"
# shellcheck disable=SC2086 # word lists
across 150 "$work/dp.out" '^test_accuracy=' "$train" $mlp --train-limit 1024 --epochs 1 --trace "$work/dp.json" ||
  fail "data-parallel training across hosts: $(tail -n 3 "$work/dp.out")"
grep "^replicas in sync" "$work/dp.out" | sed "s/^/$me: /" | grep . || fail "no 'replicas in sync' line"
if python3 "$src/tools/trace-overlap.py" --json "$work/dp.json" >"$work/overlap.json"; then
  python3 "$src/tools/trace-overlap.py" "$work/dp.json" | sed "s/^/$me: /"
  python3 - "$work/overlap.json" "$hosts" <<'PY' || fail "the timeline lacks ranks or overlapped buckets"
import json, sys
summary, hosts = json.load(open(sys.argv[1])), int(sys.argv[2])
ranks = summary["ranks"]
ok = len(ranks) == hosts and all(r["steps"] > 0 and r["posted_in_backward"] > 0 for r in ranks)
sys.exit(0 if ok else 1)
PY
else
  fail "--trace did not write a trace-event timeline"
fi

# 3. kill -9 of host h1's rank, then --resume: the same end as without the kill.
long="--train-limit 512 --epochs 3 --checkpoint-every 4"
# shellcheck disable=SC2086
across 150 "$work/a.out" '^test_accuracy=' "$train" $mlp $long --checkpoint "$work/a.ckpt" ||
  fail "uninterrupted run: $(tail -n 3 "$work/a.out")"
# shellcheck disable=SC2086
timeout 120 sh "$src/tools/cluster-run.sh" --cluster "$name" --mpiexec "$mpiexec" -n "$hosts" \
  "$train" $mlp $long --checkpoint "$work/b.ckpt" >"$work/b1.out" 2>&1 &
job=$!
victim=
for _ in $(seq 600); do
  if [ -s "$work/b.ckpt" ]; then
    for pid in $(ip netns pids "adjoin-$name-h1"); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = adjoin-train ] && victim=$pid
    done
  fi
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -n "$victim" ]; then
  kill -9 "$victim"
  wait "$job"
  status=$?
  echo "$me: killed host h1's rank (pid $victim) after the first checkpoint; the job exited $status"
  [ "$status" -ne 124 ] || fail "the job hung after its rank on h1 was killed (ended by timeout)"
  [ "$status" -ne 0 ] || fail "the run finished before the kill could land"
  # shellcheck disable=SC2086
  across 150 "$work/b2.out" '^test_accuracy=' "$train" $mlp $long --checkpoint "$work/b.ckpt" --resume ||
    fail "resumed run exited $?: $(grep -v '^epoch\|^  gradient' "$work/b2.out" | tail -n 5)"
  grep "resumed from" "$work/b2.out" | sed "s/^/$me: /"
  if cmp -s "$work/a.ckpt" "$work/b.ckpt"; then
    echo "$me: killed + resumed: final checkpoint byte-identical to the uninterrupted run's"
  else
    fail "the resumed run's checkpoint differs from the uninterrupted run's"
  fi
else
  wait "$job"
  fail "found no adjoin-train in host h1's namespace to kill"
fi

if [ "$errors" -eq 0 ]; then
  echo "$me: No Errors"
else
  echo "$me: $errors failure(s)"
  exit 1
fi
