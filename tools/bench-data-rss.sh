#!/bin/sh
# Peak resident memory per rank while reading Fashion-MNIST shard by shard, at
# 1, 2 and 4 ranks, from .npy and from HDF5 (issue 43: it must fall as ranks
# grow).  Converts data/fashion-mnist with tools/idx-to-arrays.py (uint8
# inputs for .npy, float32 for HDF5) into a temporary directory, then runs
# bench-data (bench/bench_data.c) at each rank count and prints, per source,
# the largest peak RSS over the ranks, the part of it the reading added, and
# both as ratios to the 1-rank run of the same source; the last column is
# what every rank needed when it held the whole set (measured in the same
# runs).
#
#   sh tools/bench-data-rss.sh [BUILD_DIR [BATCH]]     defaults: build 8192
set -eu
cd "$(dirname "$0")/.."
build=${1:-build} batch=${2:-8192}
case "$batch" in
'' | *[!0-9]*) echo "bench-data-rss.sh: BATCH '$batch' is not a whole number" >&2; exit 2 ;;
esac
[ -x "$build/bench/bench-data" ] || ninja -C "$build" bench/bench-data >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 tools/idx-to-arrays.py data/fashion-mnist "$work/npy" >/dev/null
sources=npy
if /usr/bin/python3 -c 'import h5py' 2>/dev/null &&
  /usr/bin/python3 tools/idx-to-arrays.py --format hdf5 --inputs float32 data/fashion-mnist "$work/hdf5" >/dev/null; then
  sources="npy hdf5"
fi
printf '%-6s %5s %12s %12s %10s %10s %14s\n' source ranks "peak MiB" "read MiB" "peak/1" "read/1" "whole set MiB"
for source in $sources; do
  peak1="" read1=""
  for ranks in 1 2 4; do
    line=$(mpiexec.mpich -n "$ranks" "$build/bench/bench-data" "$work/$source" "$batch" | tail -1)
    peak=$(echo "$line" | sed -n 's/.*peak RSS per rank \([0-9.]*\) MiB.*/\1/p')
    read=$(echo "$line" | sed -n 's/.*, \([0-9.]*\) MiB above the.*/\1/p')
    whole=$(echo "$line" | sed -n 's/.*whole set: \([0-9.]*\) MiB.*/\1/p')
    [ -n "$peak" ] || { echo "bench-data-rss.sh: no figures from bench-data: $line" >&2; exit 1; }
    [ -n "$peak1" ] || peak1=$peak read1=$read
    printf '%-6s %5d %12s %12s %10.2f %10.2f %14s\n' "$source" "$ranks" "$peak" "$read" \
      "$(awk "BEGIN { print $peak / $peak1 }")" "$(awk "BEGIN { print $read / $read1 }")" "$whole"
  done
done
