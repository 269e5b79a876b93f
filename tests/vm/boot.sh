#!/bin/bash
# Boot the multi-NUMA test guest and run PAYLOAD_DIR/run.sh inside it.
#
#   tests/vm/boot.sh [options] --shape snc|epyc|smt IMAGE_DIR PAYLOAD_DIR
#
# IMAGE_DIR   output of tests/vm/build-image.sh (vmlinux, initramfs.cpio)
# PAYLOAD_DIR host directory shared read-write into the guest (9p tag "payload",
#             mounted at /payload); it must contain run.sh. The guest writes
#             PAYLOAD_DIR/output.txt (stdout+stderr of run.sh) and PAYLOAD_DIR/exit_code.
#             run.sh runs under busybox sh with $PAYLOAD set to the share's path
#             in the guest (/payload, or /tmp/payload with --hostroot).
#
# Options:
#   --shape epyc|snc|smt  machine shape (required; see below)
#   --timeout S        wall-clock limit for QEMU (default 120)
#   --log FILE         serial console log (default PAYLOAD_DIR/console.log)
#   --hostroot         also share the host's / read-only (tag "hostroot") and run
#                      run.sh chrooted into it (slow under TCG; prefer bundle.sh)
#   --append ARGS      extra kernel command line
#   --qemu-arg ARG     extra QEMU argument (repeatable)
#   --print-cmd        print the QEMU command line to stderr
#   --verbose          also copy the console log to stderr after the run
#
# Exit status: the payload's exit code (143 if the guest killed it at TIMEOUT-25 s);
# 124 if QEMU hit TIMEOUT; 125 if the guest did not report one (boot failure, see
# the log); 2 on usage errors.
#
# Shapes (what the guest kernel reports, see tests/vm/README.md):
#   epyc: 2 sockets x 2 dies x 2 cores (-cpu EPYC, L3 per die = per node),
#         nodes 0-3 with CPUs 0-1,2-3,4-5,6-7 (256 MiB each), node 4 CPU-less (512 MiB).
#         distances: 10 local, 12 same socket, 20 other socket; node 4: 17 from
#         socket 0 (nodes 0,1), 28 from socket 1 (nodes 2,3).
#         display devices: node 0: 2, node 1: 1, node 2: 0, node 3: 2, node 4: 1,
#         pcie.0 (numa_node -1): 1.
#   snc:  2 sockets x 4 cores (-cpu Skylake-Server, one L3 per socket covering two
#         nodes, like sub-NUMA clustering), nodes 0-3 with CPUs 0-1,2-3,4-5,6-7
#         (256 MiB each). distances: 10 local, 11 same socket, 21 other socket.
#         display devices: node 0: 1, node 1: 1, node 2: 2, node 3: 0,
#         pcie.0 (numa_node -1): 1.
#   smt:  2 sockets x 4 cores x 2 threads (-cpu Skylake-Server, 16 vCPUs, SMT siblings
#         2k,2k+1), node 0 = socket 0 = CPUs 0-7, node 1 = socket 1 = CPUs 8-15
#         (768 MiB each), distance 32. display devices: node 0: 2 (21:00.0 VGA,
#         22:00.0 secondary-vga), node 1: 2 (41:00.0 bochs-display, 42:00.0
#         virtio-gpu-pci); nothing on pcie.0. For Slurm in the guest (vm_slurm).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

SHAPE=
TIMEOUT=120
LOG=
HOSTROOT=0
APPEND_EXTRA=
PRINT_CMD=0
VERBOSE=0
EXTRA_QEMU=()
while [ $# -gt 0 ]; do
    case "$1" in
        --shape) SHAPE=${2:-}; shift 2 ;;
        --shape=*) SHAPE=${1#*=}; shift ;;
        --timeout) TIMEOUT=${2:-}; shift 2 ;;
        --log) LOG=${2:-}; shift 2 ;;
        --hostroot) HOSTROOT=1; shift ;;
        --append) APPEND_EXTRA=${2:-}; shift 2 ;;
        --qemu-arg) EXTRA_QEMU+=("${2:-}"); shift 2 ;;
        --print-cmd) PRINT_CMD=1; shift ;;
        --verbose) VERBOSE=1; shift ;;
        -h|--help) usage ;;
        --) shift; break ;;
        -*) echo "boot.sh: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 2 ] || usage
