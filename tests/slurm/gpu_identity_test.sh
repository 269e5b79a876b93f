#!/usr/bin/env bash
# tests/slurm/gpu_identity_test.sh — the GPU a task is bound for is the one Slurm gave it,
# also where numabind knows no device file of its own (no driver information, no
# device_files=): --gpu-bind=map_gpu/mask_gpu with ConstrainDevices=no and =yes, a task late
# under map_gpu, and the step messages (an unverifiable or partly missing device_files=, the
# guess said once, --cpu-bind=verbose leaving a site default on, numabind's own
# UCX_NET_DEVICES removed from unbound steps).
#
#   gpu_identity_test.sh [PATH/spank_numabind.so [PATH/numabind]]   (as root; default: the build's)
#
# `numabind check`'s GPU-rule row, run in a task on the same node with the same plugstack.conf,
# must describe what the plugin did there (a guess exactly where the plugin says one).
#
# 4 fake GPUs (mknod'ed, gres.conf in PCI order) on 2 fake NUMA nodes (GPUs 0,1 on node 0,
# GPUs 2,3 on node 1). Each task's truth is what it can open and its CUDA_VISIBLE_DEVICES
# (tests/slurm/report.sh); the CPUs local to each GPU come from hwloc-calc on the XML.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/../slurm/plugin_test_env.sh" "${1:-}" srun hwloc-calc cc

test_workdir nbident

