#!/bin/sh
# Builds the seed corpus of the fuzz targets and runs them.
#
#   sh run-fuzz.sh replay BUILD_DIR MNIST_DIR   every seed and crafted variant once,
#                                               through the *-replay binaries
#   sh run-fuzz.sh fuzz-idx|fuzz-checkpoint|fuzz-text|fuzz-cli BUILD_DIR MNIST_DIR
#                                               libFuzzer for FUZZ_SECONDS (default 30)
#
# Seeds are real files: the MNIST test labels and the first 20 test images
# (from MNIST_DIR when provisioned, else synthetic IDX files), raw and gzip, a
# small .npy array, a checkpoint the checkpoint target writes of its own
# network, the network descriptions of networks/, calibration files and
# algorithm tables as the programs write them, and command lines of each
# program fuzz-cli runs.  Crafted variants: every seed truncated at a few
# lengths, and with trailing bytes.
set -eu
mode=$1 build=$2 mnist=$3
networks=$(dirname "$0")/../../networks
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
idx=$work/idx ckpt=$work/checkpoint text=$work/text cli=$work/cli
mkdir -p "$idx" "$ckpt" "$text" "$cli"

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

# Text seeds; the first byte picks the format (fuzz_text.c): \000 a network
# description, \001 a calibration file, \002 an algorithm table.
for net in "$networks"/*.net; do
  { printf '\000'; cat "$net"; } > "$text/net-$(basename "$net" .net)"
done
printf '\001alpha 2.5e-06\nbeta 1.25e-10\n' > "$text/calibration-ping-pong"
printf '\001alpha 2.5e-06\nbeta 1.25e-10\nallreduce_alpha 7.5e-06\nallreduce_beta 3.125e-10\nallreduce_ranks 4\n' \
  > "$text/calibration-both"
printf '\002# adjoin: fastest summing algorithm\nsum 2 0 reduce\nsum 2 65536 allreduce\nsum 4 1024 chain\n' \
  > "$text/algorithm-table"

# Command-line seeds; the first byte picks the program (fuzz_cli.c): \000
# adjoin-halo, \001 adjoin-plan, \002 adjoin-phantom, \003 the benchmarks'
# parser; the words are NUL-separated, @net and @cal stand for real files.
seed() {
  { printf '%b' "$2"; printf '%s' "$3" | tr ' ' '\000'; } > "$cli/$1"
}
seed halo-b3 '\000' "--shape 11 --partition 3 --kernel 5"
seed halo-2d '\000' "--shape 2,11 --partition 2,2 --kernel 1,4 --padding 0,1:2 --cuts -,0:8:11"
seed halo-stride '\000' "--shape=64,64 --partition=4,2 --kernel=3,3 --stride=2,1 --dilation=1,2"
seed plan-best '\001' "--procs 4 --batch 64 @net"
seed plan-json '\001' "--mode adjoin --conv domain --procs 6 --batch 64 --all-grids --json @net"
seed plan-sweep '\001' "--sweep 1:16 --batch 256 --alpha 1e-6 --bandwidth 1e10 @net"
seed plan-calibration '\001' "--procs 8 --batch 64 --grid 2x4 --word 2 --calibration @cal @net"
seed phantom-default '\002' "--n 64 --p 2 --k 2"
seed phantom-measured '\002' "--model alpha-beta --alpha 1e-6 --beta 1e-9 --tp-times 1,2 --pp-times 0.5,1 --iterations 10,20 --table1"
seed bench '\003' "--trials 5 --seconds 0.5 --csv out.csv --teacher first second"

if [ "$mode" = replay ]; then
  for dir in "$idx" "$ckpt" "$text" "$cli"; do
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
  "$build/fuzz-text-replay" "$text"/*
  # The programs' own output, refusals and usage included, is not wanted.
  "$build/fuzz-cli-replay" "$cli"/* > "$work/cli.log" 2>&1 || { tail -40 "$work/cli.log"; exit 1; }
  tail -1 "$work/cli.log"
  exit 0
fi

options=
case $mode in
  fuzz-idx) corpus=$idx ;;
  fuzz-checkpoint) corpus=$ckpt ;;
  fuzz-text) corpus=$text ;;
  # -close_fd_mask=3: the programs' output closed; libFuzzer keeps its own.
  fuzz-cli) corpus=$cli options=-close_fd_mask=3 ;;
  *) echo "run-fuzz.sh: unknown mode $mode"; exit 2 ;;
esac
# -rss_limit_mb bounds memory: an input that makes the reader allocate past
# what its file can hold is a finding.
# MPICH's UCX transport keeps allocations that are never freed when MPI is
# not finalized (libFuzzer exits without it): suppress those, not ours.
printf 'leak:libucs.so\nleak:libuct.so\nleak:libucp.so\n' > "$work/lsan.supp"
status=0
LSAN_OPTIONS="suppressions=$work/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" "$build/$mode" -artifact_prefix="$build/" \
  -max_total_time="${FUZZ_SECONDS:-30}" -rss_limit_mb=1024 -max_len=65536 $options \
  -print_final_stats=1 "$corpus" > "$work/log" 2>&1 || status=$?
tail -25 "$work/log"
exit $status
