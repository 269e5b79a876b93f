#!/usr/bin/env bash
# tests/slurm/gpu_truth_pci_order_test.sh — every Slurm task binds to the GPUs it really holds,
# under task/cgroup ConstrainDevices=yes with gres.conf in PCI order: the paths a site takes
# without device_files=, a missing device_files= entry, a late task holding its own GPUs, -c
# never cut, --hint, a nested srun, srun --pty, and the step rules decided in the front (a
# broken install).
#
#   gpu_truth_pci_order_test.sh [PATH/spank_numabind.so]   (as root; default: build/spank/spank_numabind.so)
#
# The fixtures (4 fake GPUs on 2 fake NUMA nodes) and the assertions: tests/slurm/gpu_truth_lib.sh.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
# shellcheck source=tests/slurm/gpu_truth_lib.sh
. "$(dirname "$0")/gpu_truth_lib.sh" "${1:-}"

cluster_start "$D/start.log" "$CD" --nodes 1 --gpus 4 --constrain-devices --oversubscribe || exit 1
cd "$D" || exit 1
NOFILES="required $D/spank_numabind.so topology=$D/topo/%n.xml mem=none"
plugstack "$NOFILES"
# no device files (no /proc/driver/nvidia for these GPUs, no device_files=) under
# ConstrainDevices=yes: every task has CUDA_VISIBLE_DEVICES=0; the step's list is shared.
# (-n2 --gpus-per-task=2: Slurm 24.11 refuses -n4 -O --gpus-per-task=1 on a 2-CPU node; task 1's
# GPUs 2,3 are on node 1 while its CUDA_VISIBLE_DEVICES=0,1 would name node 0's)
gpu_step -n2 --gpus-per-task=2 --numa-binding=node
truth "no device files, constrained, -n2 --gpus-per-task=2: each task on the node of the GPUs it can open"
check_eq "no device files, constrained: NUMABIND_DEVICES = the GPUs each task uses" "$(report_values "$D/out" uses | xargs)" "$(report_values "$D/out" devs | xargs)"
check_eq "no device files: the two tasks use different GPUs" 2 "$(report_values "$D/out" uses | sort -u | wc -l)"
# a device_files= entry naming a missing file: one line per step naming it; the
# others still count (per device)
FILES_MISSING="device_files=$CD/dev/%n/nvidia0,$CD/dev/%n/nvidia1,$CD/dev/%n/nvidia2,$CD/dev/%n/gone3"
plugstack "$NOFILES $FILES_MISSING"
gpu_step -n2 --gpus-per-task=2 --numa-binding=node
check_eq "device_files= with a missing file: one line per step naming it" 1 "$(lines "gone3.* does not exist")"
check_eq "device_files= with a missing file: no line repeated per task" "" "$(grep '^numabind' "$D/err" | sort | uniq -d)"
truth "device_files= with a missing file: every task on its GPU's node"
# a late task again, with two GPUs per task on different nodes: task 1 late holds GPUs 2,3 (node 1)
plugstack "required $D/helper_SLOW.so rank=1 ms=2500" "$NOFILES $(FILES)"
gpu_step -n2 --gpus-per-task=2 --numa-binding=node
truth "a task 2.5 s late holding its own GPUs (node 1): bound there, not on the on-time task's"
gpu_step -n2 --gpus-per-task=2 --numa-binding=exclusive
check_eq "a late task under exclusive: the step binds (no 'running unbound')" "0 0 exclusive exclusive" \
  "$RC $(lines 'running unbound') $(report_values "$D/out" mode | xargs)"
truth "a late task under exclusive: each on its own GPUs' node, disjoint" exclusive
# --cpus-per-task is never cut: 1 PU per fake NUMA node here, -c2 needs both
plugstack "$NOFILES $(FILES)"
gpu_step -n1 --gpus=1 -c2 --numa-binding=node
check_eq "-c2 on 1-PU NUMA nodes: the task keeps Slurm's 2 CPUs (its GPU's node first, then the nearest)" \
  "$(cpu_ranges "$(hwloc-calc --input "$XML" --po -I pu all)" "$(report_values "$D/out" cgcpus)")" "$(report_values "$D/out" cpus)"
