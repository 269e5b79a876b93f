#!/bin/bash
# numabind in a real multi-NUMA kernel: boots the QEMU test guest once per shape,
# runs `numabind plan --json` and `numabind run ... -- probe` for every case of
# tests/vm/payload/SHAPE.cases and every local rank, plus `numabind topo --json`
# and (with --api-probe) the C API cases of tests/vm/payload/SHAPE.api, and checks
# the result (tests/vm/check_bindings.py) against the guest kernel's own facts
# (sysfs: node cpulists, PCI numa_node, CPU packages and L3s).
#
#   tests/vm/numabind_vm_test.sh [options] NUMABIND_BINARY
#
#   --shape S     epyc or snc (repeatable; default: both)
#   --work DIR    work directory (default ${NBVM_WORK:-${TMPDIR:-/tmp}/numabind-vm-test});
#                 payloads in DIR/payload-SHAPE, the probe in DIR/probe
#   --image DIR   guest image directory, built/cached by build-image.sh
#                 (default DIR/image of --work)
#   --keep        keep the payload directories (always kept when a check fails)
#   --strict      known numabind bugs (XFAIL) fail the test too (also NBVM_STRICT=1)
#   --timeout S   QEMU wall-clock limit per boot (default 180)
#   --api-probe P nb_api_probe (tests/python/nb_api_probe.c, linked against
#                 libnumabind.so): runs the C API cases (numabind_bind with threads
#                 started before it, migrate=1 of pages touched off home); bundled with
#                 libnumabind.so.0 and its libraries
#   --serial      boot the shapes one after the other (default: in parallel when the
#                 host has a CPU per shape)
#
# Needs on the host: qemu-system-x86_64, gcc with static libc, python3, apt-get with
# package lists (image build), ldd. Exit status: 0 if all checks passed; 77 if a
# host tool is missing (ctest SKIP); 1 otherwise.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${NBVM_WORK:-${TMPDIR:-/tmp}/numabind-vm-test}
IMG=
KEEP=0
STRICT=${NBVM_STRICT:-0}
TIMEOUT=180
PARALLEL=1
SHAPES=()
API_PROBE=
while [ $# -gt 0 ]; do
    case "$1" in
        --shape) SHAPES+=("$2"); shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --image) IMG=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --strict) STRICT=1; shift ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --serial) PARALLEL=0; shift ;;
        --api-probe) API_PROBE=$(realpath "$2"); shift 2 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "numabind_vm_test: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || { echo "usage: $0 [options] NUMABIND_BINARY (see --help)" >&2; exit 2; }
NUMABIND=$(realpath "$1")
[ -x "$NUMABIND" ] || { echo "numabind_vm_test: $1 is not executable" >&2; exit 2; }
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(epyc snc)
if [ -n "$API_PROBE" ] && [ ! -x "$API_PROBE" ]; then
    echo "numabind_vm_test: --api-probe $API_PROBE is not executable" >&2; exit 2
fi
[ -n "$API_PROBE" ] || echo "INFO no --api-probe: the C API cases (SHAPE.api) are not run"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
IMG=${IMG:-$WORK/image}

# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"
need qemu-system-x86_64 gcc python3 ldd apt-get dpkg-deb xz

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
T_START=$(now)
FAILED=0

# --- image (cached) -----------------------------------------------------------------
t0=$(now)
if ! out=$("$HERE/build-image.sh" "$IMG" 2>&1); then
    echo "$out" >&2
    echo "FAIL build-image.sh $IMG"
    exit 1
fi
echo "TIME image ($( [ "$out" = cached ] && echo cached || echo built)): $(elapsed "$t0" "$(now)") s"

# --- probe (static; rebuilt when probe.c changes) -----------------------------------
PROBE=$WORK/probe
if [ ! -x "$PROBE" ] || [ "$HERE/probe.c" -nt "$PROBE" ]; then
    gcc -static -O2 -Wall -o "$PROBE" "$HERE/probe.c" || { echo "FAIL gcc -static probe.c"; exit 1; }
fi

