#!/usr/bin/env bash
# tests/slurm/step_plan_test.sh — the step planned once in slurmstepd: a task that finds the
# GPUs slurmstepd expected takes its entry without waiting for the others; a task that finds
# other GPUs plans by the exchange, beside the tasks that took it; a step whose tasks are
# bound to GPUs of their own by Slurm plans by the exchange. Under task/affinity alone and
# under task/cgroup with ConstrainDevices=yes.
#
#   step_plan_test.sh [PATH/spank_numabind.so]      (as root; default: build/spank/spank_numabind.so)
#
# The node's two CPUs are two NUMA nodes (topology= XML), GPU 0 on node 0, GPU 1 on node 1.
# Which plan a task took is in its verbose=2 line ("planned the step's plan"); where its CPUs
# must be comes from hwloc-calc (pci=BUS), what it holds from the task probe (report.sh: the
# files it can open, CUDA_VISIBLE_DEVICES over them), what it has from /proc.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/../slurm/plugin_test_env.sh" "${1:-}" srun hwloc-calc cc

test_workdir nbstepplan

[ "$(hwloc-calc -N pu all)" -ge 2 ] || skip "needs at least 2 CPUs"
install_plugin "$D"
for h in VISIBLE NARROW; do
  cc -shared -fPIC -O1 -DHELPER_$h -o "$D/helper_$h.so" "$HERE/helper_plugin.c" || { echo "cannot build helper plugin"; exit 1; }
done
chmod 0755 "$D"/helper_*.so
python3 "$GEN" -o "$D/two.xml" --split-numa 2 --gpu numa:0=0000:17:00.0 --gpu numa:1=0000:27:00.0 >/dev/null || exit 1
python3 "$GEN" -o "$D/one.xml" --gpu numa:0=0000:17:00.0 >/dev/null || exit 1
chmod 0644 "$D/two.xml" "$D/one.xml"
NBPROBE_HOMES="$(hwloc-calc --input "$D/two.xml" --po -I pu pci=0000:17:00.0)|$(hwloc-calc --input "$D/two.xml" --po -I pu pci=0000:27:00.0)"
export NBPROBE_HOMES

