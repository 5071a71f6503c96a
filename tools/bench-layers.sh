#!/bin/sh
# Issue 48's tables on this host, each from runs that alternate with their
# baseline in the same run:
#
#   1. bench-layers: every layer kind beside PyTorch 1.13's op at the same
#      shape (tools/pytorch/bench_layers.py, alternating case by case),
#      forward and forward + backward, float32 and float64, at each
#      instruction-set level the CPU runs down to x86-64-v3 (the baseline
#      too with --baseline);
#   2. the encoder-decoder, sequential (`adjoin-train --model encdec --layout
#      sequential`), against tools/pytorch/encdec_pytorch.py with the same
#      arguments: epoch 2's time, ROUNDS alternating rounds at each level;
#   3. LeNet-5's per-level table (tools/bench-levels.sh ROUNDS);
#   4. the encoder-decoder trained twice at a fixed thread count: the
#      checkpoints must be the same bytes;
#   5. perf record (cpu-clock) of one encoder-decoder epoch at the best
#      level: the share of samples in the kernels' thread team waiting
#      (adj_team_run and adj_team_worker_main themselves, and any OpenMP
#      runtime).
#
#   sh tools/bench-layers.sh [--baseline] [--skip-lenet] [ROUNDS]    default 3
#
# Each level is its own build, made here if missing (build-level-v4,
# build-level-v3, build-level-baseline, as tools/bench-levels.sh makes them).
# OPENBLAS_CORETYPE is set as tools/main.sh sets it when OpenBLAS is older
# than the CPU.  The machine should be quiet: every figure is a wall-clock
# time of the default thread count (the node's cores).
set -eu
cd "$(dirname "$0")/.."
baseline=no lenet=yes rounds=3
for arg in "$@"; do
  case "$arg" in
  --baseline) baseline=yes ;;
  --skip-lenet) lenet=no ;;
  '' | *[!0-9]*) echo "bench-layers.sh: ROUNDS '$arg' is not a whole number" >&2; exit 2 ;;
  *) rounds=$arg ;;
  esac
done
[ "$rounds" -ge 1 ] || { echo "bench-layers.sh: ROUNDS must be at least 1" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "bench-layers.sh: needs /usr/bin/python3 with torch" >&2; exit 1; }

levels=""
[ "$baseline" = no ] || levels=baseline
for level in x86-64-v3 x86-64-v4; do
  if /lib64/ld-linux-x86-64.so.2 --help 2>/dev/null | grep -q "$level (supported"; then levels="$levels $level"; fi
done
best=""
for level in $levels; do
  dir=build-level-${level#x86-64-}
  [ -f "$dir/build.ninja" ] || meson setup "$dir" -Dkernel_isa="$level" >/dev/null
  ninja -C "$dir" bench/bench-layers apps/adjoin-train >/dev/null
  best=$dir # the last level listed is the CPU's best
done
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  coretype=$("$best/apps/adjoin-train" --openblas-coretype)
  [ -z "$coretype" ] || export OPENBLAS_CORETYPE="$coretype"
fi
sh tools/provision-data.sh fashion-mnist >/dev/null
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "bench-layers.sh: $rounds rounds, levels$levels, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}, $cpu"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo
echo "== 1. every layer kind against PyTorch's op (ratio = PyTorch's time / adjoin's; medians of $rounds rounds)"
for level in $levels; do
  echo "-- $level"
  "build-level-${level#x86-64-}/bench/bench-layers" --rounds "$rounds" \
    --twin "/usr/bin/python3 tools/pytorch/bench_layers.py" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
done

# The encoder-decoder on Fashion-MNIST as issue 48 ran it.
encdec_args="--epochs 2 --batch 128 --train-limit 12000 --test-limit 2000"
epoch2() { sed -n 's/^epoch *2\/2 .* time \([0-9.]*\) s.*/\1/p'; }

echo
echo "== 2. the encoder-decoder, sequential, against its PyTorch twin (epoch 2, seconds; $rounds alternating rounds)"
r=1
while [ "$r" -le "$rounds" ]; do
  line="round $r pytorch $(/usr/bin/python3 tools/pytorch/encdec_pytorch.py $encdec_args 2>/dev/null | epoch2)"
  for level in $levels; do
    t=$("build-level-${level#x86-64-}/apps/adjoin-train" --model encdec --layout sequential $encdec_args 2>/dev/null | epoch2)
    line="$line $level ${t:-0}"
  done
  echo "$line" | tee -a "$work/encdec"
  r=$((r + 1))
done
awk -f tools/median.awk -f /dev/stdin "$work/encdec" <<'SUMMARY'
{ n++; pt[n] = $4; for (f = 5; f + 1 <= NF; f += 2) { if (!($f in seen)) { seen[$f] = 1; order[++k] = $f } s[$f, n] = $(f + 1) } }
END {
  for (i = 1; i <= n; i++) l[i] = pt[i]
  printf "PyTorch: median %.2f s\n%-10s %10s %22s\n", median(l, n), "level", "adjoin s", "PyTorch / adjoin"
  for (j = 1; j <= k; j++) {
    for (i = 1; i <= n; i++) { a[i] = s[order[j], i]; q[i] = s[order[j], i] > 0 ? pt[i] / s[order[j], i] : 0 }
    printf "%-10s %10.2f %21.2fx\n", order[j], median(a, n), median(q, n)
  }
}
SUMMARY

if [ "$lenet" = yes ]; then
  echo
  echo "== 3. LeNet-5 at each level (tools/bench-levels.sh $rounds)"
  sh tools/bench-levels.sh "$rounds"
fi

echo
echo "== 4. bit-identical run to run (2 threads, the encoder-decoder, one epoch of 4096 images)"
for k in 1 2; do
  ADJ_NUM_THREADS=2 "$best/apps/adjoin-train" --model encdec --layout sequential --epochs 1 --batch 128 \
    --train-limit 4096 --test-limit 512 --checkpoint "$work/run$k.ck" >/dev/null
done
if cmp -s "$work/run1.ck" "$work/run2.ck"; then echo "the two checkpoints are the same bytes ($(wc -c <"$work/run1.ck") bytes)"
else echo "the two checkpoints DIFFER"; fi

echo
echo "== 5. perf: the kernels' team waiting in one encoder-decoder epoch ($best)"
if command -v perf >/dev/null 2>&1; then
  perf record -q -e cpu-clock -o "$work/perf.data" "$best/apps/adjoin-train" --model encdec --layout sequential \
    --epochs 1 --batch 128 --train-limit 12000 --test-limit 512 >/dev/null 2>&1
  perf report -i "$work/perf.data" --no-children --sort dso,symbol 2>/dev/null | awk '
    /^ *[0-9.]+%/ { share = $1; sub("%", "", share); total += share
      if ($4 == "adj_team_run" || $4 == "adj_team_worker_main") team += share
      if ($2 ~ /libgomp/) omp += share }
    END { printf "team waiting %.2f%% of the samples, OpenMP runtime %.2f%% (of %.0f%% listed)\n", team, omp, total }'
else
  echo "perf is not installed"
fi
