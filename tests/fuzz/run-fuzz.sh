#!/bin/sh
# Builds the seed corpus of the fuzz targets and runs them.
#
#   sh run-fuzz.sh replay BUILD_DIR MNIST_DIR   every seed and crafted variant once,
#                                               through the *-replay binaries
#   sh run-fuzz.sh fuzz-idx|fuzz-checkpoint BUILD_DIR MNIST_DIR
#                                               libFuzzer for FUZZ_SECONDS (default 30)
#
# Seeds are real files: the MNIST test labels and the first 20 test images
# (from MNIST_DIR when provisioned, else synthetic IDX files), raw and gzip, a
# small .npy array, and a checkpoint the checkpoint target writes of its own
# network.  Crafted
# variants: every seed truncated at a few lengths, and with trailing bytes.
set -eu
mode=$1 build=$2 mnist=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
idx=$work/idx ckpt=$work/checkpoint
mkdir -p "$idx" "$ckpt"

# IDX seeds (the first byte of an input is ignored by fuzz_idx.c; the seeds
# keep \000 and \002, the dimension counts an older target read there).
if [ -r "$mnist/t10k-labels-idx1-ubyte" ] && [ -r "$mnist/t10k-images-idx3-ubyte" ]; then
  { printf '\000'; head -c 8 "$mnist/t10k-labels-idx1-ubyte" | head -c 4; printf '\000\000\000\024';
    tail -c +9 "$mnist/t10k-labels-idx1-ubyte" | head -c 20; } > "$idx/labels"
  { printf '\002'; head -c 4 "$mnist/t10k-images-idx3-ubyte"; printf '\000\000\000\024';
    tail -c +9 "$mnist/t10k-images-idx3-ubyte" | head -c $((8 + 20 * 784)); } > "$idx/images"
else
  { printf '\000\000\000\010\001\000\000\000\024'; head -c 20 /dev/urandom; } > "$idx/labels"
  { printf '\002\000\000\010\003\000\000\000\024\000\000\000\034\000\000\000\034'; head -c 15680 /dev/urandom; } > "$idx/images"
fi
for f in labels images; do
  { head -c 1 "$idx/$f"; tail -c +2 "$idx/$f" | gzip -9 -n; } > "$idx/$f.gz"
done
# A .npy seed: float32 (3, 2, 2), header padded to 128 bytes as numpy writes it.
{ printf '\000\223NUMPY\001\000\166\000'; printf "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2, 2), }";
  printf '%55s\n' ''; head -c 48 /dev/urandom; } > "$idx/array.npy"
"$build/fuzz-checkpoint-replay" --write-seed "$ckpt/seed" >/dev/null

if [ "$mode" = replay ]; then
  for dir in "$idx" "$ckpt"; do
    for f in "$dir"/*; do
      size=$(wc -c < "$f")
      for cut in 1 9 17 64 $((size / 2)) $((size - 4)) $((size - 1)); do
        if [ "$cut" -gt 0 ] && [ "$cut" -lt "$size" ]; then head -c "$cut" "$f" > "$f.cut$cut"; fi
      done
      { cat "$f"; printf 'x'; } > "$f.trailing"
    done
  done
  "$build/fuzz-idx-replay" "$idx"/*
  "$build/fuzz-checkpoint-replay" "$ckpt"/*
  exit 0
fi

case $mode in
  fuzz-idx) corpus=$idx ;;
  fuzz-checkpoint) corpus=$ckpt ;;
  *) echo "run-fuzz.sh: unknown mode $mode"; exit 2 ;;
esac
# -rss_limit_mb bounds memory: an input that makes the reader allocate past
# what its file can hold is a finding.
# MPICH's UCX transport keeps allocations that are never freed when MPI is
# not finalized (libFuzzer exits without it): suppress those, not ours.
printf 'leak:libucs.so\nleak:libuct.so\nleak:libucp.so\n' > "$work/lsan.supp"
status=0
LSAN_OPTIONS="suppressions=$work/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" "$build/$mode" -artifact_prefix="$build/" \
  -max_total_time="${FUZZ_SECONDS:-30}" -rss_limit_mb=1024 -max_len=65536 \
  -print_final_stats=1 "$corpus" > "$work/log" 2>&1 || status=$?
tail -25 "$work/log"
exit $status
