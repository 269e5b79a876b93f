#!/bin/sh
# Print the topology facts of the machine it runs on (the test guest), one
# key=value per line, in a fixed order, so the output can be diffed against
# tests/vm/expect/SHAPE.facts. Runs under busybox sh; reads sysfs whole (cat),
# never with the shell's byte-wise `read` (sysfs cpulist files return nothing to
# 1-byte reads).
#
#   guest-facts.sh [HWLOC_CALC [TOPOLOGY_XML]]
#
# With HWLOC_CALC (path of a runnable hwloc-calc), adds what hwloc reports for each
# display device: hwloc.pci.ADDR.numa= (`hwloc-calc -p -I numa pci=ADDR`: OS indexes,
# in hwloc's logical order, of the NUMA nodes whose cpuset intersects the device's
# locality) and hwloc.pci.ADDR.pus=. With TOPOLOGY_XML (an `lstopo --of xml` export
# made in the same guest) hwloc-calc reads that instead of rediscovering the machine
# each time (~0.3 s per call under TCG).
HWLOC_CALC=${1:-}
HWLOC_INPUT=
[ -n "${2:-}" ] && HWLOC_INPUT="-i $2"
S=/sys/devices/system

echo "node.online=$(cat $S/node/online)"
echo "node.has_cpu=$(cat $S/node/has_cpu)"
echo "node.has_memory=$(cat $S/node/has_memory)"
for d in $(ls -d $S/node/node[0-9]* | sed 's/.*node//' | sort -n); do
    n=$S/node/node$d
    echo "node$d.cpus=$(cat $n/cpulist)"
    echo "node$d.distance=$(cat $n/distance)"
done

echo "cpu.online=$(cat $S/cpu/online)"
for c in $(ls -d $S/cpu/cpu[0-9]* | sed 's/.*cpu//' | sort -n); do
    t=$S/cpu/cpu$c/topology
    l3=
    for i in $S/cpu/cpu$c/cache/index*; do
        [ "$(cat $i/level 2>/dev/null)" = 3 ] && l3=$(cat $i/shared_cpu_list)
    done
    echo "cpu$c.package=$(cat $t/physical_package_id) cpu$c.die=$(cat $t/die_id 2>/dev/null) cpu$c.core=$(cat $t/core_id) cpu$c.l3=$l3" | tr ' ' '\n'
done

# display-class (0x03xxxx) PCI functions
for p in /sys/bus/pci/devices/*; do
    class=$(cat $p/class)
    case "$class" in 0x03*) ;; *) continue ;; esac
    a=${p##*/}
    echo "pci.$a.id=$(cat $p/vendor | sed 's/^0x//'):$(cat $p/device | sed 's/^0x//')"
    echo "pci.$a.class=$class"
    echo "pci.$a.numa_node=$(cat $p/numa_node)"
    echo "pci.$a.local_cpulist=$(cat $p/local_cpulist)"
    if [ -n "$HWLOC_CALC" ]; then
        echo "hwloc.pci.$a.numa=$($HWLOC_CALC $HWLOC_INPUT -p -I numa pci=$a 2>&1)"
        echo "hwloc.pci.$a.pus=$($HWLOC_CALC $HWLOC_INPUT -p -I pu pci=$a 2>&1)"
    fi
done
