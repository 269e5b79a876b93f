#!/bin/bash
# Guest side of tests/vm/slurm_vm_test.sh (ctest vm_slurm): runs in the smt guest chrooted
# into the host's root (boot.sh --hostroot, see tests/vm/README.md), as root. Starts munged,
# slurmctld and slurmd (tests/slurm/cluster.sh, copied into the payload) with the real plugin
# and live discovery, runs every case of $PAYLOAD/slurm.cases as the unprivileged user nbtest
# and prints tagged output for tests/vm/check_slurm.py:
#
#   @@FACT key=value          kernel facts (sysfs) and hwloc's (hwloc-calc), see facts()
#   @@LSTOPO ... @@END        lstopo-no-graphics --of xml (cores, PUs, NUMA nodes, PCI)
#   @@CLUSTER OPTIONS / @@CLUSTER_RC N
#   @@CASE ID|CHECKS          one srun: @@PLUGSTACK line, @@OUT task lines (srun -l),
#   ... @@END                 @@ERR stderr lines, @@RC exit status, @@TIME seconds
#   @@TIME NAME SECONDS
#
# $PAYLOAD holds: slurm.cases, cluster.sh, probe (static), spank_numabind.so,
# numabind_stepd.so, helper_SLOW.so.
set -u
P=$PAYLOAD
up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN { printf "%.1f", b - a }'; }
T0=$(up)
echo "@@GUEST_UPTIME $T0"
# The guest's clock is not the host's under TCG (it once ran 3.5x fast on a loaded host): each
# milestone also creates $PAYLOAD/stamps/N-NAME, whose mtime the host's 9p server sets from
# the host clock; the host driver prints those wall-clock times.
mkdir -p "$P/stamps"
NSTAMP=0
stamp() { NSTAMP=$((NSTAMP + 1)); : > "$P/stamps/$(printf %02d $NSTAMP)-$1"; }
stamp start

# ---- what Slurm needs from the guest -------------------------------------------------
# the host name must resolve, and getaddrinfo(AI_ADDRCONFIG) needs one non-loopback address
ip link set lo up
ip addr add 10.254.0.1/32 dev lo 2>/dev/null
hostname nbvm
printf '127.0.0.1 localhost\n10.254.0.1 nbvm\n' > /tmp/hosts
mount --bind /tmp/hosts /etc/hosts || echo "@@WARN cannot bind-mount /etc/hosts"
G=/sys/fs/cgroup
CLUSTER_CGROUP=
if [ -f "$P/cgroup_v2" ]; then
    # the unified hierarchy only (the kernel booted with cgroup_no_v1=all); Slurm 22.05's
    # cgroup/v2 without systemd needs system.slice to exist (it makes its scope there)
    mount -t cgroup2 none $G || echo "@@WARN cannot mount cgroup2 on $G"
    mkdir -p "$G/system.slice"
    echo "@@FACT cgroup=v2 controllers=$(cat $G/cgroup.controllers 2>/dev/null)"
    CLUSTER_CGROUP=--cgroup-v2
else
    # cgroup v1 controllers for task/cgroup + proctrack/cgroup (ConstrainCores, ConstrainDevices)
    mount -t tmpfs -o mode=0755 cgroup_root $G || echo "@@WARN cannot mount tmpfs on $G"
    for c in cpuset memory devices freezer cpu,cpuacct; do
        mkdir -p "$G/$c"
        mount -t cgroup -o "$c" "$c" "$G/$c" || echo "@@WARN cannot mount cgroup v1 $c"
    done
    # Slurm's cgroup/v1 autodetection looks for the systemd named hierarchy
    mkdir -p "$G/systemd"
    mount -t cgroup -o none,name=systemd systemd "$G/systemd" || echo "@@WARN cannot mount cgroup v1 name=systemd"
    echo "@@FACT cgroup=v1"
fi
echo "@@TIME setup $(since "$T0")"
stamp setup

# ---- programs and plugins in RAM (exec from the 9p share is slow) ------------------------
B=/tmp/nbvm-slurm
mkdir -p "$B"; chmod 0755 "$B"
cp "$P/probe" "$P/spank_numabind.so" "$P/numabind_stepd.so" "$P/helper_SLOW.so" "$P/cluster.sh" "$B/"
[ -f "$P/omp_probe" ] && cp "$P/omp_probe" "$B/"  # tests/cli/omp_probe.c, for NBPROBE_THEN
chmod 0755 "$B"/*
cp "$P/slurm.cases" /tmp/slurm.cases

# ---- facts -------------------------------------------------------------------------------
t=$(up)
facts() {  # one process per kind of file: forks are slow in the 16-vCPU TCG guest
    local d
    grep -H . /sys/devices/system/node/node[0-9]*/cpulist /sys/devices/system/node/node[0-9]*/distance |
        sed -E 's|^/sys/devices/system/node/node([0-9]+)/([a-z]+):|@@FACT node.\1.\2=|'
    grep -H . /sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list \
              /sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id |
        sed -E 's|^/sys/devices/system/cpu/cpu([0-9]+)/topology/thread_siblings_list:|@@FACT cpu.\1.siblings=|;
                s|^/sys/devices/system/cpu/cpu([0-9]+)/topology/physical_package_id:|@@FACT cpu.\1.package=|'
    for d in $(grep -l '^0x03' /sys/bus/pci/devices/*/class); do
        d=${d%/class}
        grep -H . "$d/numa_node" "$d/local_cpulist" | sed -E 's|^/sys/bus/pci/devices/([^/]+)/([a-z_]+):|@@FACT pci.\1.\2=|'
        # hwloc's view of the same device: the PUs and NUMA nodes local to it (OS indexes)
        echo "@@FACT pci.${d##*/}.hwloc_pus=$(hwloc-calc --input /tmp/topo.xml --po -I pu "pci=${d##*/}")"
        echo "@@FACT pci.${d##*/}.hwloc_numa=$(hwloc-calc --input /tmp/topo.xml --po -I numa "pci=${d##*/}")"
    done
    [ -e /proc/driver/nvidia ] && echo "@@FACT proc_driver_nvidia=yes" || echo "@@FACT proc_driver_nvidia=no"
}
# hwloc discovers the guest once; hwloc-calc then reads that XML (fast)
lstopo-no-graphics --of xml /tmp/topo.xml 2> /tmp/lstopo.err || echo "@@WARN lstopo failed: $(cat /tmp/lstopo.err)"
facts
echo "@@LSTOPO"
cat /tmp/topo.xml
echo "@@END"
echo "@@TIME facts $(since "$t")"
stamp facts

