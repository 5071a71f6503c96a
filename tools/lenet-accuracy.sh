#!/bin/sh
# The accuracy experiment of the README: LeNet-5 trained for 10 epochs (batch
# 256, Adam, learning rate 0.001, cross-entropy), in each layout, 3 seeds each,
# on the MNIST digits and on Fashion-MNIST.  Prints one line per run, a table
# of mean test accuracies, and each layout's mean difference from sequential
# over the seeds both ran (the same seed gives the same initial parameters and
# the same global batches in every layout).  Per-run metrics and plots go to
# results/ (git-ignored).
#
#   sh tools/lenet-accuracy.sh [SETS] [SEEDS] [LAYOUTS]
#       defaults: "mnist fashion-mnist" "1 2 3" "sequential dist4"
#
# LAYOUTS are adjoin-train's LeNet-5 layouts (sequential, dist2, dist4,
# dist8, hybrid4, hybrid4-batch, a grid RxC on R x C ranks such as 2x2) and
# dpN: N sequential replicas on N ranks (--layout dp), the global batch
# unchanged (data parallelism, docs/data-parallel.md).  For example
#   sh tools/lenet-accuracy.sh mnist "1 2 3" "sequential dp4"
#
# A run that fails (a layout adjoin-train refuses, a crash) is reported on
# stderr with its log's first and last lines and left out of the table; the
# other runs still go ahead, and the script then exits 1.
#
# Build first (sh tools/build.sh) and provision the data
# (sh tools/provision-data.sh).  About 25 minutes on the 2-core machine for
# the defaults.  Environment: ADJOIN_TRAIN [build/apps/adjoin-train],
# RESULTS [results] (relative paths start at the checkout).
set -eu
cd "$(dirname "$0")/.."
sets=${1:-mnist fashion-mnist}
seeds=${2:-1 2 3}
layouts=${3:-sequential dist4}
train=${ADJOIN_TRAIN:-build/apps/adjoin-train}
results=${RESULTS:-results}
tag=$(echo "$layouts" | tr ' ' '-')
out=$results/accuracy-$tag.txt
. tools/run-logged.sh

# A positive whole number of at most 4 digits (no leading zero).
whole() { case $1 in '' | 0* | *[!0-9]* | ?????*) return 1 ;; esac; }

# Sets ranks and flags for a layout.  Anything not recognised runs on 1 rank
# with --layout as given, so adjoin-train refuses it by name.
layout_ranks() {
  ranks=1 flags="--layout $1"
  case $1 in
    dist2) ranks=2 ;;
    dist4 | hybrid4 | hybrid4-batch) ranks=4 ;;
    dist8) ranks=8 ;;
    dp*) whole "${1#dp}" && ranks=${1#dp} flags="--layout dp" ;;
    *x*) whole "${1%%x*}" && whole "${1#*x}" && ranks=$((${1%%x*} * ${1#*x})) ;;
  esac
  return 0
}

mkdir -p "$results"
: > "$out"
for set in $sets; do
  for layout in $layouts; do
    layout_ranks "$layout"
    for seed in $seeds; do
      name=$results/$set-$layout-seed$seed
      # shellcheck disable=SC2086
      run_logged lenet-accuracy "$set $layout seed $seed" "$name.log" mpiexec.mpich -n "$ranks" "$train" --data "data/$set" $flags \
        --epochs 10 --batch 256 --lr 0.001 --optimizer adam --seed "$seed" --metrics "$name.csv" || continue
      echo "$set $layout seed $seed $(tail -1 "$name.log") $(tail -1 "$name.csv" | cut -d, -f5,6 | awk -F, '{printf "epoch %.1f s, %.0f images/s", $1, $2}')" |
        tee -a "$out"
    done
  done
done
echo
echo "| data set | layout | seeds | mean test accuracy | min | max | mean - sequential (same seeds) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk '{ split($5, a, "="); k = $1 " | " $2; n[k]++; s[k] += a[2]; acc[$1, $2, $4] = a[2];
       if (!(k in lo) || a[2] < lo[k]) lo[k] = a[2]; if (!(k in hi) || a[2] > hi[k]) hi[k] = a[2]
       if ($2 != "sequential") pairs[$1, $2, $4] = 1 }
     END { for (p in pairs) { split(p, q, SUBSEP); if ((q[1], "sequential", q[3]) in acc) {
             k = q[1] " | " q[2]; dn[k]++; d[k] += acc[q[1], q[2], q[3]] - acc[q[1], "sequential", q[3]] } }
           for (k in n) printf "| %s | %d | %.2f%% | %.2f%% | %.2f%% | %s |\n", k, n[k], 100 * s[k] / n[k], 100 * lo[k],
             100 * hi[k], k ~ / sequential$/ ? "-" : dn[k] ? sprintf("%+.2f points over %d seeds", 100 * d[k] / dn[k], dn[k]) : "no sequential run" }' \
  "$out" | sort
exit_if_runs_failed lenet-accuracy "$results"
