#!/bin/bash
# Build a bootable guest image for the multi-NUMA VM test tier.
#
#   tests/vm/build-image.sh OUTDIR
#
# Produces OUTDIR/vmlinux (ELF, booted directly through its PVH entry point),
# OUTDIR/initramfs.cpio (busybox + virtio/9p modules + /init) and OUTDIR/stamp.
# Uses only `apt-get download` + `dpkg-deb -x`; installs nothing on the host.
# If OUTDIR/stamp matches the current package versions (and this script), prints
# "cached" and exits 0.
#
# Environment:
#   NBVM_KERNEL_PKG   kernel package to use (default: what linux-image-amd64 depends on)
#   NBVM_KEEP_DEBS=1  keep the downloaded .debs in OUTDIR/debs (default: removed)
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
OUT=$1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

export LC_ALL=C

die() { echo "build-image: $*" >&2; exit 1; }

for tool in apt-get apt-cache dpkg-deb xz; do
    command -v "$tool" >/dev/null || die "missing host tool: $tool"
done

# One apt-cache call (~1 s) gives the candidate records of the kernel
# meta-package and of busybox-static; the meta-package pins its kernel with "(= VERSION)".
show_candidates() {
    apt-cache show --no-all-versions linux-image-amd64 busybox-static 2>/dev/null
}
RECORDS=$(show_candidates || true)
# apt-get download needs package lists; run `apt-get update` once if there are none.
if ! grep -q '^Package: busybox-static' <<<"$RECORDS"; then
    if [ "$(id -u)" = 0 ]; then
        echo "build-image: no apt package lists; running apt-get update" >&2
        apt-get update -qq >&2 || die "apt-get update failed"
        RECORDS=$(show_candidates || true)
    else
        die "no apt package lists (run 'apt-get update' as root once)"
    fi
fi
field() { # field PACKAGE FIELD
    awk -v p="$1" -v f="$2:" '/^Package: / { cur = $2 } cur == p && $1 == f { sub(/^[^ ]+ /, ""); print; exit }' <<<"$RECORDS"
}
BBVER=$(field busybox-static Version)
if [ -n "${NBVM_KERNEL_PKG:-}" ]; then
    KPKG=$NBVM_KERNEL_PKG
    KVER=$(apt-cache policy "$KPKG" | awk '$1 == "Candidate:" { print $2; exit }')
else
    # e.g. "Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)"
    read -r KPKG KVER < <(field linux-image-amd64 Depends | tr ',' '\n' |
        sed -n 's/^ *\(linux-image-[0-9][^ ]*\) *(= *\([^)]*\)).*/\1 \2/p' | head -n1) || true
fi
[ -n "${KPKG:-}" ] || die "cannot find the kernel package linux-image-amd64 depends on"
[ -n "${KVER:-}" ] && [ "$KVER" != "(none)" ] || die "no candidate version for $KPKG"
[ -n "$BBVER" ] || die "no candidate version for busybox-static"

SCRIPT_SUM=$(sha256sum "$SELF" | cut -c1-16)
STAMP="kernel=$KPKG=$KVER busybox-static=$BBVER script=$SCRIPT_SUM"

if [ -f "$OUT/stamp" ] && [ -f "$OUT/vmlinux" ] && [ -f "$OUT/initramfs.cpio" ] &&
   [ "$(cat "$OUT/stamp")" = "$STAMP" ]; then
    echo "cached"
    exit 0
fi

WORK=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
DEBS=$WORK/debs
mkdir -p "$DEBS"
chmod 755 "$WORK" "$DEBS"

echo "build-image: downloading $KPKG=$KVER busybox-static=$BBVER" >&2
# Sandbox user root: the _apt user may not be able to write into OUTDIR.
(cd "$DEBS" && apt-get download -q -o APT::Sandbox::User=root \
    "$KPKG=$KVER" "busybox-static=$BBVER" >&2) || die "apt-get download failed"

KDEB=$(ls "$DEBS"/linux-image-*.deb | head -n1)
BDEB=$(ls "$DEBS"/busybox-static_*.deb | head -n1)
mkdir -p "$WORK/kernel" "$WORK/busybox"
# Only boot/ and the modules we need would suffice; extracting all is ~1 s.
dpkg-deb -x "$KDEB" "$WORK/kernel"
dpkg-deb -x "$BDEB" "$WORK/busybox"