# probe_step's step, run as the user nbtest (slurmstepd plans the step with the user's ids):
# the probe's lines in $D/out by rank, stderr in $D/err, RC.
user_step() {
  su nbtest -s /bin/bash -c ". '$CD/env.sh'; cd /tmp; NBPROBE_DEVDIR='$CD/dev' NBPROBE_HOMES='$NBPROBE_HOMES' \
    timeout 60 srun $* '$D/report.sh'" >"$D/out.raw" 2>"$D/err"
  RC=$?
  grep '^R ' "$D/out.raw" | sort -t= -k2,2n >"$D/out"
}
# numabind on two.xml with both fake GPUs' files, after "nbvisible ARGS" when given.
two_gpu_plugstack() {
  local numabind="required $D/spank_numabind.so topology=$D/two.xml mem=none device_files=$CD/dev/%n/nvidia0,$CD/dev/%n/nvidia1"
  if [ -n "${1:-}" ]; then plugstack_lines "$CD/plugstack.conf" "required $D/helper_VISIBLE.so $1" "$numabind"
  else plugstack_lines "$CD/plugstack.conf" "$numabind"; fi
}
planned() { grep -c "planned $1;" "$D/err"; }
HOME0=${NBPROBE_HOMES%|*}; HOME1=${NBPROBE_HOMES#*|}
home_of() { if [ "$1" = 0 ]; then echo "$HOME0"; else echo "$HOME1"; fi; }
# "LOCAL:GPU:CPUS ..." of the step's tasks: the GPU numabind gave each (NUMABIND_DEVICE) and its CPUs.
placed() { awk '{ for (i = 1; i <= NF; i++) { split($i, a, "="); v[a[1]] = a[2] } printf "%s:%s:%s ", v["local"], v["dev"], v["cpus"] }' "$D/out"; }
# The same for tasks that share the step's list (task r owns GPU r: docs/SITE.md) or that
# use one GPU each (the probe's uses=), with the CPUs local to that GPU (hwloc-calc).
owner_homes() { local r; for r in 0 1; do printf "%s:%s:%s " "$r" "$r" "$(home_of "$r")"; done; }
user_homes() {
  local r u
  for r in 0 1; do u=$(report_by_rank "$D/out" uses | grep "^$r:" | cut -d: -f2); printf "%s:%s:%s " "$r" "$u" "$(home_of "$u")"; done
}

setup() {
  local name=$1
  two_gpu_plugstack
  local mode
  for mode in exclusive node; do
    user_step -n2 --gpus=2 --numa-binding=$mode,verbose=2
    check_eq "$name, $mode, the step's list shared: both tasks take their entry of the step's plan, each on its GPU's CPUs" \
      "0 2 $(owner_homes)" "$RC $(planned "the step's plan") $(placed)"
  done
  user_step -n2 --gpus-per-task=1 --numa-binding=exclusive,verbose=2
  check_eq "$name, --gpus-per-task=1 (Slurm binds each task a GPU): both plan by the exchange, on their GPU's CPUs" \
    "0 2 $(user_homes)" "$RC $(planned "the exchange") $(placed)"
  check_eq "$name, --gpus-per-task=1: the tasks use different GPUs" "0,1" "$(report_values "$D/out" uses | sort | paste -sd,)"
  two_gpu_plugstack "rank=0 visible=1"
  user_step -n2 --gpus=2 --numa-binding=exclusive,verbose=2
  check_eq "$name, task 0 finds GPU 1 alone (another plugin set its CUDA_VISIBLE_DEVICES): task 1 takes the step's plan, task 0 plans beside it and says so" \
    "0 1 1 1" "$RC $(planned "the step's plan") $(planned "beside the step's plan") $(grep -c 'task 0 (local 0): this task found other GPUs than' "$D/err")"
  check_eq "$name, task 0 beside the step's plan: on GPU 1, on the CPUs task 1 (GPU 1 by the step's plan) does not use" \
    "0:1:$HOME0 1:1:$HOME1 " "$(placed)"
  two_gpu_plugstack
  user_step -n2 --numa-binding=exclusive
  check_eq "$name, no GPU in the step: said once, both tasks unbound" "0 1 none,none" \
    "$RC $(grep -c 'no GPU allocated to this step' "$D/err") $(report_values "$D/out" mode | paste -sd,)"
}

CD=$D/c1
cluster_start "$D/start1.log" "$CD" --gpus 2 || exit 1
setup "task/affinity alone"
cluster_stop "$CD"

CD=$D/c2
cluster_start "$D/start2.log" "$CD" --gpus 2 --constrain-devices || exit 1
setup "task/cgroup, ConstrainDevices=yes"
# Another plugin moves task 0 into a narrower cpuset after slurmstepd planned the step (one
# NUMA node with both CPUs and the GPU: the task's entry is both CPUs).
if [ -d /sys/fs/cgroup/cpuset ]; then
  plugstack_lines "$CD/plugstack.conf" "required $D/helper_NARROW.so rank=0 cpus=1" \
    "required $D/spank_numabind.so topology=$D/one.xml mem=none device_files=$CD/dev/%n/nvidia0"
  user_step -n1 -c2 --gpus=1 --numa-binding=node,verbose=2
  check_eq "a task whose cpuset shrank after the step's plan: bound to the part of its entry it allows, and says so" \
    "0 node 1 1 1" "$RC $(report_values "$D/out" mode) $(report_values "$D/out" cpus) $(planned "the step's plan") $(grep -c "this task's cpuset differs from the step's" "$D/err")"
else
  skip_case "a task whose cpuset shrank: no cgroup v1 cpuset hierarchy here"
fi
cluster_stop "$CD"

finish
