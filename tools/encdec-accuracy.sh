#!/bin/sh
# The encoder-decoder's accuracy experiment (issue 16 item 7): for each seed,
# the batch norm encoder-decoder (networks/encdec.net) trained on
# Fashion-MNIST by adjoin sequentially (1 rank), by adjoin on a 2 x 2 spatial
# grid (4 ranks) and by its PyTorch twin (tools/pytorch/encdec_pytorch.py), with the
# same hyperparameters (Adam, learning rate 0.001, batch 256).  Prints each
# run's test accuracy, the three means and the two gaps against the targets:
# adjoin sequential within 0.5 points of PyTorch, distributed within 0.3
# points of sequential.  Logs go to results/ (git-ignored).
#
#   sh tools/encdec-accuracy.sh [SEEDS]        default "1 2 3"
#   environment: EPOCHS [2], BATCH [256], LR_SCHEDULE [constant; or cosine],
#                TRAIN_LIMIT [0 = all 60000],
#                TEST_LIMIT [0 = all 10000], DATA [data/fashion-mnist],
#                ADJOIN_TRAIN [build/apps/adjoin-train], RESULTS [results]
#                (relative paths start at the checkout)
#
# A run that fails is reported on stderr with its log's first and last lines
# and left out of the means; the other runs still go ahead, and the script
# then exits 1.
#
# Build first (sh tools/build.sh) and provision the data
# (sh tools/provision-data.sh); PyTorch runs under Debian's /usr/bin/python3.
set -eu
cd "$(dirname "$0")/.."
seeds=${1:-1 2 3}
epochs=${EPOCHS:-2} batch=${BATCH:-256} schedule=${LR_SCHEDULE:-constant} train_limit=${TRAIN_LIMIT:-0} test_limit=${TEST_LIMIT:-0}
data=${DATA:-data/fashion-mnist}
train=${ADJOIN_TRAIN:-build/apps/adjoin-train}
results=${RESULTS:-results}
limits=""
[ "$train_limit" -gt 0 ] && limits="$limits --train-limit $train_limit"
[ "$test_limit" -gt 0 ] && limits="$limits --test-limit $test_limit"
common="--data $data --epochs $epochs --batch $batch --lr 0.001 --lr-schedule $schedule$limits"
mkdir -p "$results"
out=$results/encdec-accuracy.txt
: > "$out"
. tools/run-logged.sh

# run LABEL LOG COMMAND...: runs it into LOG (run-logged.sh); on success prints
# "LABEL seed S" and the log's last line (the test accuracy) to the terminal
# and $out.
run() {
  label=$1 log=$2
  shift 2
  run_logged encdec-accuracy "$label seed $seed" "$log" "$@" || return 0
  echo "$label seed $seed $(tail -1 "$log")" | tee -a "$out"
}

echo "encdec on $data: $epochs epochs, batch $batch, Adam lr 0.001 ($schedule), train limit $train_limit, test limit $test_limit"
for seed in $seeds; do
  # shellcheck disable=SC2086
  run adjoin-sequential "$results/encdec-sequential-seed$seed.log" \
    mpiexec.mpich -n 1 "$train" --model encdec --layout sequential --optimizer adam --seed "$seed" $common
  # shellcheck disable=SC2086
  run adjoin-2x2 "$results/encdec-2x2-seed$seed.log" \
    mpiexec.mpich -n 4 "$train" --model encdec --layout 2x2 --optimizer adam --seed "$seed" $common
  # shellcheck disable=SC2086
  run pytorch "$results/encdec-pytorch-seed$seed.log" \
    /usr/bin/python3 tools/pytorch/encdec_pytorch.py --seed "$seed" --threads 2 $common
done
# A gap is reported only when both of its sides have runs.
awk 'function gap(x, y, what, target,   g) {
       if (!(x in n) || !(y in n)) { printf "%s: not measured (no runs of one side)\n", what; return }
       g = m[x] - m[y]
       printf "%s: %+.2f points (target within %.1f): %s\n", what, g, target,
         (g < 0 ? -g : g) <= target ? "met" : "NOT met" }
     { split($4, a, "="); s[$1] += a[2]; n[$1]++ }
     END { for (k in n) m[k] = 100 * s[k] / n[k]
           printf "mean test accuracy: adjoin sequential %.2f%%, adjoin 2x2 %.2f%%, pytorch %.2f%% (%d seeds)\n",
             m["adjoin-sequential"], m["adjoin-2x2"], m["pytorch"], n["pytorch"]
           gap("adjoin-sequential", "pytorch", "adjoin sequential - pytorch", 0.5)
           gap("adjoin-2x2", "adjoin-sequential", "adjoin 2x2 - adjoin sequential", 0.3) }' "$out"
exit_if_runs_failed encdec-accuracy "$results"
