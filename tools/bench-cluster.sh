#!/bin/sh
# The figures of docs/cluster.md on an emulated cluster of 2 hosts, one rank
# and one kernel thread each, at each link rate: the link the calibrations
# recover, and data-parallel training's throughput and overlap.  Run it on a
# quiet machine (as root; it makes and takes down its own cluster):
#
#   sh tools/bench-cluster.sh [BUILD_DIR]
#
# Environment: RATES (default "1gbit 10gbit"), MODEL (mlp; encdec), BATCH
# (global batch, 256), IMAGES (training images per epoch, 32768), EPOCHS (5:
# the first is a warm-up, the figures are the later epochs' median), CAPS
# ("16K 64K": first and later bucket caps), DATA (data/mnist; encdec takes
# data/fashion-mnist), PROGRESS (the progress modes compared, "poll thread
# mpi": ADJ_PROGRESS, with MPICH's MPIR_CVAR_ASYNC_PROGRESS=1 for mpi).
# Prints, per rate (and per progress mode):
#   link:    the rate set; adjoin-plan --calibrate's ping-pong fit (alpha,
#            Gbit/s, ratio to the rate set) and its all-reduce fit;
#   train:   images/s of one rank alone, of dp2 with the reduction overlapped
#            (buckets posted during the backward), of dp2 reducing after the
#            backward; the reduction the trace shows hidden; the ratios
#            overlap / after and dp2 / alone;
#   ceiling: what raw MPI on the same link allows: one all-reduce of the
#            gradient by the calibrated all-reduce fit, against the step's
#            reduction as the after-backward run measured it;
#   compute: what the two cores compute side by side with no link at all:
#            two one-rank runs of half the batch at once, their images/s
#            together against one rank alone, and dp2 against that.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
rates=${RATES:-"1gbit 10gbit"} model=${MODEL:-mlp} batch=${BATCH:-256} images=${IMAGES:-32768}
epochs=${EPOCHS:-5} caps=${CAPS:-"16K 64K"} modes=${PROGRESS:-"poll thread mpi"}
data=${DATA:-data/mnist}
[ "$model" = encdec ] && data=${DATA:-data/fashion-mnist}
train=$build/apps/adjoin-train plan=$build/apps/adjoin-plan
for program in "$train" "$plan"; do
  [ -x "$program" ] || { echo "bench-cluster: no $program: build first (sh tools/build.sh)"; exit 1; }
done
[ -r "$data/train-images-idx3-ubyte" ] || { echo "bench-cluster: no data under $data (tools/provision-data.sh)"; exit 1; }
mpiexec=$(command -v mpiexec.mpich || command -v mpiexec)
name=b$$
work=$(mktemp -d)
trap 'sh tools/cluster.sh down --name "$name"; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT HUP
# One thread per rank, the measured algorithm table of this machine left out.
export ADJ_NUM_THREADS=1 ADJ_ALGORITHM_CACHE="$work/algorithms"
first_cap=${caps% *} cap=${caps#* }
common="--model $model --layout sequential --data $data --train-limit $images --test-limit 256 --batch $batch
--epochs $epochs --first-bucket-cap $first_cap --bucket-cap $cap --seed 3"

# The median images/s of the epochs after the first, from adjoin-train's output.
rate_of() {
  sed -n 's/^epoch .* \([0-9.]*\) images\/s$/\1/p' "$1" | tail -n +2 | sort -n |
    awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# The reducer's wait per step of the last epoch (ms), from the epoch summary.
wait_of() { sed -n 's/.*wait \([0-9.]*\) ms.*/\1/p' "$1" | tail -n 1; }

# One dp2 run: progress MODE, overlapped or not (--reduce-after-backward).
dp_run() {
  mode=$1 label=$2
  shift 2
  async=0
  [ "$mode" = mpi ] && async=1
  # shellcheck disable=SC2086 # word lists
  ADJ_PROGRESS=$mode MPIR_CVAR_ASYNC_PROGRESS=$async run -n 2 "$train" $common --replicas 2 \
    --trace "$work/$label.json" "$@" >"$work/$label.out" 2>&1
}

# Two one-rank runs of half the global batch at once, on the host (no link):
# the compute two ranks of this machine can do side by side.
side_by_side() {
  # shellcheck disable=SC2086 # word lists
  for k in 0 1; do
    timeout "${RUN_SECONDS:-300}" "$mpiexec" -n 1 "$train" $common --batch $((batch / 2)) \
      >"$work/half-$k.out" 2>&1 &
  done
  wait
}

# The compute row: the side-by-side runs' images/s together, against one
# rank alone, and dp2 overlapped against them.
compute_row() {
  awk -v rate="$1" -v alone="$2" -v a="$3" -v b="$4" -v dp="$5" 'BEGIN {
    both = a + b
    printf "| %s | compute | two one-rank runs of half the batch at once: %.0f img/s together = %.3f x one rank alone; dp2 overlap / that %.3f |\n",
      rate, both, (alone > 0 ? both / alone : 0), (both > 0 ? dp / both : 0) }'
}

bench_rate() {
  rate=$1
  sh tools/cluster.sh up 2 --rate "$rate" --name "$name" >/dev/null
  # A run that has not ended after RUN_SECONDS (300) is ended; its row then
  # shows what it printed before.  MPICH's UCX over TCP now and then spins
  # in MPI_Finalize after the run's last line (UCX's TCP transport stops
  # progressing an endpoint that the peer's flush waits for: openucx/ucx
  # issue 8738), so a hung finalize costs this long and no figure.
  run() { timeout "${RUN_SECONDS:-300}" sh tools/cluster-run.sh --cluster "$name" --mpiexec "$mpiexec" "$@" || true; }
  run -n 2 "$plan" --calibrate "$work/calibration" >/dev/null
  # shellcheck disable=SC2086 # word lists
  run -n 1 "$train" $common >"$work/alone.out" 2>&1
  side_by_side
  dp_run poll after --reduce-after-backward
  link=--link
  for mode in $modes; do
    dp_run "$mode" "overlap-$mode"
    bytes=$(sed -n 's/.*per step: \([0-9]*\) bytes.*/\1/p' "$work/overlap-$mode.out" | tail -n 1)
    hidden=$(python3 tools/trace-overlap.py "$work/overlap-$mode.json" | tail -n 1 |
      sed 's/^hidden by the overlap: \([0-9.]*\)%.*/\1/')
    python3 tools/bench-cluster-table.py $link "$rate" "$mode" "$work/calibration" "$(rate_of "$work/alone.out")" \
      "$(rate_of "$work/overlap-$mode.out")" "$(rate_of "$work/after.out")" "$hidden" "$bytes" \
      "$(wait_of "$work/after.out")"
    [ -n "$link" ] && compute_row "$rate" "$(rate_of "$work/alone.out")" "$(rate_of "$work/half-0.out")" \
      "$(rate_of "$work/half-1.out")" "$(rate_of "$work/overlap-$mode.out")"
    link=
  done
  sh tools/cluster.sh down --name "$name"
}

echo "bench-cluster: 2 hosts, one rank and one kernel thread each, $model, global batch $batch, $images images" \
  "per epoch, $epochs epochs (the first a warm-up), buckets $first_cap then $cap; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| rate | what | figures |"
echo "| --- | --- | --- |"
for rate in $rates; do bench_rate "$rate"; done
