# shellcheck shell=sh
# Sourced by the tests that build programs against an installed adjoin:
# `install_root TEST BUILD_DIR SOURCE_DIR` runs `meson install --destdir`
# into a temporary root ($tmp/root, removed at exit) and sets what a user's
# build would take from pkg-config there: $pkg (pkg-config pointed into the
# root), $cflags, $libs, $libdir, with PKG_CONFIG_PATH and LD_LIBRARY_PATH
# exported.  Fails naming TEST when the installed package is incomplete or
# its flags point into the source or build tree.

install_root() {
  name=$1 build=$2 src=$3
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  root=$tmp/root
  meson install -C "$build" --destdir "$root" --no-rebuild >"$tmp/install.log" 2>&1 || {
    tail -20 "$tmp/install.log"; echo "$name: meson install --destdir failed"; exit 1; }
  pc=$(find "$root" -name adjoin.pc | head -1)
  [ -n "$pc" ] || { echo "$name: meson install put no adjoin.pc under $root"; exit 1; }
  PKG_CONFIG_PATH="$(dirname "$pc")"
  export PKG_CONFIG_PATH
  prefix=$(pkg-config --variable=prefix adjoin)
  # The .pc names the final prefix; point it into the temporary root instead.
  pkg="pkg-config --define-variable=prefix=$root$prefix"
  cflags=$($pkg --cflags adjoin) libs=$($pkg --libs adjoin)
  echo "$name: adjoin.pc at ${pc#"$root"}; cflags: $cflags; libs: $libs"
  case "$cflags $libs" in
    *"$src"*|*"$build"*) echo "$name: the installed flags point into the source or build tree"; exit 1 ;;
  esac
  libdir=$($pkg --variable=libdir adjoin)
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
}
