#!/usr/bin/env bash
# tests/slurm/gpu_truth_unconstrained_test.sh — every Slurm task binds to the GPUs it really holds,
# under task/cgroup ConstrainDevices=no (every task can open every GPU), gres.conf in PCI order.
#
#   gpu_truth_unconstrained_test.sh [PATH/spank_numabind.so]   (as root; default: build/spank/spank_numabind.so)
#
# The fixtures (4 fake GPUs on 2 fake NUMA nodes) and the assertions: tests/slurm/gpu_truth_lib.sh.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
# shellcheck source=tests/slurm/gpu_truth_lib.sh
. "$(dirname "$0")/gpu_truth_lib.sh" "${1:-}"

cluster_start "$D/start.log" "$CD" --nodes 1 --gpus 4 --cgroup --oversubscribe || exit 1
cd "$D" || exit 1
BASEPLUG="required $D/spank_numabind.so topology=$D/topo/%n.xml $(FILES) mem=none"
plugstack "$BASEPLUG"
sbatch -s -n1 --gpus=1 -o /dev/null --wrap "sleep 600" >/dev/null
for i in $(seq 50); do [ "$(squeue -h -t R | wc -l)" -ge 1 ] && break; sleep 0.1; done
gpu_step -n2 --gpus-per-task=1 --numa-binding=node
truth "not constrained, --gpus-per-task=1 (global CUDA_VISIBLE_DEVICES): each task on its GPU's node"
exact_single "not constrained, --gpus-per-task=1: CPUs = its GPU's node, NUMABIND_DEVICES = it"
check_eq "not constrained: tasks can open every GPU" "0,1,2,3 0,1,2,3" "$(report_values "$D/out" opens | xargs)"
for b in closest map_gpu:1,2; do
  gpu_step -n2 --gpus=2 --gpu-bind=$b --numa-binding=exclusive
  truth "not constrained, --gpu-bind=$b: disjoint, on the used GPUs' nodes" exclusive
done
gpu_step -n2 --gpus-per-node=2 --numa-binding=exclusive
truth "not constrained, --gpus-per-node=2: one each, disjoint" exclusive
plugstack "$BASEPLUG default=node verbose"
gpu_step -n2
check_eq "not constrained, CPU-only step under default=node: not bound although every GPU opens" "unset unset|1" \
  "$(report_values "$D/out" mode | xargs)|$(lines 'no GPU in this step')"
scancel --full -u root >/dev/null 2>&1

finish
