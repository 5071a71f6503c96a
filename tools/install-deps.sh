#!/bin/sh
# Installs Debian packages that are missing (run as root, or with sudo):
# without arguments what adjoin needs on Debian 12, else the packages named.
# Idempotent: packages already present are not fetched again, so the README
# commands and the other scripts can call it every time.
#
#   sh tools/install-deps.sh            sh tools/install-deps.sh clang-14
set -eu

# libhdf5-mpich-dev: HDF5 data sets through parallel HDF5 (meson -Dhdf5);
# python3-numpy and python3-h5py: tools/idx-to-arrays.py, which t542 runs.
packages=${*:-"build-essential pkg-config meson ninja-build mpich libmpich-dev
libopenblas-dev liblapacke-dev libgsl-dev zlib1g-dev libhdf5-mpich-dev python3-numpy python3-h5py"}

missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing$missing"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  # One package index update serves the calls of the next hour (CI's scripts
  # call this once per step); an install that fails on an index that old
  # updates it and tries again.
  stamp=${TMPDIR:-/tmp}/adjoin-apt-updated
  apt_install() {
    # shellcheck disable=SC2086 # a list of package names
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
  }
  if [ -n "$(find "$stamp" -mmin -60 2>/dev/null)" ] && apt_install; then
    exit 0
  fi
  $SUDO apt-get update -qq
  touch "$stamp"
  apt_install
fi
