#!/bin/sh
# t014: the README's tour as written.  Every fenced block tagged `tour`
# (```sh tour) runs with `sh -eu` from the top of a tree where build/ is this
# build and everything else is the source tree, so the commands work as a
# reader types them after the README's two commands.  Fails when a block
# fails, or when the README marks no block.
#   t014-readme-tour.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
# shellcheck source=tests/package/fenced.sh
. "$(dirname "$0")/fenced.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

blocks=$(fenced_blocks "$src/README.md" tour "$tmp")
[ "$blocks" -gt 0 ] || { echo "t014: README.md marks no \`\`\`sh tour block"; exit 1; }
# The tree the reader has: the checkout with this build at build/.
tree=$tmp/tree
mkdir "$tree"
for entry in "$src"/* "$src"/.[!.]*; do
  [ -e "$entry" ] && [ "$(basename "$entry")" != build ] && ln -s "$entry" "$tree/"
done
ln -s "$(cd "$build" && pwd)" "$tree/build"
i=1
while [ "$i" -le "$blocks" ]; do
  echo "t014: tour block $i of $blocks:"
  sed 's/^/  $ /' "$tmp/block-$i"
  (cd "$tree" && sh -eu "$tmp/block-$i") || { echo "t014: tour block $i failed"; exit 1; }
  i=$((i + 1))
done
echo "t014: all $blocks tour blocks ran"
