#!/bin/sh
# The figures of docs/cluster.md on an emulated cluster of 2 hosts, one rank
# and one kernel thread each, at each link rate: the link the calibrations
# recover, and data-parallel training's throughput and overlap.  Run it on a
# quiet machine (as root; it makes and takes down its own cluster):
#
#   sh tools/bench-cluster.sh [BUILD_DIR]
#
# Environment: RATES (default "1gbit 10gbit"), MODEL (mlp; encdec), BATCH
# (global batch, 256), IMAGES (training images per epoch, 4096), EPOCHS (3:
# the first is a warm-up, the figures are the later epochs' median), CAPS
# ("16K 64K": first and later bucket caps), DATA (data/mnist; encdec takes
# data/fashion-mnist).  Prints, per rate:
#   link:    the rate set; adjoin-plan --calibrate's ping-pong fit (alpha,
#            Gbit/s, ratio to the rate set) and its all-reduce fit;
#   train:   images/s of one rank alone, of dp2 with the reduction overlapped
#            (buckets posted during the backward), of dp2 reducing after the
#            backward; the reduction the trace shows hidden; the ratios
#            overlap / after and dp2 / alone;
#   ceiling: what raw MPI on the same link allows: one all-reduce of the
#            gradient by the calibrated all-reduce fit, against the step's
#            reduction as the after-backward run measured it.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
rates=${RATES:-"1gbit 10gbit"} model=${MODEL:-mlp} batch=${BATCH:-256} images=${IMAGES:-4096}
epochs=${EPOCHS:-3} caps=${CAPS:-"16K 64K"}
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

bench_rate() {
  rate=$1
  sh tools/cluster.sh up 2 --rate "$rate" --name "$name" >/dev/null
  run() { sh tools/cluster-run.sh --cluster "$name" --mpiexec "$mpiexec" "$@"; }
  run -n 2 "$plan" --calibrate "$work/calibration" >/dev/null
  # shellcheck disable=SC2086 # word lists
  run -n 1 "$train" $common >"$work/alone.out" 2>&1
  # shellcheck disable=SC2086
  run -n 2 "$train" $common --replicas 2 --trace "$work/overlap.json" >"$work/overlap.out" 2>&1
  # shellcheck disable=SC2086
  run -n 2 "$train" $common --replicas 2 --reduce-after-backward --trace "$work/after.json" >"$work/after.out" 2>&1
  bytes=$(sed -n 's/.*per step: \([0-9]*\) bytes.*/\1/p' "$work/overlap.out" | tail -n 1)
  hidden=$(python3 tools/trace-overlap.py "$work/overlap.json" | tail -n 1 | sed 's/^hidden by the overlap: \([0-9.]*\)%.*/\1/')
  python3 - "$rate" "$work/calibration" "$(rate_of "$work/alone.out")" "$(rate_of "$work/overlap.out")" \
    "$(rate_of "$work/after.out")" "$hidden" "$bytes" "$(wait_of "$work/after.out")" <<'PY'
import sys
rate, path, alone, overlap, after, hidden, nbytes, wait_after = sys.argv[1:]
units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
unit = next(u for u in units if rate.endswith(u))
bits = float(rate[: -len(unit)]) * units[unit]
cal = dict(line.split()[:2] for line in open(path) if line.strip() and not line.startswith("#"))
alpha, beta = float(cal["alpha"]), float(cal["beta"])
measured = 8.0 / beta
alone, overlap, after, nbytes = float(alone), float(overlap), float(after), float(nbytes)
raw = float(cal["allreduce_alpha"]) + float(cal["allreduce_beta"]) * nbytes
print(f"| {rate:>6} | link | ping-pong alpha {alpha * 1e6:.1f} us, {measured / 1e9:.3f} Gbit/s "
      f"= {measured / bits:.3f} x the rate set |")
print(f"| {rate:>6} | train | alone {alone:.0f} img/s, dp2 overlap {overlap:.0f}, dp2 after {after:.0f}; "
      f"hidden {hidden}%; overlap / after {overlap / after:.3f}; dp2 / alone {overlap / alone:.3f} |")
print(f"| {rate:>6} | ceiling | raw MPI all-reduce of {nbytes / 1e6:.3f} MB by the calibrated fit {raw * 1e3:.3f} ms; "
      f"the after-backward step waited {float(wait_after):.3f} ms: {raw * 1e3 / float(wait_after):.3f} of it |")
PY
  sh tools/cluster.sh down --name "$name"
}

echo "bench-cluster: 2 hosts, one rank and one kernel thread each, $model, global batch $batch, $images images" \
  "per epoch, $epochs epochs (the first a warm-up), buckets $first_cap then $cap; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| rate | what | figures |"
echo "| --- | --- | --- |"
for rate in $rates; do bench_rate "$rate"; done
