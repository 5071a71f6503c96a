#!/bin/sh
# The x86-64-v4 (AVX-512) kernels' unit tests on a CPU without AVX-512: runs
# them in Bochs, which emulates a Skylake-X, under Debian's cloud kernel with
# an initramfs made here (busybox, the test programs and the libraries they
# load; MPI starts as a singleton).  What it shows is that the code an
# AVX-512 CPU runs computes what the tests demand; emulated time says nothing
# about speed.  Bochs computes floating point in software, so the
# convolution test runs its direct kernels alone (t300-conv --direct-kernels).
#
#   sh tools/emulate-x86-64-v4.sh
#
# The build goes to BUILD_DIR (default build-v4) at the kernel level KERNEL_ISA
# (default x86-64-v4, pinned; auto: the run-time dispatch, which picks
# x86-64-v4 in the guest, so BUILD_DIR=build KERNEL_ISA=auto runs the normal
# build's tests without building them again); the results to BUILD_DIR/meson-logs/testlog-emulated.json, one line per test
# with meson's "name" and "result", which tools/test.sh counts.  Exits
# non-zero if a test fails or the emulator does not finish in TIMEOUT seconds
# (default 1200).
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-v4}
isa=${KERNEL_ISA:-x86-64-v4}
timeout=${TIMEOUT:-1200}
tests="t300-conv t301-pool t303-activations-losses t306-bias-sum"

sh tools/install-deps.sh bochs bochsbios vgabios isolinux syslinux-common genisoimage busybox-static cpio \
  meson ninja-build pkg-config

BUILD_DIR=$dir TARGETS=$(for t in $tests; do printf 'tests/%s ' "$t"; done) sh tools/build.sh -Dkernel_isa="$isa"
work=$dir/emulated
mkdir -p "$work"

# Debian's kernel for cloud guests: few drivers, so it boots in Bochs in about
# a minute.  Downloaded, not installed.
if [ ! -f "$work/vmlinuz" ]; then
  package=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  if [ -z "$package" ]; then
    echo "emulate-x86-64-v4: apt knows no linux-image-cloud-amd64 (run apt-get update)" >&2
    exit 1
  fi
  rm -rf "$work/kernel" && mkdir -p "$work/kernel"
  (cd "$work/kernel" && apt-get download -qq -o APT::Sandbox::User=root "$package")
  dpkg-deb -x "$work"/kernel/*.deb "$work/kernel"
  cp "$work"/kernel/boot/vmlinuz-* "$work/vmlinuz"
  rm -rf "$work/kernel"
fi

# The initramfs: each program and library at its own path.
root=$work/root
rm -rf "$root"
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/tmp" "$root/etc"
cp /bin/busybox "$root/bin/"
copy_with_libraries() {
  for file in "$@"; do
    real=$(readlink -f "$file")
    mkdir -p "$root$(dirname "$real")"
    cp -L "$real" "$root$real"
    ldd "$real" | awk '/=> \// {print $3} /^\t\// {print $1}' | while read -r lib; do
      [ -f "$root$lib" ] && continue # the programs share most of their libraries
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
  done
}
# shellcheck disable=SC2046 # one path per word
copy_with_libraries $(for t in $tests; do printf '%s/tests/%s ' "$dir" "$t"; done)
copy_with_libraries /usr/lib/x86_64-linux-gnu/ucx/*.so.*[0-9]
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo '127.0.0.1 localhost' > "$root/etc/hosts"
{
  cat <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
hostname localhost
export UCX_TLS=self,sm OPENBLAS_NUM_THREADS=1
grep -q avx512f /proc/cpuinfo || echo "@@ no avx512f in the guest's /proc/cpuinfo"
run() {
  name=$1
  shift
  "$@" > /tmp/out 2> /tmp/err
  rc=$?
  head -n 40 /tmp/err
  tail -n 3 /tmp/out
  echo "@@ $name rc=$rc"
}
INIT
  for t in $tests; do
    args=
    [ "$t" = t300-conv ] && args=--direct-kernels
    printf 'run %s %s %s\n' "$t" "$(readlink -f "$dir/tests/$t")" "$args"
  done
  echo 'echo "@@ done"'
  # The serial port drains before the machine stops.
  echo 'sleep 2; poweroff -f'
} > "$root/init"
chmod +x "$root/init"
iso=$work/iso
rm -rf "$iso" && mkdir -p "$iso/isolinux"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$iso/initrd.gz"
cp "$work/vmlinuz" "$iso/vmlinuz"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$iso/isolinux/"
# Bochs 2.7 reports the compacted XSAVE area's size wrong (the standard
# layout's), and Linux then turns XSAVE off and AVX with it; without XSAVES
# and XSAVEC it uses the standard layout, which Bochs reports right.
cat > "$iso/isolinux/isolinux.cfg" <<'CFG'
DEFAULT adjoin
PROMPT 0
TIMEOUT 0
LABEL adjoin
  KERNEL /vmlinuz
  APPEND initrd=/initrd.gz console=ttyS0 loglevel=4 mitigations=off clearcpuid=xsaves,xsavec
CFG
genisoimage -quiet -o "$work/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot \
  -boot-load-size 4 -boot-info-table "$iso"

cat > "$work/bochsrc" <<RC
megs: 1024
cpu: model=corei7_skylake_x, count=1, ips=200000000
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/bochs/VGABIOS-lgpl-latest
display_library: rfb, options="timeout=0"
sound: waveoutdrv=dummy, waveindrv=dummy, midioutdrv=dummy
speaker: enabled=0
ata0-master: type=cdrom, path=$work/boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=$work/serial.log
log: $work/bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
debug: action=ignore
clock: sync=none, time0=local
RC

# Debian's Bochs starts in its debugger: 'c' runs the machine, 'quit' ends
# the debugger once the guest has powered off.
rm -f "$work/serial.log"
start=$(date +%s)
printf 'c\nquit\n' | timeout "$timeout" bochs-bin -q -f "$work/bochsrc" > "$work/bochs.out" 2>&1 || true
seconds=$(($(date +%s) - start))
grep -v '^\[ *[0-9]' "$work/serial.log" 2>/dev/null || true

# One line per test, as meson writes them; a test without a result line
# (the emulator stopped or timed out first) is a failure.
mkdir -p "$dir/meson-logs"
log=$dir/meson-logs/testlog-emulated.json
: > "$log"
status=0
for t in $tests; do
  rc=$(sed -n "s/^@@ $t rc=\([0-9]*\).*/\1/p" "$work/serial.log" 2>/dev/null | head -n 1)
  if [ "$rc" = 0 ]; then result=OK; else result=FAIL; status=1; fi
  printf '{"name": "%s-emulated-x86-64-v4", "result": "%s"}\n' "$t" "$result" >> "$log"
  echo "emulated x86-64-v4: $t ${result} (rc ${rc:-none})"
done
# t306 names the kernels it ran: those of x86-64-v4 whether pinned or chosen
# at run time (a guest that hid AVX-512 from the dispatch would run others).
if ! grep -q 'kernels x86-64-v4' "$work/serial.log" 2>/dev/null; then
  echo "emulate-x86-64-v4: t306 did not report the x86-64-v4 kernels" >&2
  status=1
fi
if ! grep -q '^@@ done' "$work/serial.log" 2>/dev/null; then
  echo "emulate-x86-64-v4: the guest did not finish in ${timeout} s; see $work/bochs.out and $work/serial.log" >&2
  status=1
fi
echo "emulate-x86-64-v4: ${seconds} s in Bochs"
exit $status
