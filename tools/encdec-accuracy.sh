#!/bin/sh
# The encoder-decoder's accuracy experiment (issue 16 item 7): for each seed,
# the batch norm encoder-decoder (include/adjoin/encdec.h) trained on
# Fashion-MNIST by adjoin sequentially (1 rank), by adjoin on a 2 x 2 spatial
# grid (4 ranks) and by its PyTorch twin (tools/encdec_pytorch.py), with the
# same hyperparameters (Adam, learning rate 0.001, batch 256).  Prints each
# run's test accuracy, the three means and the two gaps against the targets:
# adjoin sequential within 0.5 points of PyTorch, distributed within 0.3
# points of sequential.  Logs go to results/ (git-ignored).
#
#   sh tools/encdec-accuracy.sh [SEEDS]        default "1 2 3"
#   environment: EPOCHS [2], BATCH [256], LR_SCHEDULE [constant; or cosine],
#                TRAIN_LIMIT [0 = all 60000],
#                TEST_LIMIT [0 = all 10000], DATA [data/fashion-mnist]
#
# Build first (sh tools/build.sh) and provision the data
# (sh tools/provision-data.sh); PyTorch runs under Debian's /usr/bin/python3.
set -eu
cd "$(dirname "$0")/.."
seeds=${1:-1 2 3}
epochs=${EPOCHS:-2} batch=${BATCH:-256} schedule=${LR_SCHEDULE:-constant} train_limit=${TRAIN_LIMIT:-0} test_limit=${TEST_LIMIT:-0}
data=${DATA:-data/fashion-mnist}
train=${ADJOIN_TRAIN:-build/examples/adjoin-train}
limits=""
[ "$train_limit" -gt 0 ] && limits="$limits --train-limit $train_limit"
[ "$test_limit" -gt 0 ] && limits="$limits --test-limit $test_limit"
common="--data $data --epochs $epochs --batch $batch --lr 0.001 --lr-schedule $schedule$limits"
mkdir -p results
out=results/encdec-accuracy.txt
echo "encdec on $data: $epochs epochs, batch $batch, Adam lr 0.001 ($schedule), train limit $train_limit, test limit $test_limit"
for seed in $seeds; do
  log=results/encdec-sequential-seed$seed.log
  # shellcheck disable=SC2086
  mpiexec.mpich -n 1 "$train" --model encdec --layout sequential --optimizer adam --seed "$seed" $common > "$log" 2>&1
  echo "adjoin-sequential seed $seed $(tail -1 "$log")"
  log=results/encdec-2x2-seed$seed.log
  # shellcheck disable=SC2086
  mpiexec.mpich -n 4 "$train" --model encdec --layout 2x2 --optimizer adam --seed "$seed" $common > "$log" 2>&1
  echo "adjoin-2x2 seed $seed $(tail -1 "$log")"
  log=results/encdec-pytorch-seed$seed.log
  # shellcheck disable=SC2086
  /usr/bin/python3 tools/encdec_pytorch.py --seed "$seed" --threads 2 $common > "$log" 2>&1
  echo "pytorch seed $seed $(tail -1 "$log")"
done | tee "$out"
awk '{ split($4, a, "="); s[$1] += a[2]; n[$1]++ }
     END { for (k in n) m[k] = 100 * s[k] / n[k]
           printf "mean test accuracy: adjoin sequential %.2f%%, adjoin 2x2 %.2f%%, pytorch %.2f%% (%d seeds)\n",
             m["adjoin-sequential"], m["adjoin-2x2"], m["pytorch"], n["pytorch"]
           g1 = m["adjoin-sequential"] - m["pytorch"]; g2 = m["adjoin-2x2"] - m["adjoin-sequential"]
           printf "adjoin sequential - pytorch: %+.2f points (target within 0.5): %s\n", g1, (g1 < 0 ? -g1 : g1) <= 0.5 ? "met" : "NOT met"
           printf "adjoin 2x2 - adjoin sequential: %+.2f points (target within 0.3): %s\n", g2, (g2 < 0 ? -g2 : g2) <= 0.3 ? "met" : "NOT met" }' "$out"
