#!/bin/sh
# Issue 11's per-level table on this host: alternating rounds, each running
# PyTorch 1.13's LeNet-5 (tools/pytorch/bench_pytorch_lenet.py), then at every
# instruction-set level the CPU runs adjoin's sequential and dist4 training
# (bench-train, float32, 8192 images, best of 3 epochs, batch 256).  Rounds
# alternate so a slow spell of a shared machine falls on every column alike;
# the summary gives medians of the rounds' own ratios.
#
#   sh tools/bench-levels.sh [ROUNDS]        default 5
#
# Each level is its own build, made here if missing: build-level-v4,
# build-level-v3, build-level-baseline (meson -Dkernel_isa=...), only
# bench-train (and adjoin-train in the best level's).  OPENBLAS_CORETYPE is set as tools/main.sh sets it
# when OpenBLAS is older than the CPU.  Without PyTorch the rounds still run
# and the ratio to PyTorch is left out.
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-5}
case "$rounds" in
'' | *[!0-9]*) echo "bench-levels.sh: ROUNDS '$rounds' is not a whole number" >&2; exit 2 ;;
esac
[ "$rounds" -ge 1 ] || { echo "bench-levels.sh: ROUNDS must be at least 1" >&2; exit 2; }

levels=baseline
for level in x86-64-v3 x86-64-v4; do
  if /lib64/ld-linux-x86-64.so.2 --help 2>/dev/null | grep -q "$level (supported"; then levels="$levels $level"; fi
done
for level in $levels; do
  dir=build-level-${level#x86-64-}
  [ -f "$dir/build.ninja" ] || meson setup "$dir" -Dkernel_isa="$level" >/dev/null
  ninja -C "$dir" bench/bench-train >/dev/null
done
best=$dir # the last level listed is the CPU's best
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  ninja -C "$best" apps/adjoin-train >/dev/null
  coretype=$("$best/apps/adjoin-train" --openblas-coretype)
  [ -z "$coretype" ] || export OPENBLAS_CORETYPE="$coretype"
fi
torch=yes
/usr/bin/python3 -c 'import torch' 2>/dev/null || torch=no
# The PyTorch twin reads MNIST from data/mnist; provision-data leaves a
# complete set alone.
[ "$torch" = no ] || sh tools/provision-data.sh mnist >/dev/null
echo "bench-levels.sh: $rounds rounds, levels $levels, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}," \
  "PyTorch $torch, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"

# bench-train's images/s of the float32 line.
rate() { "$@" | awk '/images\/s/ { print $3 }'; }

log=$(mktemp)
trap 'rm -f "$log" "$log.err"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
  line="round $r"
  if [ "$torch" = yes ]; then
    pt=$(/usr/bin/python3 tools/pytorch/bench_pytorch_lenet.py --epochs 3 2>"$log.err" | sed -n 's/^images_per_s=//p')
    if [ -z "$pt" ]; then
      echo "bench-levels.sh: tools/pytorch/bench_pytorch_lenet.py printed no images_per_s: $(tail -n 1 "$log.err")" >&2
      exit 1
    fi
    line="$line pytorch $pt"
  fi
  for level in $levels; do
    dir=build-level-${level#x86-64-}
    seq=$(rate "$dir/bench/bench-train" sequential 8192 3 256 f32)
    dist=$(rate mpiexec.mpich -n 4 "$dir/bench/bench-train" dist4 8192 3 256 f32)
    line="$line $level ${seq:-0} ${dist:-0}"
  done
  echo "$line" | tee -a "$log"
  r=$((r + 1))
done

# Per level: medians of sequential and dist4 images/s, of dist4 / sequential
# and of sequential / PyTorch, each ratio taken within its round.
awk -f tools/median.awk -f /dev/stdin "$log" <<'SUMMARY'
{
  n++; first = 3; pt = 0
  if ($3 == "pytorch") { pt = $4; first = 5; torch[n] = pt }
  for (f = first; f + 2 <= NF; f += 3) {
    level = $f
    if (!(level in seen)) { seen[level] = 1; order[++levels] = level }
    seq[level, n] = $(f + 1); dist[level, n] = $(f + 2)
    ratio[level, n] = $(f + 1) > 0 ? $(f + 2) / $(f + 1) : 0
    versus[level, n] = pt > 0 ? $(f + 1) / pt : 0
  }
}
END {
  if (n == 0) exit 1
  if (first == 5) { for (i = 1; i <= n; i++) l[i] = torch[i]; printf "PyTorch: median %.0f images/s\n", median(l, n) }
  printf "%-10s %12s %12s %14s %16s\n", "level", "sequential", "dist4", "dist4 / seq", "seq / PyTorch"
  for (k = 1; k <= levels; k++) {
    level = order[k]
    for (i = 1; i <= n; i++) { s[i] = seq[level, i]; d[i] = dist[level, i]; q[i] = ratio[level, i]; v[i] = versus[level, i] }
    printf "%-10s %12.0f %12.0f %14.3f %15s\n", level, median(s, n), median(d, n), median(q, n),
      first == 5 ? sprintf("%.2fx", median(v, n)) : "-"
  }
}
SUMMARY
