#!/bin/sh
# t013: the program of docs/new-layer.md (its ```c new-layer block), built out
# of tree against an installed adjoin with pkg-config alone, run at 1, 2 and 3
# ranks: it checks its layer's forward against the sequential product and runs
# the dot-product test of its Jacobian, and exits non-zero when either fails.
#   t013-new-layer.sh BUILD_DIR SOURCE_DIR MPIEXEC
set -eu
build=$1 src=$2 mpiexec=$3
cc=${CC:-cc}
here=$(dirname "$0")
# shellcheck source=tests/package/install-root.sh
. "$here/install-root.sh"
# shellcheck source=tests/package/fenced.sh
. "$here/fenced.sh"
install_root t013 "$build" "$src"

blocks=$(fenced_blocks "$src/docs/new-layer.md" new-layer "$tmp")
[ "$blocks" -eq 1 ] || { echo "t013: docs/new-layer.md has $blocks \`\`\`c new-layer blocks, not 1"; exit 1; }
cp "$tmp/block-1" "$tmp/column_linear.c"
# shellcheck disable=SC2086 # the flags are word lists
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/column-linear" "$tmp/column_linear.c" $cflags $libs -lm
for ranks in 1 2 3; do
  "$mpiexec" -n "$ranks" "$tmp/column-linear"
done
