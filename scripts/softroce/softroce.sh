#!/bin/bash
# Runs a command inside a throw-away qemu VM that has a Soft-RoCE (rdma_rxe)
# device, and exits with the command's exit status.
#
#   scripts/softroce/softroce.sh [-w WORKDIR] [--] COMMAND [ARGS...]
#
# The VM boots Debian's own kernel package (it has rdma_rxe; most container
# hosts' kernels do not) under TCG emulation (-cpu max; no KVM needed), mounts
# the host's / read-only over 9p and chroots into it, so binaries built on the
# host run at the same paths inside. WORKDIR (default build/softroce) caches the
# kernel and initramfs and is shared read-write at the same path; COMMAND runs
# with cwd = the caller's cwd. Inside: dummy0 (192.168.77.1/24) carries rxe0.
#
# Exit status: COMMAND's, or 90 (setup failed: packages, kernel download,
# initramfs) or 91 (the VM gave no result: boot failure or VM timeout).
# Env: SOFTROCE_MEM (MiB, 1536), SOFTROCE_SMP (2), SOFTROCE_TIMEOUT (seconds
# for the whole VM, 1200), SOFTROCE_KPKG (kernel package; default: what
# linux-image-amd64 depends on), SOFTROCE_NO_APT=1 (never run apt-get).
# Needs root (apt-get, 9p export of /) and Debian/Ubuntu packages.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK="$ROOT/build/softroce"
while [ $# -gt 0 ]; do
  case "$1" in
    -w) WORK=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-w WORKDIR] [--] COMMAND [ARGS...]" >&2; exit 2; }
