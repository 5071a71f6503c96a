#!/bin/sh
# t600: adjoin across the hosts of an emulated cluster (tools/cluster.sh,
# docs/cluster.md): HOSTS network namespaces on a bridge, links shaped to
# 1 Gbit/s, one rank on each, TCP the only transport between them.
#  - the dot-product battery's data-movement cases print, figure for figure,
#    what the same cases print on shared memory;
#  - LeNet-5 distributed == sequential (t401) prints across hosts what it
#    prints on shared memory;
#  - data-parallel training with overlap (adjoin-train --model mlp --replicas
#    HOSTS --trace): the replicas end in sync, the timeline is JSON with every
#    rank, and buckets are posted while the backward still runs;
#  - kill -9 of host h1's rank during training ends the job (no hang), and
#    --resume from its last checkpoint ends with a checkpoint byte-identical
#    to an uninterrupted run's.
# The cluster is taken down on exit, on a signal, and -- should this script be
# killed outright -- by the next `tools/cluster.sh up` (its owner is gone).
# Skipped (77) where network namespaces cannot be made, or without MNIST.
#
#   sh t600-cluster.sh HOSTS SOURCE_DIR MPIEXEC ADJOIN_DOTTEST T401 ADJOIN_TRAIN DATA_DIR
set -u
hosts=$1 src=$2 mpiexec=$3 dottest=$4 t401=$5 train=$6 data=$7
me=t600-np$hosts
skip() { echo "$me: skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (running as uid $(id -u))"
for tool in ip tc unshare nsenter; do
  command -v "$tool" >/dev/null || skip "no '$tool' (Debian's iproute2 and util-linux)"
done
[ -r "$data/train-images-idx3-ubyte" ] || skip "no MNIST under $data: provision it with \`sh tools/provision-data.sh mnist\`"
probe=adjoin-probe$$
ip netns add "$probe" 2>/dev/null || skip "this machine refuses to make a network namespace (ip netns add: no CAP_SYS_ADMIN?)"
ip netns del "$probe"

work=$(mktemp -d)
name=t$$
cleanup() {
  sh "$src/tools/cluster.sh" down --name "$name"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
sh "$src/tools/cluster.sh" up "$hosts" --rate 1gbit --name "$name" --owner $$ >/dev/null ||
  { echo "$me: FAIL: tools/cluster.sh up $hosts"; exit 1; }
errors=0
fail() { echo "$me: FAIL: $*"; errors=$((errors + 1)); }
across() { timeout "$1" sh "$src/tools/cluster-run.sh" --cluster "$name" --mpiexec "$mpiexec" -n "$hosts" "${@:2}"; }
local_run() { "$mpiexec" -n "$hosts" "$@"; }

# Prints what two runs printed differently (the first lines that differ).
same_output() {
  if cmp -s "$work/$1.shm" "$work/$1.cluster"; then
    echo "$me: $1: the same $(wc -l <"$work/$1.cluster") lines across hosts as on shared memory, e.g."
    grep -m 2 -E '[0-9]e-|rel' "$work/$1.cluster" | sed 's/^/    /'
  else
    fail "$1 prints differently across hosts:"
    diff "$work/$1.shm" "$work/$1.cluster" | head -10
  fi
}
