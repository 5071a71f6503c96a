#!/bin/sh
# The default build against the pinned build of the CPU's best level, case
# by case: a hot loop that the default build (kernel_isa=auto) runs at the
# baseline -- not a target clone, not in the per-level kernel table -- shows
# as a case whose time is a multiple of the pinned build's.  Every
# bench-layers case (bench/bench-layers, float32 and float64, forward +
# backward) runs in both builds, the two alternating ROUNDS times so a slow
# spell of a shared machine falls on both alike; the ratio is the default
# build's median time over the pinned build's.
#
#   sh tools/bench-auto-vs-pinned.sh [ROUNDS [BOUND]]     default 3 rounds, bound 1.5
#
# Prints every case sorted by ratio, worst first, then the cases above BOUND;
# exits 1 when there are any.  One-round ratios of the same code spread over
# 0.7-1.4 on a busy 2-core host, so the bound sits above that.  Builds
# build-level-auto (-Dkernel_isa=auto) and build-level-v4 or build-level-v3
# (as tools/bench-levels.sh makes them) where missing.  Not a test: it times.
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3}
bound=${2:-1.5}
case "$rounds" in
'' | *[!0-9]*) echo "bench-auto-vs-pinned.sh: ROUNDS '$rounds' is not a whole number" >&2; exit 2 ;;
esac
[ "$rounds" -ge 1 ] || { echo "bench-auto-vs-pinned.sh: ROUNDS must be at least 1" >&2; exit 2; }
awk -v b="$bound" 'BEGIN { exit !(b ~ /^[0-9]+(\.[0-9]+)?$/ && b + 0 >= 1) }' ||
  { echo "bench-auto-vs-pinned.sh: BOUND '$bound' is not a number of at least 1" >&2; exit 2; }

best=""
for level in x86-64-v3 x86-64-v4; do
  if /lib64/ld-linux-x86-64.so.2 --help 2>/dev/null | grep -q "$level (supported"; then best=$level; fi
done
[ -n "$best" ] || { echo "bench-auto-vs-pinned.sh: the CPU runs neither x86-64-v3 nor v4: nothing to compare" >&2; exit 2; }
pinned=build-level-${best#x86-64-}
for pair in "build-level-auto auto" "$pinned $best"; do
  set -- $pair
  [ -f "$1/build.ninja" ] || meson setup "$1" -Dkernel_isa="$2" >/dev/null
  ninja -C "$1" bench/bench-layers apps/adjoin-train >/dev/null
done
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  coretype=$("$pinned/apps/adjoin-train" --openblas-coretype)
  [ -z "$coretype" ] || export OPENBLAS_CORETYPE="$coretype"
fi
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "bench-auto-vs-pinned.sh: build-level-auto against $pinned, $rounds alternating rounds, bound ${bound}x, $cpu"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
r=1
while [ "$r" -le "$rounds" ]; do
  for dir in build-level-auto "$pinned"; do
    "$dir/bench/bench-layers" --rounds 1 >"$work/out" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    # "case name ... dtype fwd f+b": the name is every field before the dtype.
    awk -v dir="$dir" '$(NF-2) ~ /^f(32|64)$/ { name = $1; for (i = 2; i <= NF - 3; i++) name = name "_" $i
      print dir, name "/" $(NF-2), $NF }' "$work/out" >>"$work/times"
  done
  r=$((r + 1))
done

# One line per case, "ratio case auto pinned", worst first.
awk -v pinned="$pinned" -f tools/median.awk -f /dev/stdin "$work/times" >"$work/ratios" <<'RATIOS'
{ n[$1, $2]++; t[$1, $2, n[$1, $2]] = $3; seen[$2] = 1 }
END {
  for (c in seen) {
    for (i = 1; i <= n["build-level-auto", c]; i++) a[i] = t["build-level-auto", c, i]
    auto = median(a, n["build-level-auto", c])
    for (i = 1; i <= n[pinned, c]; i++) a[i] = t[pinned, c, i]
    pin = median(a, n[pinned, c])
    printf("%.4f %s %.4f %.4f\n", (pin > 0 ? auto / pin : 0), c, auto, pin)
  }
}
RATIOS
sort -k1,1gr "$work/ratios" | awk -v pinned="$pinned" -v bound="$bound" '
  function row() { return sprintf("%-44s %10.4f %10.4f %8.2fx", $2, $3, $4, $1) }
  BEGIN { printf "%-44s %10s %10s %9s\n", "case/dtype (forward + backward, ms)", "auto", pinned, "ratio" }
  { print row(); if ($1 > bound) over[++k] = row() }
  END {
    if (k) print "\ncases above " bound "x:"
    for (j = 1; j <= k; j++) print over[j]
    printf "\n%d of %d cases above %sx\n", k, NR, bound
    exit k > 0
  }'