MEM=${SOFTROCE_MEM:-1536}; SMP=${SOFTROCE_SMP:-2}; TIMEOUT=${SOFTROCE_TIMEOUT:-1200}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
log() { echo "softroce: $*" >&2; }
die() { log "SETUP FAILED: $*"; exit 90; }
# The guest mounts its own /tmp, /run, /proc, /sys and /dev: what lives there
# on the host is invisible inside. A work dir there moves to /var/tmp, a
# command binary there is copied into the work dir, a cwd there becomes it.
guest_hidden() { case "$1" in /tmp|/tmp/*|/run|/run/*|/proc/*|/sys/*|/dev/*) return 0 ;; esac; return 1; }
if guest_hidden "$WORK"; then
  NEW=/var/tmp/mycoll-softroce
  log "WORKDIR $WORK is hidden inside the guest; using $NEW"
  mkdir -p "$NEW" && WORK=$(cd "$NEW" && pwd)
fi
if [ -f "$1" ] && guest_hidden "$(readlink -f "$1")"; then
  mkdir -p "$WORK/bin" && cp -f "$1" "$WORK/bin/" || die "cannot copy $1 into $WORK/bin"
  log "running a copy of $1 from $WORK/bin (its path is hidden inside the guest)"
  CMD0="$WORK/bin/$(basename "$1")"; shift; set -- "$CMD0" "$@"
fi
GUEST_CWD=$PWD
guest_hidden "$GUEST_CWD" && GUEST_CWD=$WORK

# ---- 1. host packages -------------------------------------------------------
PKGS="qemu-system-x86 busybox-static kmod cpio iproute2 rdma-core ibverbs-providers"
kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '!done && /Depends: linux-image-[0-9]/ {print $2; done=1}'
}
need_apt=0
dpkg -s $PKGS >/dev/null 2>&1 || need_apt=1
[ -n "${SOFTROCE_KPKG:-}" ] || [ -n "$(kernel_pkg)" ] || need_apt=1
if [ "$need_apt" = 1 ]; then
  [ -z "${SOFTROCE_NO_APT:-}" ] || die "missing packages ($PKGS) and SOFTROCE_NO_APT is set"
  command -v apt-get >/dev/null || die "apt-get not found: install $PKGS by hand"
  log "installing $PKGS"
  apt-get update -qq >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS >&2 ||
    die "apt-get install $PKGS failed"
fi
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found"

# ---- 2. kernel: vmlinuz + modules out of the .deb (cached) -----------------
KPKG=${SOFTROCE_KPKG:-$(kernel_pkg)}
[ -n "$KPKG" ] || die "cannot resolve the kernel package behind linux-image-amd64"
KV=${KPKG#linux-image-}
KDIR="$WORK/kernel-$KV"
if [ ! -f "$KDIR/boot/vmlinuz-$KV" ]; then
  log "downloading $KPKG (about 70 MB, once)"
  rm -rf "$KDIR" "$WORK/deb" && mkdir -p "$WORK/deb"
  (cd "$WORK/deb" && apt-get download "$KPKG" >&2) || die "apt-get download $KPKG failed (no network?)"
  dpkg-deb -x "$WORK"/deb/*.deb "$KDIR.tmp" || die "dpkg-deb -x failed"
  depmod -b "$KDIR.tmp" "$KV" || die "depmod failed"
  mv "$KDIR.tmp" "$KDIR" && rm -rf "$WORK/deb"
fi

# ---- 3. initramfs: busybox, the modules rxe needs, /init (cached) -----------
# crc32_generic: rxe computes ICRCs with crc32; without it rdma link add fails.
MODS="virtio_pci virtio_net 9pnet_virtio 9p dummy crc32_generic crc32_pclmul rdma_rxe"
INITRD="$WORK/initrd-$KV.img"
if [ ! -f "$INITRD" ] || [ "$INITRD" -ot "$0" ]; then
  T="$WORK/initrd.tmp"; rm -rf "$T"; mkdir -p "$T"/{bin,dev,proc,sys,host,work}
  cp "$(command -v busybox)" "$T/bin/busybox" || die "busybox (busybox-static) not found"
  for m in $MODS; do
    modprobe -d "$KDIR" -S "$KV" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}'
  done | awk '!seen[$0]++' > "$T/mods.host"
  grep -q rdma_rxe "$T/mods.host" || die "rdma_rxe not found in $KPKG"
  while read -r ko; do
    rel=${ko#"$KDIR"}; mkdir -p "$T$(dirname "$rel")"; cp "$ko" "$T$rel"; echo "$rel"
  done < "$T/mods.host" > "$T/insmod.list"
  cat > "$T/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for ko in $(cat /insmod.list); do insmod "$ko" 2>/dev/null || echo "insmod $ko failed"; done
arg() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
WORK=$(arg softroce_work)
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 work /work
R=/host
mount -t proc proc $R/proc; mount -t sysfs sys $R/sys; mount -o bind /dev $R/dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts $R/dev/pts; mount -t tmpfs shm $R/dev/shm
mount -t tmpfs tmp $R/tmp; mount -t tmpfs run $R/run
mount -o bind /work $R$WORK
chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root TERM=dumb /bin/bash "$WORK/guest.sh"
echo $? > /work/guest.rc
sync; umount $R$WORK; umount /work
poweroff -f
INIT
  chmod +x "$T/init"
  (cd "$T" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp" || die "cpio failed"
  mv "$INITRD.tmp" "$INITRD" && rm -rf "$T"
fi

# ---- 4. the guest side: RDMA device, then the command ----------------------
CMD=$(printf '%q ' "$@")
cat > "$WORK/guest.sh" <<GUEST
set -u
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip addr add 192.168.77.1/24 dev dummy0 && ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || { echo "softroce: rdma link add failed"; exit 92; }
for i in \$(seq 50); do
  [ -e /sys/class/infiniband/rxe0/ports/1/gids/1 ] && break; sleep 0.1
done
echo "softroce: guest kernel \$(uname -r), rxe0 on dummy0, \$(nproc) cpus, up \$(cut -d' ' -f1 /proc/uptime)s"
ulimit -l unlimited
cd $(printf '%q' "$GUEST_CWD")
export SOFTROCE_GUEST=1
$(for v in $(env | sed -n 's/^\(MYCOLL_[A-Z0-9_]*\|GTEST_[A-Z0-9_]*\)=.*/\1/p'); do
    printf 'export %s=%q\n' "$v" "${!v}"; done)
$CMD
GUEST
rm -f "$WORK/guest.rc"
log "booting $KV under TCG ($SMP cpus, $MEM MiB) to run: $*"
T0=$(date +%s)
timeout "$TIMEOUT" qemu-system-x86_64 -machine q35,accel=tcg -cpu max -m "$MEM" -smp "$SMP" \
  -display none -serial stdio -monitor none -no-reboot -nic none \
  -kernel "$KDIR/boot/vmlinuz-$KV" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 tsc=reliable softroce_work=$WORK" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$WORK",mount_tag=work,security_model=none </dev/null
QRC=$?
log "VM ran $(( $(date +%s) - T0 )) s (qemu exit $QRC)"
if [ ! -f "$WORK/guest.rc" ]; then
  log "NO RESULT from the guest (boot failed or timed out after ${TIMEOUT}s)"
  exit 91
fi
exit "$(cat "$WORK/guest.rc")"
