#!/bin/sh
# t010: `meson install --destdir` into a temporary root, then the broadcast
# example built out of tree from the installed headers, library and adjoin.pc
# alone (pkg-config --cflags --libs adjoin), run on 4 ranks, must print what
# the in-tree example prints; a C++ program must build and run against the
# same installed package.
#   t010-install.sh BUILD_DIR SOURCE_DIR MPIEXEC IN_TREE_EXAMPLE
set -eu
build=$1 src=$2 mpiexec=$3 in_tree=$4
cc=${CC:-cc} cxx=${CXX:-c++}
# shellcheck source=tests/package/install-root.sh
. "$(dirname "$0")/install-root.sh"
install_root t010 "$build" "$src"

installed=$(find "$root$prefix/include/adjoin" -name "*.h" | wc -l)
public=$(find "$src/include/adjoin" -name "*.h" | wc -l)
[ "$installed" -eq "$public" ] || { echo "t010: $installed headers installed, $public public"; exit 1; }

cp "$src"/examples/primitives/broadcast.c "$src"/examples/primitives/show.c "$src"/examples/primitives/show.h "$tmp"/
# shellcheck disable=SC2086 # the flags are word lists
"$cc" -std=c11 -o "$tmp/example-broadcast" "$tmp/broadcast.c" "$tmp/show.c" $cflags $libs
linked=$(ldd "$tmp/example-broadcast" | grep libadjoin || true)
case "$linked" in
  *"$root"*) ;;
  *) echo "t010: the out-of-tree example does not load the installed libadjoin: $linked"; exit 1 ;;
esac
"$mpiexec" -n 4 "$tmp/example-broadcast" >"$tmp/out-of-tree.txt"
"$mpiexec" -n 4 "$in_tree" >"$tmp/in-tree.txt"
if ! cmp -s "$tmp/out-of-tree.txt" "$tmp/in-tree.txt"; then
  echo "t010: out-of-tree example output differs from the in-tree build:"
  diff "$tmp/in-tree.txt" "$tmp/out-of-tree.txt" || true
  exit 1
fi
echo "t010: out-of-tree example-broadcast on 4 ranks printed the in-tree output ($(wc -l <"$tmp/in-tree.txt") lines)"

cat >"$tmp/hello.cpp" <<'CPP'
#include <cstdio>
#include "adjoin/adjoin.h"
int main(int argc, char **argv) {
  int rank = -1, size = 0;
  if (adj_init(&argc, &argv, &rank, &size)) { std::printf("adj_init: %s\n", adj_last_error()); return 1; }
  adj_partition *p = nullptr;
  int dims[1] = {size};
  int status = adj_partition_create(MPI_COMM_WORLD, 1, dims, size, nullptr, &p);
  if (rank == 0) std::printf("C++: partition of %d ranks: %s\n", size, adj_status_name(status));
  adj_partition_destroy(&p);
  return (adj_finalize() || status) ? 1 : 0;
}
CPP
# shellcheck disable=SC2086
"$cxx" -o "$tmp/hello" "$tmp/hello.cpp" $cflags $libs
"$mpiexec" -n 2 "$tmp/hello"