VMLINUZ=$(ls "$WORK"/kernel/boot/vmlinuz-* | head -n1)
KREL=${VMLINUZ##*/vmlinuz-}
MODDIR=$WORK/kernel/lib/modules/$KREL
[ -d "$MODDIR" ] || die "no modules dir for $KREL"

# --- vmlinux: the ELF kernel inside the xz-compressed bzImage ------------------
# Find the xz stream magic (FD 37 7A 58 5A 00) and decompress from there; xz
# complains about trailing data after the stream, which is fine.
extract_vmlinux() {
    local img=$1 dst=$2 off
    for off in $(grep -obUaP '\xfd7zXZ\x00' "$img" | cut -d: -f1); do
        tail -c +"$((off + 1))" "$img" | xz -dc 2>/dev/null > "$dst" || true
        if [ "$(head -c 4 "$dst" | od -An -tx1 | tr -d ' ')" = "7f454c46" ]; then
            return 0
        fi
    done
    return 1
}
extract_vmlinux "$VMLINUZ" "$WORK/vmlinux" || die "could not extract vmlinux from $VMLINUZ"

# --- modules: dependency closure of virtio_pci, 9pnet_virtio, 9p ---------------
# The package has no modules.dep (depmod runs at install time); read each
# module's "depends=" from its .modinfo strings instead.
declare -A MODPATH=()
while IFS= read -r f; do
    b=${f##*/}; b=${b%%.ko*}; b=${b//-/_}
    MODPATH[$b]=$f
done < <(find "$MODDIR/kernel" -name '*.ko*')

declare -A SEEN=()
ORDER=()
modinfo_depends() {
    local f=$1
    case "$f" in
        *.ko.xz) xz -dc "$f" ;;
        *.ko.zst) zstd -dc "$f" ;;
        *.ko.gz) gzip -dc "$f" ;;
        *) cat "$f" ;;
    esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '
}
resolve() {
    local m=${1//-/_} d
    [ -n "${SEEN[$m]:-}" ] && return 0
    SEEN[$m]=1
    [ -n "${MODPATH[$m]:-}" ] || die "module $m not found in $KPKG"
    for d in $(modinfo_depends "${MODPATH[$m]}"); do
        resolve "$d"
    done
    ORDER+=("$m")
}
for m in virtio_pci 9pnet_virtio 9p; do
    resolve "$m"
done

# --- initramfs tree ------------------------------------------------------------
ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,run,payload,host,lib/modules,etc}
cp "$WORK/busybox/bin/busybox" "$ROOT/bin/busybox"
chmod 755 "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"
: > "$ROOT/etc/modules.order"
for m in "${ORDER[@]}"; do
    f=${MODPATH[$m]}
    case "$f" in
        *.ko.xz) xz -dc "$f" > "$ROOT/lib/modules/$m.ko" ;;
        *.ko.zst) zstd -dc "$f" > "$ROOT/lib/modules/$m.ko" ;;
        *.ko.gz) gzip -dc "$f" > "$ROOT/lib/modules/$m.ko" ;;
        *) cp "$f" "$ROOT/lib/modules/$m.ko" ;;
    esac
    echo "$m" >> "$ROOT/etc/modules.order"
done
echo "$KREL" > "$ROOT/etc/kernel-release"

cat > "$ROOT/init" <<'EOF'
#!/bin/sh
# numabind VM test tier guest init.
# Kernel command line options (set by boot.sh):
#   nbvm.hostroot=1   also mount the 9p share "hostroot" (host / read-only) at /host
#                     and run the payload chrooted there (payload at /tmp/payload)
#   nbvm.timeout=S    kill the payload after S seconds (default 600)
#   nbvm.msize=N      9p msize (default 512000; the 6.1 kernel's default 8192 is slow)
#   nbvm.hostcache=M  9p cache mode of the hostroot share (default loose; the host
#                     file system must not change during the run)
#   nbvm.debug=1      print guest uptime at each init step
export PATH=/bin:/sbin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

hostroot=0
ptimeout=600
msize=512000
hostcache=loose
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        nbvm.hostroot=*) hostroot=${arg#*=} ;;
        nbvm.timeout=*) ptimeout=${arg#*=} ;;
        nbvm.debug=*) debug=${arg#*=} ;;
        nbvm.msize=*) msize=${arg#*=} ;;
        nbvm.hostcache=*) hostcache=${arg#*=} ;;
    esac
done
dbg() { [ "${debug:-0}" = 1 ] && echo "NBVM-DEBUG $(cut -d' ' -f1 /proc/uptime) $*"; }
dbg init

finish() {
    dbg finish
    sync
    umount /host/tmp/payload 2>/dev/null
    umount /payload 2>/dev/null
    echo "NBVM-EXIT=$1"
    dbg poweroff
    poweroff -f
    sleep 10
}

for m in $(cat /etc/modules.order); do
    insmod /lib/modules/$m.ko || { echo "NBVM: insmod $m failed"; finish 201; }
done

# virtio devices probe asynchronously: wait until the 9p tags appear.
i=0
while [ $i -lt 200 ]; do
    tags=$(cat /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag 2>/dev/null | tr '\0' ' ')
    case " $tags " in *" payload "*) break ;; esac
    i=$((i + 1)); usleep 20000
