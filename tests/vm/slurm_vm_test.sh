#!/bin/bash
# Slurm with numabind inside the multi-NUMA, SMT test guest (ctest vm_slurm, label vm).
#
#   tests/vm/slurm_vm_test.sh [options] PATH/spank_numabind.so
#
# Boots the smt guest once (tests/vm/boot.sh --shape smt --hostroot: 16 vCPUs = 2 sockets x
# 4 cores x 2 threads, 2 NUMA nodes, 2 display-class PCI devices per node standing in for
# GPUs), starts munged, slurmctld and slurmd in it (tests/slurm/cluster.sh: task/cgroup +
# task/affinity on cgroup v1, ConstrainCores, ConstrainDevices, 4 fake GPUs over mknod'ed
# /dev/nvidia-style files) with the plugin given (and numabind_stepd.so beside it) and live
# discovery (no topology=), and runs the srun cases of tests/vm/payload/slurm.cases as an
# unprivileged user. tests/vm/check_slurm.py checks each task's binding from inside the task
# (tests/vm/probe.c) against the guest's own facts: sysfs, hwloc-calc and lstopo in the guest,
# which device files open(2) lets the task open.
#
#   --work DIR     work directory (default ${NBVM_WORK:-${TMPDIR:-/tmp}/numabind-vm-slurm})
#   --image DIR    guest image directory, built/cached by build-image.sh (default DIR/image)
#   --timeout S    QEMU wall-clock limit (default 330)
#   --keep         keep the payload directory (always kept when a check fails)
#   --only IDS     run only these case ids (comma-separated; the @cluster lines stay)
#   --cgroup-v2    boot the guest with cgroup_no_v1=all, mount only cgroup2 and run Slurm with
#                  CgroupPlugin=cgroup/v2 (the unified hierarchy most clusters run now; the
#                  device constraint is an eBPF program: open(2) alone tells what a task holds)
#   --control      the same jobs without numabind (no plugstack line, no --numa-binding):
#                  Slurm's own binding, to see which checks Slurm alone satisfies (a check of
#                  the checks; numabind-specific ones fail by design)
#
# Needs on the host (as root): qemu-system-x86_64, gcc with static libc, cc with
# slurm/spank.h, python3, apt-get (image), slurmd/slurmctld/munged/srun, hwloc-calc,
# lstopo-no-graphics, setpriv, ip. Exit 0 all checks passed; 77 skipped; 1 otherwise.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${NBVM_WORK:-${TMPDIR:-/tmp}/numabind-vm-slurm}
IMG=
KEEP=0
TIMEOUT=330
ONLY=
CONTROL=0
CGROUP_V2=0
while [ $# -gt 0 ]; do
    case "$1" in
        --work) WORK=$2; shift 2 ;;
        --image) IMG=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --only) ONLY=$2; shift 2 ;;
        --control) CONTROL=1; shift ;;
        --cgroup-v2) CGROUP_V2=1; shift ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "slurm_vm_test: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || { echo "usage: $0 [options] PATH/spank_numabind.so (see --help)" >&2; exit 2; }
SO=$(realpath "$1")
ENGINE=$(dirname "$SO")/numabind_stepd.so
[ -f "$SO" ] || { echo "FAIL plugin $SO not found"; exit 1; }
[ -f "$ENGINE" ] || { echo "FAIL step engine $ENGINE not found beside the plugin"; exit 1; }

# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"
[ "$(id -u)" = 0 ] || skip "needs root (the guest runs the host's Slurm as root)"
need qemu-system-x86_64 gcc cc python3 apt-get dpkg-deb xz slurmd slurmctld munged srun \
     hwloc-calc lstopo-no-graphics setpriv ip
[ -f /usr/include/slurm/spank.h ] || skip "slurm/spank.h missing (libslurm-dev)"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
T_START=$(now)
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
IMG=${IMG:-$WORK/image}

t0=$(now)
if ! out=$("$HERE/build-image.sh" "$IMG" 2>&1); then
    echo "$out" >&2; echo "FAIL build-image.sh $IMG"; exit 1
fi
echo "TIME image ($( [ "$out" = cached ] && echo cached || echo built)): $(elapsed "$t0" "$(now)") s"