# --- payloads ------------------------------------------------------------------------
# make_payload SHAPE: DIR/payload-SHAPE with numabind (+ libraries), the probe, the
# guest driver, guest-facts.sh, the case table and the device-match specs for topo
make_payload() {
    local shape=$1 PD=$WORK/payload-$1 CASES=$HERE/payload/$1.cases
    [ -f "$CASES" ] || { echo "FAIL no case table $CASES"; return 1; }
    rm -rf "$PD"
    mkdir -p "$PD"
    "$HERE/bundle.sh" "$PD" "$NUMABIND" $API_PROBE >/dev/null ||
        { echo "FAIL $shape: bundle.sh $NUMABIND $API_PROBE"; return 1; }
    if [ "$(basename "$NUMABIND")" != numabind ]; then mv "$PD/bin/$(basename "$NUMABIND")" "$PD/bin/numabind"; fi
    # the guest copies the programs (and the sysroot) into RAM at boot; debug info only
    # slows that down (libnumabind.so.0 lands at its build-tree path, the probe's RUNPATH)
    strip --strip-debug "$PD/bin/numabind" 2>/dev/null || true
    if [ -n "$API_PROBE" ]; then
        [ -f "$HERE/payload/$shape.api" ] || { echo "FAIL no C API case table $HERE/payload/$shape.api"; return 1; }
        [ "$(basename "$API_PROBE")" = nb_api_probe ] || mv "$PD/bin/$(basename "$API_PROBE")" "$PD/bin/nb_api_probe"
        strip --strip-debug "$PD/bin/nb_api_probe" 2>/dev/null || true
        find "$PD/sysroot" -name 'libnumabind.so*' -exec strip --strip-debug {} + 2>/dev/null || true
        cp "$HERE/payload/$shape.api" "$PD/api.txt"
    fi
    cp "$PROBE" "$PD/bin/probe"
    cp "$HERE/payload/run.sh" "$HERE/guest-facts.sh" "$PD/"
    cp "$CASES" "$PD/cases.txt"
    grep -v '^#' "$CASES" | awk -F'|' 'NF >= 4 {
        n = split($4, a, " "); for (i = 1; i < n; i++) if (a[i] == "--device-match") print a[i + 1] }' |
        sort -u > "$PD/topo.txt"
}

# boot_shape SHAPE: one boot runs every case; writes DIR/payload-SHAPE/boot.{log,rc,time}
boot_shape() {
    local shape=$1 PD=$WORK/payload-$1 t0 rc
    t0=$(now)
    "$HERE/boot.sh" --shape "$shape" --timeout "$TIMEOUT" "$IMG" "$PD" > "$PD/boot.log" 2>&1
    rc=$?
    echo "$rc" > "$PD/boot.rc"
    elapsed "$t0" "$(now)" > "$PD/boot.time"
}

READY=()
for shape in "${SHAPES[@]}"; do
    if make_payload "$shape"; then READY+=("$shape"); else FAILED=1; fi
done

# The shapes boot in parallel when the host has a CPU per QEMU (TCG, one thread each).
t0=$(now)
if [ "$PARALLEL" = 1 ] && [ "$(nproc)" -ge "${#READY[@]}" ]; then
    pids=()
    for shape in "${READY[@]}"; do boot_shape "$shape" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p"; done
    echo "TIME boots (${READY[*]} in parallel): $(elapsed "$t0" "$(now)") s"
else
    for shape in "${READY[@]}"; do boot_shape "$shape"; done
    echo "TIME boots (${READY[*]} one after the other): $(elapsed "$t0" "$(now)") s"
fi

# --- checks ----------------------------------------------------------------------------
for shape in "${READY[@]}"; do
    PD=$WORK/payload-$shape
    rc=$(cat "$PD/boot.rc" 2>/dev/null || echo 125)
    echo "TIME boot+payload $shape: $(cat "$PD/boot.time" 2>/dev/null) s (exit $rc)"
    sed 's/^/  boot.sh: /' "$PD/boot.log"
    SHAPE_FAILED=0
    if [ "$rc" != 0 ]; then
        echo "FAIL $shape: boot.sh exit $rc (log: $PD/console.log)"
        tail -n 20 "$PD/console.log" 2>/dev/null | sed 's/^/  console: /'
        SHAPE_FAILED=1
    fi
    if [ ! -f "$PD/output.txt" ]; then
        echo "FAIL $shape: no output.txt"
        FAILED=1
        continue
    fi
    if [ "$STRICT" = 1 ]; then set -- --strict; else set --; fi
    if [ -n "$API_PROBE" ]; then set -- "$@" --api "$HERE/payload/$shape.api"; fi
    python3 "$HERE/check_bindings.py" "$@" "$shape" "$HERE/payload/$shape.cases" "$PD/output.txt" ||
        SHAPE_FAILED=1
    if [ "$SHAPE_FAILED" = 1 ]; then
        FAILED=1
        echo "INFO $shape: payload kept in $PD (guest output: $PD/output.txt)"
    elif [ "$KEEP" = 0 ]; then
        rm -rf "$PD"
    fi
done

echo "TIME total: $(elapsed "$T_START" "$(now)") s"
if [ "$FAILED" = 0 ]; then
    echo "numabind_vm_test: all checks passed"
    exit 0
fi
echo "numabind_vm_test: FAILED"
exit 1
