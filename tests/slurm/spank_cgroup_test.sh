#!/usr/bin/env bash
# tests/slurm/spank_cgroup_test.sh — spank_numabind.so under task/cgroup (the step's cpuset):
# one node with 2 fake GPUs; the binding stays inside the cpuset, a GPU without an allowed CPU
# on its node gets the nearest allowed ones.
#
#   spank_cgroup_test.sh [PATH/spank_numabind.so]   (as root; default: build/spank/spank_numabind.so)
#
# The fixtures and expectations (hwloc-calc on the generated XML): tests/slurm/spank_lib.sh.
# Exit 0: all passed; 1: a check failed; 77: skipped (not root / no Slurm).
# NBSPANK_KEEP=1 keeps the cluster directory.
set -uo pipefail
# shellcheck source=tests/slurm/spank_lib.sh
. "$(dirname "$0")/spank_lib.sh" "${1:-}"

cluster_start "$D/cluster-start.log" "$D" --nodes 1 --cgroup --gpus 2 || exit 1
cd "$D" || exit 1
plugin_args "topology=$SWAP verbose"
# one core allocated; GPU 0 lives on the other NUMA node (swap.xml) unless Slurm gave core 1
probe_step "$D" -n1 -c1 --gpus=1 --numa-binding=node,mem=none
cg=$(report_by_rank "$D/out" cgcpus | cut -d: -f2)
home=$(node_cpus "$SWAP" 0)
check_eq "task/cgroup: the binding stays inside the step's cpuset ($cg), never Slurm's affinity" \
  "0:node:$cg" "$(mc "$D/out")"
if [ "$cg" != "$home" ]; then
  check_grep "task/cgroup: GPU home without an allowed CPU -> nearest allowed CPUs, with a warning" \
    "no allowed CPU on NUMA node\(s\) $(numa_os "$SWAP" 0) of device\(s\) 0" "$D/err"
fi
probe_step "$D" -n2 --gpus-per-task=1 --numa-binding=node,mem=none
check_eq "task/cgroup, 2 tasks with a GPU each: each on its GPU's node" \
  "$(per_rank "0:node:$(node_cpus "$SWAP" 0)" "1:node:$(node_cpus "$SWAP" 1)")" "$(mc "$D/out")"

finish