IMG=$(cd "$1" && pwd)
PAYLOAD=$(cd "$2" && pwd)
[ -f "$IMG/vmlinux" ] && [ -f "$IMG/initramfs.cpio" ] || {
    echo "boot.sh: $IMG has no vmlinux/initramfs.cpio (run build-image.sh)" >&2; exit 2; }
[ -f "$PAYLOAD/run.sh" ] || { echo "boot.sh: $PAYLOAD/run.sh missing" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || {
    echo "boot.sh: qemu-system-x86_64 not found (apt-get install qemu-system-x86)" >&2; exit 2; }
LOG=${LOG:-$PAYLOAD/console.log}

Q=(qemu-system-x86_64
   -machine q35 -accel "tcg,thread=single"
   -nodefaults -no-user-config -display none -no-reboot -monitor none
   -serial "file:$LOG"
   -kernel "$IMG/vmlinux" -initrd "$IMG/initramfs.cpio")

# numa NODE MEM [CPUS]: a memory backend and a NUMA node
numa() {
    Q+=(-object "memory-backend-ram,id=m$1,size=$2")
    if [ -n "${3:-}" ]; then
        Q+=(-numa "node,nodeid=$1,memdev=m$1,cpus=$3")
    else
        Q+=(-numa "node,nodeid=$1,memdev=m$1")
    fi
}
# dist A B VAL (both directions)
dist() {
    Q+=(-numa "dist,src=$1,dst=$2,val=$3" -numa "dist,src=$2,dst=$1,val=$3")
}
# pxb NODE BUS_NR: a PCIe expander bridge (host bridge) with _PXM = NODE, at pcie.0 slot 0x10+NODE
pxb() {
    Q+=(-device "pxb-pcie,id=pxb$1,bus=pcie.0,addr=$(printf 0x%x $((0x10 + $1))),bus_nr=$2,numa_node=$1")
}
# dev NODE IDX DEVICE: DEVICE behind a root port on the pxb of NODE
CHASSIS=10
dev() {
    local rp="rp$1$2"
    Q+=(-device "pcie-root-port,id=$rp,bus=pxb$1,chassis=$CHASSIS,slot=$2"
        -device "$3,bus=$rp")
    CHASSIS=$((CHASSIS + 1))
}

case "$SHAPE" in
    epyc)
        Q+=(-cpu EPYC -m 1536M -smp "8,sockets=2,dies=2,cores=2,threads=1")
        numa 0 256M 0-1; numa 1 256M 2-3; numa 2 256M 4-5; numa 3 256M 6-7
        numa 4 512M
        dist 0 1 12; dist 2 3 12
        dist 0 2 20; dist 0 3 20; dist 1 2 20; dist 1 3 20
        dist 0 4 17; dist 1 4 17; dist 2 4 28; dist 3 4 28
        pxb 0 32; pxb 1 64; pxb 3 96; pxb 4 128
        dev 0 0 VGA,vgamem_mb=4
        dev 0 1 secondary-vga,vgamem_mb=4
        dev 1 0 bochs-display,vgamem=4194304
        dev 3 0 virtio-gpu-pci
        dev 3 1 secondary-vga,vgamem_mb=4
        dev 4 0 secondary-vga,vgamem_mb=4
        # no NUMA node: directly on the root complex
        Q+=(-device "bochs-display,bus=pcie.0,addr=0x4,vgamem=4194304")
        ;;
    snc)
        Q+=(-cpu Skylake-Server -m 1024M -smp "8,sockets=2,cores=4,threads=1")
        numa 0 256M 0-1; numa 1 256M 2-3; numa 2 256M 4-5; numa 3 256M 6-7
        dist 0 1 11; dist 2 3 11
        dist 0 2 21; dist 0 3 21; dist 1 2 21; dist 1 3 21
        pxb 0 32; pxb 1 64; pxb 2 96
        dev 0 0 VGA,vgamem_mb=4
        dev 1 0 secondary-vga,vgamem_mb=4
        dev 2 0 secondary-vga,vgamem_mb=4
        dev 2 1 virtio-gpu-pci
        Q+=(-device "bochs-display,bus=pcie.0,addr=0x4,vgamem=4194304")
        ;;
    smt)
        Q+=(-cpu Skylake-Server -m 1536M -smp "16,sockets=2,cores=4,threads=2")
        numa 0 768M 0-7; numa 1 768M 8-15
        dist 0 1 32
        pxb 0 32; pxb 1 64
        dev 0 0 VGA,vgamem_mb=4
        dev 0 1 secondary-vga,vgamem_mb=4
        dev 1 0 bochs-display,vgamem=4194304
        dev 1 1 virtio-gpu-pci
        ;;
    *) echo "boot.sh: --shape epyc|snc|smt required" >&2; usage ;;
