#!/bin/sh
# Print the topology facts of the machine it runs on (the test guest), one
# key=value per line, in a fixed order, so the output can be diffed against
# tests/vm/expect/SHAPE.facts. Runs under busybox sh; reads sysfs whole (awk),
# never with the shell's byte-wise `read` (sysfs cpulist files return nothing to
# 1-byte reads).
#
#   guest-facts.sh [HWLOC_CALC [TOPOLOGY_XML]]
#
# With HWLOC_CALC (path of a runnable hwloc-calc), adds what hwloc reports for each
# display device: hwloc.pci.ADDR.numa= (`hwloc-calc -p -I numa pci=ADDR`: OS indexes,
# in hwloc's logical order, of the NUMA nodes whose cpuset intersects the device's
# locality). With TOPOLOGY_XML (an `lstopo --of xml` export
# made in the same guest) hwloc-calc reads that instead of rediscovering the machine
# each time (~0.3 s per call under TCG).
HWLOC_CALC=${1:-}
HWLOC_INPUT=
[ -n "${2:-}" ] && HWLOC_INPUT="-i $2"
S=/sys/devices/system

# One awk process reads all sysfs files (a fork+exec costs ~30 ms under TCG).
NODES=$(ls -d $S/node/node[0-9]* | sed 's/.*node//' | sort -n)
CPUS=$(ls -d $S/cpu/cpu[0-9]* | sed 's/.*cpu//' | sort -n)
PCIS=$(ls /sys/bus/pci/devices)
awk -v S=$S -v nodes="$NODES" -v cpus="$CPUS" -v pcis="$PCIS" '
function rd(f,    v) { v = ""; if ((getline v < f) <= 0) v = ""; close(f); return v }
BEGIN {
    print "node.online=" rd(S "/node/online")
    print "node.has_cpu=" rd(S "/node/has_cpu")
    print "node.has_memory=" rd(S "/node/has_memory")
    n = split(nodes, N, /[ \n]+/)
    for (i = 1; i <= n; i++) {
        if (N[i] == "") continue
        d = S "/node/node" N[i]
        print "node" N[i] ".cpus=" rd(d "/cpulist")
        print "node" N[i] ".distance=" rd(d "/distance")
    }
    print "cpu.online=" rd(S "/cpu/online")
    n = split(cpus, C, /[ \n]+/)
    for (i = 1; i <= n; i++) {
        c = C[i]; if (c == "") continue
        t = S "/cpu/cpu" c "/topology"
        l3 = ""
        for (k = 0; k < 8; k++) {
            ix = S "/cpu/cpu" c "/cache/index" k
            if (rd(ix "/level") == "3") l3 = rd(ix "/shared_cpu_list")
        }
        print "cpu" c ".package=" rd(t "/physical_package_id")
        print "cpu" c ".die=" rd(t "/die_id")
        print "cpu" c ".core=" rd(t "/core_id")
        print "cpu" c ".l3=" l3
    }
    n = split(pcis, P, /[ \n]+/)
    for (i = 1; i <= n; i++) {
        a = P[i]; if (a == "") continue
        p = "/sys/bus/pci/devices/" a
        class = rd(p "/class")
        if (class !~ /^0x03/) continue   # display class only
        v = rd(p "/vendor"); dv = rd(p "/device"); sub(/^0x/, "", v); sub(/^0x/, "", dv)
        print "pci." a ".id=" v ":" dv
        print "pci." a ".class=" class
        print "pci." a ".numa_node=" rd(p "/numa_node")
        print "pci." a ".local_cpulist=" rd(p "/local_cpulist")
    }
}' > /tmp/guest-facts.$$

if [ -z "$HWLOC_CALC" ]; then
    cat /tmp/guest-facts.$$
else
    # append hwloc's view after each device's kernel facts
    while IFS= read -r line; do
        echo "$line"
        case "$line" in
            pci.*.local_cpulist=*)
                a=${line#pci.}; a=${a%.local_cpulist=*}
                echo "hwloc.pci.$a.numa=$($HWLOC_CALC $HWLOC_INPUT -p -I numa pci=$a 2>&1)"
                ;;
        esac
    done < /tmp/guest-facts.$$
fi
rm -f /tmp/guest-facts.$$