NB=${2:-$ROOT/build/numabind}
[ -x "$NB" ] || { echo "numabind CLI $NB not found"; exit 1; }
install_plugin "$D"
cc -shared -fPIC -O1 -DHELPER_SLOW -o "$D/helper_SLOW.so" "$HERE/helper_plugin.c" || { echo "cannot build helper plugin"; exit 1; }
chmod 0755 "$D"/*.so "$D/report.sh"
BUSES=0000:17:00.0,0000:27:00.0,0000:37:00.0,0000:47:00.0
GPUS=(--gpu numa:0=0000:17:00.0 --gpu numa:0=0000:27:00.0 --gpu numa:1=0000:37:00.0 --gpu numa:1=0000:47:00.0)
python3 "$GEN" -o "$D/four.xml" --split-numa 2 "${GPUS[@]}" >/dev/null || exit 1
# a fifth accelerator Slurm does not list: gres.conf's files no longer name the node's GPUs one by one
python3 "$GEN" -o "$D/five.xml" --split-numa 2 "${GPUS[@]}" --gpu numa:1=0000:57:00.0 >/dev/null || exit 1
chmod 0644 "$D"/*.xml
HOMES=$(for b in ${BUSES//,/ }; do hwloc-calc --input "$D/four.xml" --po -I pu pci=$b; done | paste -sd'|')

# a step of the task probe (probe_step) that also reports the fake GPUs each task can open and uses
gpu_step() { NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES probe_step "$D" -s "$@"; }
lines() { grep -c "$1" "$D/err"; }
# numabind check's GPU-rule row on the node (in a task, as the plugin sees it): "STATUS|DETAIL"
rule_row() {
  timeout 120 srun -s -n1 "$NB" check --plugstack-file "$CD/plugstack.conf" --json 2>/dev/null | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin)["rows"] if r["item"] == "GPU rule the plugin uses"]
print("%s|%s" % (rows[0]["status"], rows[0]["detail"]) if rows else "none|")'
}
# the cluster's plugstack.conf holds exactly these lines
plugstack() { plugstack_lines "$CD/plugstack.conf" "$@"; }
# "rank:GPU used:NUMABIND_DEVICES:CPUs" per task, and what it must be: the used GPU's CPUs.
bound() { paste -d: <(report_values "$D/out" uses) <(report_values "$D/out" devs) <(report_values "$D/out" cpus) | paste -sd' '; }
want_bound() {  # the GPUs each task uses by Slurm's variables, with their home CPUs
  local u; for u in $(report_values "$D/out" uses); do echo "$u:$u:$(cut -d'|' -f$((u + 1)) <<<"$HOMES")"; done | paste -sd' '
}
within_uses() {  # per task, yes when its NUMABIND_DEVICES lie among the GPUs it uses
  paste -d' ' <(report_values "$D/out" uses) <(report_values "$D/out" devs) | while read -r uses devs; do
    python3 -c 'import sys; print("yes" if set(sys.argv[2].split(",")) <= set(sys.argv[1].split(",")) else "no: %s not in %s" % (sys.argv[2], sys.argv[1]))' "$uses" "$devs"
  done | paste -sd' '
}
identity() {  # NAME: every task bound to the GPU it uses, on that GPU's CPUs; tasks use different GPUs
  check_eq "$1" "0|$(want_bound)|2" "$RC|$(bound)|$(report_values "$D/out" uses | sort -u | wc -l)"
}

for setup in "ConstrainDevices=no:--cgroup" "ConstrainDevices=yes:--constrain-devices"; do
  name=${setup%%:*}
  CD=$D/c-${name##*=}
  cluster_start "$D/start-${name##*=}.log" "$CD" --gpus 4 "${setup#*:}" || exit 1
  FILES="device_files=$CD/dev/%n/nvidia0,$CD/dev/%n/nvidia1,$CD/dev/%n/nvidia2,$CD/dev/%n/nvidia3"
  NOFILES="required $D/spank_numabind.so topology=$D/four.xml mem=none"
  plugstack "$NOFILES"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=node
  identity "$name, no device files, map_gpu:2,0: task 0 on GPU 2's node, task 1 on GPU 0's"
  check_eq "$name, no device files, map_gpu:2,0: the tasks really use GPUs 2 and 0" "2 0" "$(report_values "$D/out" uses | xargs)"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=mask_gpu:0x4,0x1 --numa-binding=node
  identity "$name, no device files, mask_gpu:0x4,0x1: each task on the node of the GPU it uses"
  # overlapping masks: task 0 may use both of the step's GPUs, task 1 only GPU 0
  gpu_step -n2 --gpus-per-node=2 --gpu-bind=mask_gpu:0x3,0x1 --numa-binding=node
  check_eq "$name, no device files, 2 GPUs, mask_gpu:0x3,0x1: each task's NUMABIND_DEVICES among the GPUs it uses" \
    "0|yes yes" "$RC|$(within_uses)"
  plugstack "$NOFILES default=node"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0
  identity "$name, no device files, map_gpu:2,0 under default=node: each task on its GPU's node"
  check_eq "$name, no device files: nothing said (the identity is known, not guessed)" 0 "$(lines 'cannot be told')"
  row=$(rule_row)
  # (WARN here only because the fake GPUs' PCI order cannot be told without a driver)
  check_eq "$name, no device files: check's GPU rule is the plugin's (gres.conf's files stand in)" yes \
    "$([[ $row == *"gres.conf's File="* && $row != *guess* ]] && echo yes || echo "no: $row")"
  plugstack "$NOFILES"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=exclusive
  identity "$name, no device files, map_gpu:2,0, exclusive"
  # a task 2.5 s late: the on-time one binds to its GPU; the late one to its own (never a failed plan)
  plugstack "required $D/helper_SLOW.so rank=1 ms=2500" "$NOFILES"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=exclusive
  check_eq "$name, task 1 late, map_gpu:2,0, exclusive: no task runs unbound" "0 exclusive exclusive" \
    "$(lines 'running unbound') $(report_values "$D/out" mode | xargs)"
  identity "$name, task 1 late, map_gpu:2,0, exclusive: each task on the node of the GPU it uses"
  plugstack "required $D/helper_SLOW.so rank=1 ms=2500" "$NOFILES $FILES"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=exclusive
  check_eq "$name, device files known, task 1 late, map_gpu:2,0, exclusive: no task runs unbound" "0 exclusive exclusive" \
    "$(lines 'running unbound') $(report_values "$D/out" mode | xargs)"
  identity "$name, device files known, task 1 late, map_gpu:2,0, exclusive: each task on its GPU's node"
  plugstack "required $D/helper_SLOW.so rank=1 ms=2500" "$NOFILES fallback=fail"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=exclusive
  check_eq "$name, task 1 late under fallback=fail: the step runs" "0 2" "$RC $(wc -l <"$D/out")"
  plugstack "$NOFILES $FILES"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=node,verbose=2
  check_eq "$name, verbose=2: (held ...) names the GPUs each task can open" "$(report_values "$D/out" opens | xargs)" \
    "$(for r in 0 1; do grep -o "task $r (local $r).*(held [0-9,-]*)" "$D/err" | grep -o 'held [0-9,-]*' | cut -d' ' -f2; done | xargs)"
  # the GPU identity cannot be told: one accelerator more than gres.conf lists
  plugstack "required $D/spank_numabind.so topology=$D/five.xml mem=none"
  gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=node
  if [ "$name" = ConstrainDevices=no ]; then
    identity "$name, gres.conf not one file per accelerator: Slurm's variable is the gres index"
    check_eq "$name, gres index known: no guess said" 0 "$(lines 'cannot be told')"
    row=$(rule_row)
    check_eq "$name, five accelerators: check's GPU rule is the plugin's (the gres index)" yes \
      "$([[ $row == *"gres index"* && $row != *guess* ]] && echo yes || echo "no: $row")"
  else
    check_eq "$name, identity unknowable: one line per step, without verbose, naming device_files=" 1 \
      "$(grep -c "which GPU each task holds cannot be told.*device_files=" "$D/err")"
    row=$(rule_row)
    check_eq "$name, identity unknowable: check's GPU rule says the plugin guesses (WARN)" "WARN yes" \
      "${row%%|*} $([[ $row == *guess* ]] && echo yes || echo "no: $row")"
  fi
  cluster_stop "$CD"
done

CD=$D/c-msg
cluster_start "$D/start-msg.log" "$CD" --gpus 4 --constrain-devices || exit 1
FILES="device_files=$CD/dev/%n/nvidia0,$CD/dev/%n/nvidia1,$CD/dev/%n/nvidia2,$CD/dev/%n/nvidia3"
BASE="required $D/spank_numabind.so topology=$D/four.xml mem=none"
plugstack "$BASE $FILES"
gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=node
identity "device_files= given, map_gpu:2,0: each task on its GPU's node"
check_eq "device_files= that cannot be checked (no driver for the fake GPUs): said once per step without verbose" 1 \
  "$(lines '4 device_files= entries cannot be checked')"
gpu_step -n2 --gpus-per-node=4 --gpu-bind=map_gpu:2,0 --numa-binding=node,verbose=2
check_eq "verbose=2 says which GPUs each task holds (what it can open)" "held 2|held 0" \
  "$(grep -o 'task 0 (local 0).*(held [0-9,-]*)' "$D/err" | grep -o 'held [0-9,-]*')|$(grep -o 'task 1 (local 1).*(held [0-9,-]*)' "$D/err" | grep -o 'held [0-9,-]*')"
plugstack "$BASE device_files=$CD/dev/%n/nvidia0,$CD/dev/%n/gone1,$CD/dev/%n/nvidia2,$CD/dev/%n/gone3"
gpu_step -n2 --gpus-per-node=4 --numa-binding=node
check_eq "two missing device_files= entries: one line, in entry order" "1 1" \
  "$(grep -c 'entry 2 (.*gone1.*; device_files= entry 4 (.*gone3.*: none exists' "$D/err") $(grep -c 'gone' "$D/err")"
# --cpu-bind=verbose / --mem-bind=verbose select no binding: the site default stays on
plugstack "$BASE $FILES default=node"
for opt in --cpu-bind=verbose --mem-bind=verbose --cpu-bind=quiet; do
  gpu_step -n1 --gpus=1 "$opt"
  check_eq "$opt under default=node: bound (it asks for no binding)" node "$(report_values "$D/out" mode)"
done
SLURM_CPU_BIND=verbose gpu_step -n1 --gpus=1
check_eq "SLURM_CPU_BIND=verbose under default=node: bound, like the option" node "$(report_values "$D/out" mode)"
# --hint=compute_bound/memory_bound ask Slurm for its own core binding (srun sends a cpu-bind
# type with them): the site default leaves the step to Slurm; --numa-binding still binds it
for hint in compute_bound memory_bound; do
  gpu_step -n1 --gpus=1 --hint=$hint
  check_eq "--hint=$hint under default=node: Slurm's binding kept (documented in OPTIONS.md)" unset "$(report_values "$D/out" mode)"
  gpu_step -n1 --gpus=1 --hint=$hint --numa-binding=node
  check_eq "--hint=$hint with --numa-binding=node: bound" node "$(report_values "$D/out" mode)"
done
gpu_step -n1 --gpus=1 --cpu-bind=verbose,cores
check_eq "--cpu-bind=verbose,cores under default=node: respected" unset "$(report_values "$D/out" mode)"
# numabind's own UCX_NET_DEVICES (equal to its marker, as a bound batch shell leaves it) is
# removed from an unbound step; a user's own is kept
plugstack "$BASE $FILES"
for how in "--numa-binding=none" "--gres=none --numa-binding=node"; do
  # shellcheck disable=SC2086
  UCX_NET_DEVICES=mlx5_1:1 NUMABIND_UCX_NET_DEVICES=mlx5_1:1 gpu_step -n1 $how
  check_eq "unbound step ($how) with numabind's UCX_NET_DEVICES: removed" unset "$(report_values "$D/out" ucx)"
  # shellcheck disable=SC2086
  UCX_NET_DEVICES=mlx5_0:1 NUMABIND_UCX_NET_DEVICES=mlx5_1:1 gpu_step -n1 $how
  check_eq "unbound step ($how) with the user's UCX_NET_DEVICES: kept" mlx5_0:1 "$(report_values "$D/out" ucx)"
done
plugstack "$BASE $FILES default=node"
UCX_NET_DEVICES=mlx5_1:1 NUMABIND_UCX_NET_DEVICES=mlx5_1:1 gpu_step -n1
check_eq "CPU-only step under a site default, numabind's UCX_NET_DEVICES: removed" unset "$(report_values "$D/out" ucx)"
cluster_stop "$CD"

finish