esac

# 9p shares on the root complex (numa_node -1, not display class)
Q+=(-fsdev "local,id=fspayload,path=$PAYLOAD,security_model=none"
    -device "virtio-9p-pci,fsdev=fspayload,mount_tag=payload,bus=pcie.0,addr=0x8")
# The guest kills the payload first (booting takes ~6-10 s) so that its partial
# output and exit status (143) still come back; QEMU itself is killed at TIMEOUT.
GUEST_TIMEOUT=$((TIMEOUT > 30 ? TIMEOUT - 25 : 5))
# pcie_ports=compat: no PCIe port services (AER/PME/hotplug); their probe and
# shutdown cost ~3 s under TCG and nothing here needs them. The rest trims boot time.
APPEND="console=ttyS0 quiet panic=-1 nbvm.timeout=$GUEST_TIMEOUT pcie_ports=compat"
APPEND="$APPEND cryptomgr.notests mitigations=off tsc=reliable no_timer_check nokaslr"
APPEND="$APPEND audit=0 apparmor=0 security=none"
if [ "$HOSTROOT" = 1 ]; then
    Q+=(-fsdev "local,id=fshost,path=/,security_model=none,readonly=on,multidevs=remap"
        -device "virtio-9p-pci,fsdev=fshost,mount_tag=hostroot,bus=pcie.0,addr=0x9")
    APPEND="$APPEND nbvm.hostroot=1"
fi
[ -n "$APPEND_EXTRA" ] && APPEND="$APPEND $APPEND_EXTRA"
Q+=(-append "$APPEND")
Q+=("${EXTRA_QEMU[@]}")

[ "$PRINT_CMD" = 1 ] && printf '%q ' "${Q[@]}" >&2 && echo >&2

rm -f "$PAYLOAD/exit_code" "$PAYLOAD/output.txt" "$LOG"
set +e
# TCG prints "doesn't support requested feature" per CPU feature and vCPU (the
# guest just does not see those features): drop those lines from stderr.
timeout --kill-after=5 "$TIMEOUT" "${Q[@]}" < /dev/null \
    2> >(grep -v "TCG doesn't support requested feature" >&2)
qrc=$?
set -e

[ "$VERBOSE" = 1 ] && [ -f "$LOG" ] && cat "$LOG" >&2

if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    echo "boot.sh: QEMU timed out after ${TIMEOUT}s (log: $LOG)" >&2
    exit 124
fi
if [ "$qrc" != 0 ]; then
    echo "boot.sh: QEMU exited with $qrc (log: $LOG)" >&2
    exit 125
fi
rc=
if [ -f "$PAYLOAD/exit_code" ]; then
    rc=$(tr -dc '0-9' < "$PAYLOAD/exit_code")
fi
if [ -z "$rc" ] && [ -f "$LOG" ]; then
    rc=$(sed -n 's/.*NBVM-EXIT=\([0-9]*\).*/\1/p' "$LOG" | tail -n1)
fi
if [ -z "$rc" ]; then
    echo "boot.sh: guest reported no exit code (log: $LOG)" >&2
    exit 125
fi
exit "$rc"