# The job user must exist in the host's root: the guest sees it read-only (same command as
# tests/slurm/cluster.sh's, which cannot create it there).
if ! getent passwd nbtest > /dev/null; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /bin/sh nbtest ||
        { echo "FAIL cannot create user nbtest"; exit 1; }
fi

# The payload reaches the guest over its own 9p share (mounted at /tmp/payload there).
PD=$WORK/payload
rm -rf "$PD"; mkdir -p "$PD"; chmod 0755 "$PD"
gcc -static -O2 -Wall -o "$PD/probe" "$HERE/probe.c" || { echo "FAIL gcc -static probe.c"; exit 1; }
# the OpenMP program (libgomp from the host's root, which the guest runs in) of the omp cases
gcc -fopenmp -O1 -Wall -o "$PD/omp_probe" "$ROOT/tests/cli/omp_probe.c" || { echo "FAIL gcc -fopenmp omp_probe.c"; exit 1; }
cc -shared -fPIC -O1 -DHELPER_SLOW -o "$PD/helper_SLOW.so" "$ROOT/tests/slurm/helper_plugin.c" ||
    { echo "FAIL cannot build the nbslow helper plugin"; exit 1; }
cp "$SO" "$PD/spank_numabind.so"; cp "$ENGINE" "$PD/numabind_stepd.so"
strip --strip-debug "$PD/spank_numabind.so" "$PD/numabind_stepd.so" 2> /dev/null || true
cp "$ROOT/tests/slurm/cluster.sh" "$HERE/payload/slurm-guest.sh" "$PD/"
if [ -n "$ONLY" ]; then
    awk -F'|' -v only=",$ONLY," '/^@cluster / || /^#/ || index(only, "," $1 ",")' \
        "$HERE/payload/slurm.cases" > "$PD/slurm.cases"
else
    cp "$HERE/payload/slurm.cases" "$PD/slurm.cases"
fi
printf '#!/bin/sh\nexec /bin/bash "$PAYLOAD/slurm-guest.sh"\n' > "$PD/run.sh"
[ "$CONTROL" = 1 ] && : > "$PD/control"
APPEND=nbvm.timeout=100000
if [ "$CGROUP_V2" = 1 ]; then : > "$PD/cgroup_v2"; APPEND+=" cgroup_no_v1=all"; fi
chmod 0755 "$PD"/*

t0=$(now)
# The guest's own payload timeout counts guest seconds, which ran 3.5x faster than the host's
# once under TCG on a loaded host: only QEMU's wall-clock --timeout applies (the output written so
# far stays in PD/output.txt).
"$HERE/boot.sh" --shape smt --hostroot --timeout "$TIMEOUT" --append "$APPEND" \
    "$IMG" "$PD" > "$PD/boot.log" 2>&1
rc=$?
echo "TIME boot+payload: $(elapsed "$t0" "$(now)") s (exit $rc)"
# wall-clock milestones: the guest creates PD/stamps/N-NAME (mtime from the host's clock)
prev=$t0
for f in "$PD"/stamps/*; do
    [ -e "$f" ] || continue
    t=$(stat -c %.3Y "$f")
    echo "TIME wall ${f##*/[0-9][0-9]-}: +$(elapsed "$prev" "$t") s (at $(elapsed "$t0" "$t") s)"
    prev=$t
done
sed 's/^/  boot.sh: /' "$PD/boot.log"
FAILED=0
if [ "$rc" != 0 ]; then
    echo "FAIL boot.sh exit $rc (log: $PD/console.log)"
    tail -n 20 "$PD/console.log" 2> /dev/null | sed 's/^/  console: /'
    FAILED=1
fi
if [ -f "$PD/output.txt" ]; then
    python3 "$HERE/check_slurm.py" "$PD/slurm.cases" "$PD/output.txt" || FAILED=1
else
    echo "FAIL no output.txt"; FAILED=1
fi
echo "TIME total: $(elapsed "$T_START" "$(now)") s"
if [ "$FAILED" = 0 ]; then
    [ "$KEEP" = 1 ] || rm -rf "$PD"
    echo "slurm_vm_test: all checks passed"
    exit 0
fi
echo "INFO payload kept in $PD (guest output: $PD/output.txt, console: $PD/console.log)"
echo "slurm_vm_test: FAILED"
exit 1
