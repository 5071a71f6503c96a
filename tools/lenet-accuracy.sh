#!/bin/sh
# The accuracy experiment of the README: LeNet-5 trained for 10 epochs (batch
# 256, Adam, learning rate 0.001, cross-entropy), sequential on 1 rank and
# distributed (dist4, Table 1) on 4 ranks, 3 seeds each, on the MNIST digits
# and on Fashion-MNIST.  Prints one line per run and a table of mean test
# accuracies; per-run metrics and plots go to results/ (git-ignored).
#
#   sh tools/lenet-accuracy.sh [SETS] [SEEDS]     defaults: "mnist fashion-mnist" "1 2 3"
#
# Build first (sh tools/build.sh) and provision the data
# (sh tools/provision-data.sh).  About 25 minutes on the 2-core machine.
set -eu
cd "$(dirname "$0")/.."
sets=${1:-mnist fashion-mnist}
seeds=${2:-1 2 3}
train=${ADJOIN_TRAIN:-build/examples/adjoin-train}
mkdir -p results
for set in $sets; do
  for layout in sequential dist4; do
    ranks=$([ $layout = sequential ] && echo 1 || echo 4)
    for seed in $seeds; do
      name=results/$set-$layout-seed$seed
      mpiexec.mpich -n "$ranks" "$train" --data "data/$set" --layout "$layout" --epochs 10 --batch 256 --lr 0.001 \
        --optimizer adam --seed "$seed" --metrics "$name.csv" > "$name.log" 2>&1
      echo "$set $layout seed $seed $(tail -1 "$name.log") $(tail -1 "$name.csv" | cut -d, -f5,6 | awk -F, '{printf "epoch %.1f s, %.0f images/s", $1, $2}')"
    done
  done
done | tee results/accuracy.txt
echo
echo "| data set | layout | ranks | seeds | mean test accuracy | min | max |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk '{ split($5, a, "="); k = $1 " | " $2; n[k]++; s[k] += a[2];
       if (!(k in lo) || a[2] < lo[k]) lo[k] = a[2]; if (!(k in hi) || a[2] > hi[k]) hi[k] = a[2] }
     END { for (k in n) { split(k, p, " \\| "); r = p[2] == "sequential" ? 1 : 4;
           printf "| %s | %s | %d | %d | %.2f%% | %.2f%% | %.2f%% |\n", p[1], p[2], r, n[k], 100 * s[k] / n[k], 100 * lo[k], 100 * hi[k] } }' \
  results/accuracy.txt | sort