# ---- the cluster -----------------------------------------------------------------------------
C=/tmp/nbslurm
mkdir -p "$C"; chmod 0755 "$C"
start_cluster() {
    local t; t=$(up)
    "$B/cluster.sh" stop "$C" > /dev/null 2>&1
    echo "@@CLUSTER $*"
    NUMABIND_CLUSTER_TIMEOUT=300 "$B/cluster.sh" start "$C" "$@" $CLUSTER_CGROUP > /tmp/cluster.log 2>&1
    local rc=$?
    echo "@@CLUSTER_RC $rc"
    [ "$rc" = 0 ] || sed 's/^/@@CLUSTER_LOG /' /tmp/cluster.log
    echo "@@TIME cluster $(since "$t")"
    stamp cluster
    return $rc
}
FILES=
plugstack() {  # PLUGSTACK spec of the case table -> $C/plugstack.conf
    local spec=$1 slow=
    if [ "${spec#@SLOW }" != "$spec" ]; then
        set -- $spec
        slow="required $B/helper_SLOW.so rank=$2 ms=$3"
        shift 3
        spec=$*
    fi
    spec=${spec//@FILES/device_files=$FILES}
    if [ -f "$P/control" ]; then  # --control: Slurm's own binding, no numabind
        { [ -n "$slow" ] && echo "$slow"; } > "$C/plugstack.conf"
    else
        { [ -n "$slow" ] && echo "$slow"; echo "required $B/spank_numabind.so $spec"; } > "$C/plugstack.conf"
    fi
    chmod 0644 "$C/plugstack.conf"
    sed 's/^/@@PLUGSTACK /' "$C/plugstack.conf"
}

cluster_ok=0
while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    if [ "${line#@cluster }" != "$line" ]; then
        # shellcheck disable=SC2086 # options split on purpose
        if start_cluster ${line#@cluster }; then cluster_ok=1; else cluster_ok=0; fi
        FILES=$(ls -1 "$C"/dev/n1/nvidia* 2>/dev/null | sort -V | paste -sd,)
        echo "@@FACT gpu_files=$FILES"
        continue
    fi
    IFS='|' read -r id checks spec mib args <<< "$line"
    echo "@@CASE $id|$checks"
    if [ "$cluster_ok" != 1 ]; then echo "@@RC 254"; echo "@@ERR no cluster"; echo "@@END"; continue; fi
    plugstack "$spec"
    # "SALLOC ARGS :: SRUN ARGS": the step runs inside an allocation of its own shape
    alloc=
    if [ "${args#* :: }" != "$args" ]; then alloc="salloc ${args%% :: *}"; args=${args#* :: }; fi
    [ -f "$P/control" ] && args=$(sed -E 's/--numa-binding=[^ ]+//' <<< "$args")
    echo "@@SRUN ${alloc:+$alloc }srun -l $args $B/probe $mib"
    t=$(up)
    # shellcheck disable=SC2086 # ARGS split on purpose
    (cd /tmp && exec setpriv --reuid=nbtest --regid=nbtest --init-groups \
        env SLURM_CONF="$C/slurm.conf" NBPROBE_OPEN="$FILES" NBPROBE_CGROUP=1 \
        timeout 300 $alloc srun -l $args "$B/probe" "$mib") > /tmp/out 2> /tmp/err < /dev/null
    rc=$?
    stamp "$id"
    sed 's/^/@@OUT /' /tmp/out
    sed 's/^/@@ERR /' /tmp/err
    echo "@@RC $rc"
    echo "@@TIME $id $(since "$t")"
    echo "@@END"
done < /tmp/slurm.cases

t=$(up)
"$B/cluster.sh" stop "$C" > /dev/null 2>&1
echo "@@TIME stop $(since "$t")"
stamp stop
for f in "$C"/log/slurmd.n1.log "$C"/log/slurmctld.log; do
    [ -f "$f" ] && tail -n 30 "$f" | sed "s|^|@@LOG ${f##*/}: |"
done
echo "@@TIME guest_total $(since "$T0")"
exit 0
