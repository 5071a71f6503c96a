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
# LAYOUTS are adjoin-train's layouts (sequential, dist2, dist4, dist8,
# hybrid4) and dpN: N sequential replicas on N ranks (--layout dp), the global
# batch unchanged (data parallelism, docs/data-parallel.md).  For example
#   sh tools/lenet-accuracy.sh mnist "1 2 3" "sequential dp4"
#
# Build first (sh tools/build.sh) and provision the data
# (sh tools/provision-data.sh).  About 25 minutes on the 2-core machine for
# the defaults.
set -eu
cd "$(dirname "$0")/.."
sets=${1:-mnist fashion-mnist}
seeds=${2:-1 2 3}
layouts=${3:-sequential dist4}
train=${ADJOIN_TRAIN:-build/examples/adjoin-train}
tag=$(echo "$layouts" | tr ' ' '-')
mkdir -p results
for set in $sets; do
  for layout in $layouts; do
    case $layout in
      sequential) ranks=1 flags="--layout sequential" ;;
      dp*) ranks=${layout#dp} flags="--layout dp" ;;
      hybrid*) ranks=${layout#hybrid} flags="--layout $layout" ;;
      *) ranks=${layout#dist} flags="--layout $layout" ;;
    esac
    for seed in $seeds; do
      name=results/$set-$layout-seed$seed
      mpiexec.mpich -n "$ranks" "$train" --data "data/$set" $flags --epochs 10 --batch 256 --lr 0.001 \
        --optimizer adam --seed "$seed" --metrics "$name.csv" > "$name.log" 2>&1
      echo "$set $layout seed $seed $(tail -1 "$name.log") $(tail -1 "$name.csv" | cut -d, -f5,6 | awk -F, '{printf "epoch %.1f s, %.0f images/s", $1, $2}')"
    done
  done
done | tee "results/accuracy-$tag.txt"
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
  "results/accuracy-$tag.txt" | sort