done

dbg "modules loaded, 9p tags: $tags"
P9OPTS=trans=virtio,version=9p2000.L,msize=$msize
mount -t 9p -o $P9OPTS,cache=none payload /payload || { echo "NBVM: cannot mount payload share"; finish 202; }

if [ "$hostroot" = 1 ]; then
    mount -t 9p -o $P9OPTS,ro,cache=$hostcache hostroot /host || { echo "NBVM: cannot mount hostroot share"; finish 203; }
    mount -t proc proc /host/proc
    mount -t sysfs sysfs /host/sys
    mount -t devtmpfs devtmpfs /host/dev 2>/dev/null
    mount -t tmpfs tmpfs /host/tmp
    mount -t tmpfs tmpfs /host/run 2>/dev/null
    mkdir -p /host/tmp/payload
    mount --bind /payload /host/tmp/payload
fi

if [ ! -f /payload/run.sh ]; then
    echo "NBVM: /payload/run.sh missing"
    finish 204
fi

dbg mounted
# Libraries bundled by tests/vm/bundle.sh: install them into the RAM root so
# host-built dynamic programs run natively (not needed in the host-root chroot).
if [ "$hostroot" != 1 ] && [ -d /payload/sysroot ]; then
    cp -a /payload/sysroot/. / || { echo "NBVM: cannot install /payload/sysroot"; finish 206; }
    dbg sysroot installed
fi
echo "NBVM-PAYLOAD-START"
# The payload's stdout+stderr go to /payload/output.txt and, live, to the console
# (serial log) so a hang is visible there. It runs in its own session/process
# group: on timeout, and after it exits, the whole group is killed, so processes
# it left behind cannot keep the output pipe open.
mkfifo /tmp/nbvm-out
tee /payload/output.txt < /tmp/nbvm-out &
teepid=$!
if [ "$hostroot" = 1 ]; then
    ( cd /; PAYLOAD=/tmp/payload HOME=/tmp exec setsid chroot /host /bin/sh /tmp/payload/run.sh ) \
        > /tmp/nbvm-out 2>&1 < /dev/null &
else
    ( cd /; PAYLOAD=/payload HOME=/tmp exec setsid /bin/sh /payload/run.sh ) \
        > /tmp/nbvm-out 2>&1 < /dev/null &
fi
pid=$!
( sleep "$ptimeout"; echo "NBVM: payload timed out after ${ptimeout}s" > /dev/console
  kill -TERM -$pid 2>/dev/null; sleep 2; kill -KILL -$pid 2>/dev/null ) &
wpid=$!
wait $pid
echo $? > /tmp/nbvm-rc
kill -KILL -$pid 2>/dev/null
kill $wpid 2>/dev/null
( sleep 3; kill $teepid 2>/dev/null ) &
wait $teepid
dbg "payload done"
rc=$(cat /tmp/nbvm-rc 2>/dev/null || echo 205)
echo "$rc" > /payload/exit_code
echo "NBVM-PAYLOAD-END"
finish "$rc"
EOF
chmod 755 "$ROOT/init"

# Host may lack cpio: use the busybox we just extracted (static, runs on the host).
BB=$WORK/busybox/bin/busybox
(cd "$ROOT" && find . | LC_ALL=C sort | "$BB" cpio -o -H newc 2>/dev/null) > "$WORK/initramfs.cpio"
[ -s "$WORK/initramfs.cpio" ] || die "cpio failed"

mv -f "$WORK/vmlinux" "$OUT/vmlinux"
mv -f "$WORK/initramfs.cpio" "$OUT/initramfs.cpio"
cp "$BB" "$OUT/busybox"
if [ "${NBVM_KEEP_DEBS:-0}" = 1 ]; then
    rm -rf "$OUT/debs"; mv "$DEBS" "$OUT/debs"
fi
echo "$KREL" > "$OUT/kernel-release"
printf '%s\n' "${ORDER[@]}" > "$OUT/modules.order"
echo "$STAMP" > "$OUT/stamp"
echo "build-image: built $OUT (kernel $KREL, modules: ${ORDER[*]})" >&2
