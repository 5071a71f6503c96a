#!/bin/sh
# adjoin on 64-bit ARM without an ARM machine: cross-compiles with Debian's
# aarch64 GCC against Debian's arm64 MPICH, OpenBLAS, LAPACKE, GSL and zlib,
# and runs tests under qemu-user.  What it shows is that the code an ARM user
# gets (the generic kernels, 128-bit vectors, no x86 CPU detection) builds
# with warnings as errors and computes what the tests demand; emulated time
# says nothing about ARM speed.
#
#   sh tools/cross-aarch64.sh                        every test but the slow suite
#   sh tools/cross-aarch64.sh --suite unit           meson test's arguments
#   TESTS="--suite unit" sh tools/cross-aarch64.sh --suite unit
#                                                    building only what those need
#
# The arm64 libraries are unpacked into SYSROOT (default build-aarch64-sysroot),
# not installed: several of their -dev packages cannot sit beside the host's.
# The build goes to BUILD_DIR (default build-aarch64).
set -eu
cd "$(dirname "$0")/.."
here=$(pwd)
dir=${BUILD_DIR:-build-aarch64}
root=${SYSROOT:-$here/build-aarch64-sysroot}
triplet=aarch64-linux-gnu
libdir=$root/usr/lib/$triplet
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi

sh tools/install-deps.sh gcc-$triplet libc6-dev-arm64-cross qemu-user-static pkg-config meson ninja-build

# Runtime libraries with their dependencies beyond libc, and the -dev packages
# for headers, .pc files and link names.
arm64_packages="libmpich12 libmpich-dev libucx0 libhwloc15 libibverbs1 librdmacm1 libnl-3-200
libnl-route-3-200 libnuma1 libudev1 libgfortran5 libopenblas0-pthread libopenblas-dev
libopenblas-pthread-dev liblapack3 libblas3 libtmglib3 liblapacke liblapacke-dev libgsl27
libgslcblas0 libgsl-dev zlib1g zlib1g-dev libzstd1 liblzma5"

if [ ! -f "$root/.complete" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
  fi
  rm -rf "$root"
  mkdir -p "$root/debs"
  # shellcheck disable=SC2046 # one package name per word
  (cd "$root/debs" && apt-get download -qq -o APT::Sandbox::User=root \
    $(for p in $arm64_packages; do printf '%s:arm64 ' "$p"; done))
  for deb in "$root"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  # One library directory: the packages that still install to /lib join /usr/lib.
  cp -a "$root/lib/$triplet/." "$libdir/"
  # Links that dpkg's alternatives and the packages' maintainer scripts would
  # have made, and absolute links re-rooted into the sysroot.
  for name in libblas.so.3 liblapack.so.3; do ln -sf "openblas-pthread/$name" "$libdir/$name"; done
  for pc in openblas blas lapack; do
    target=$pc-openblas.pc
    [ "$pc" = openblas ] && target=openblas.pc
    ln -sf "../openblas-pthread/pkgconfig/$target" "$libdir/pkgconfig/$pc.pc"
  done
  # shellcheck disable=SC2012 # library names are plain
  for name in libucp libucs libhwloc; do ln -sf "$(basename "$(ls "$libdir/$name.so."*[0-9] | head -1)")" \
    "$libdir/$name.so"; done
  find "$root" -type l -lname '/*' | while read -r link; do
    ln -sf "$(basename "$(readlink "$link")")" "$link"
  done
  rm -rf "$root/debs"
  touch "$root/.complete"
fi

# The meson cross file: the compiler, the sysroot's .pc files (pkg-config
# prefixes their paths with sys_root), and qemu as the runner of test programs.
cat > "$root/cross.ini" <<INI
[binaries]
c = '$triplet-gcc'
ar = '$triplet-ar'
strip = '$triplet-strip'
pkgconfig = 'pkg-config'
exe_wrapper = ['qemu-aarch64-static', '-L', '/usr/$triplet']

[properties]
sys_root = '$root'
pkg_config_libdir = ['$libdir/pkgconfig', '$root/usr/share/pkgconfig']

[host_machine]
system = 'linux'
cpu_family = 'aarch64'
cpu = 'aarch64'
endian = 'little'
INI

# tools/build.sh (warnings as errors, the log's end on failure; TESTS, from
# the environment, limits the targets); the cross file is an option of the
# first setup alone.
if [ -f "$dir/build.ninja" ]; then BUILD_DIR=$dir sh tools/build.sh
else BUILD_DIR=$dir sh tools/build.sh --cross-file "$root/cross.ini"; fi

# The tests start programs through mpiexec, sh and python, so the kernel must
# hand ARM executables to qemu itself (binfmt_misc, as qemu-user-static's
# binfmt.d entry says).
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  [ -e /proc/sys/fs/binfmt_misc/register ] || $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  $SUDO /lib/systemd/systemd-binfmt /usr/lib/binfmt.d/qemu-aarch64.conf
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] ||
    { echo "cross-aarch64: cannot register qemu-aarch64 with binfmt_misc" >&2; exit 1; }
fi

# qemu finds the arm64 C library under QEMU_LD_PREFIX and the sysroot's
# libraries on the library path.  Under emulation UCX's TCP transport hangs now
# and then in MPI_Finalize (one rank flushing, the others already in the PMI
# barrier), so the emulated ranks talk through shared memory alone.
QEMU_LD_PREFIX=/usr/$triplet LD_LIBRARY_PATH=$libdir UCX_TLS=sm,self \
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 10 "$@"