check_eq "-c2 extended: said once per step without verbose" 1 "$(lines 'extended to the nearest node')"
plugstack "$NOFILES $(FILES) default=exclusive"
gpu_step -n1 --gpus=1 -c2
check_eq "-c2 under a site default=exclusive: not narrowed" \
  "$(cpu_ranges "$(hwloc-calc --input "$XML" --po -I pu all)" "$(report_values "$D/out" cgcpus)")" "$(report_values "$D/out" cpus)"
# --hint=nomultithread is no --cpu-bind: the site default applies
plugstack "$NOFILES $(FILES) default=node"
gpu_step -n1 --gpus=1 --hint=nomultithread
check_eq "--hint=nomultithread under default=node: bound (the hint is no --cpu-bind)" "node" "$(report_values "$D/out" mode)"
# a nested srun inherits Slurm's SLURM_CPU_BIND from its task: no --cpu-bind of the user's
NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES timeout 60 srun -s -n1 --gpus=1 --numa-binding=none \
  sh -c "srun -s -n1 --overlap --gpus=1 $D/report.sh nested" >"$D/out.raw" 2>"$D/err"; RC=$?
grep '^R nested' "$D/out.raw" >"$D/out"
check_eq "nested srun under default=node: the default applies (inherited SLURM_CPU_BIND is no --cpu-bind)" "node" \
  "$(report_values "$D/out" mode)"
NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES timeout 60 srun -s -n1 --gpus=1 --numa-binding=none \
  sh -c "srun -s -n1 --overlap --gpus=1 --cpu-bind=none $D/report.sh nested" >"$D/out.raw" 2>"$D/err"
grep '^R nested' "$D/out.raw" >"$D/out"
check_eq "nested srun with a typed --cpu-bind=none: respected" "unset" "$(report_values "$D/out" mode)"
# the srun --pty shell is a shell like salloc's interactive step (batch_step= rule)
if command -v script >/dev/null; then
  # The probe writes to a file: what a pty relays after its shell exits is not reliable
  # (Slurm 24.11 lost it), and the pty may start with a NUL byte.
  pty() {  # srun --pty ARGS...: R lines of tag pty in $D/out
    rm -f "$D/pty.out"
    NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES timeout 60 script -qec "srun -s -n1 --gpus=1 --pty $*" /dev/null \
      >"$D/out.raw" 2>"$D/err"
    grep '^R pty' "$D/pty.out" >"$D/out" 2>/dev/null
  }
  pty /bin/sh -c "'$D/report.sh pty >$D/pty.out'"
  check_eq "srun --pty shell under default=node: not bound, like the interactive step" "unset" "$(report_values "$D/out" mode)"
  printf '#!/bin/sh\nexec %s/report.sh pty >%s/pty.out\n' "$D" "$D" >"$D/pty-prog" && chmod 0755 "$D/pty-prog"
  pty "$D/pty-prog"
  check_eq "srun --pty with a program (not a shell) under default=node: bound like any step" "node" "$(report_values "$D/out" mode)"
fi
# a broken install (engine missing) never touches a CPU-only step, and a GPU
# step fails once, cause first
mkdir -p "$D/broken" && cp "$D/spank_numabind.so" "$D/broken/" && chmod 0755 "$D/broken" "$D/broken/spank_numabind.so"
plugstack "required $D/broken/spank_numabind.so topology=$D/topo/%n.xml default=node fallback=fail"
gpu_step -n2
check_eq "engine missing, default=node fallback=fail: a CPU-only step runs untouched, nothing said" "0|unset unset|" \
  "$RC|$(report_values "$D/out" mode | xargs)|$(grep numabind "$D/err")"
gpu_step -n4 -O --gpus=1
check_eq "engine missing, fallback=fail: a GPU step fails; numabind says it once, naming the engine" "fail 1 0" \
  "$([ "$RC" -ne 0 ] && echo fail || echo pass) $(grep -c 'numabind: .*numabind_stepd.so' "$D/err") $(grep -c 'numabind: error:' "$D/err")"
scancel --full -u root >/dev/null 2>&1

finish
