#!/usr/bin/env bash
# tests/slurm/gpu_truth_test.sh — every Slurm task binds to the GPUs it really holds.
#
#   gpu_truth_test.sh [PATH/spank_numabind.so]      (as root; default: build/spank/spank_numabind.so)
#
# Two real local clusters (tests/slurm/cluster.sh), 4 fake GPUs (mknod'ed char devices) on
# 2 fake NUMA nodes (topology= XML from tests/tools/gen_topology.py, the real PUs split in 2):
#   A  task/cgroup ConstrainDevices=yes, gres.conf NOT in PCI order (1,0,3,2), GPU 0 of
#      gres.conf held by another job first (so the job's GPUs do not start at 0), node n2
#      without GPUs, use_interactive_step;
#   B  ConstrainDevices=no, gres.conf in PCI order.
# Every case asserts inside the task (report.sh): which fake GPU files open(2) lets it open,
# which of them its runtime uses (CUDA_VISIBLE_DEVICES over those), the CPUs local to them
# (hwloc-calc on the XML), that its own CPUs lie there (inhome=yes) and that NUMABIND_DEVICES
# names exactly the used GPUs; exclusive modes also check that tasks' CPU sets are disjoint.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/../slurm/plugin_test_env.sh" "${1:-}" srun sbatch salloc hwloc-calc cc

CHECKS_TIMES=1   # each ok/FAIL line says when (seconds since the start)
D=$(mktemp -d /tmp/nbgpu.XXXXXX); chmod 0755 "$D"
cleanup() {
  local rc=$?
  cluster_stop "$D/a" "$D/b" "$D/c"
  if [ "${NBSPANK_KEEP:-0}" = 1 ] || [ "$failures" -ne 0 ]; then echo "directory kept: $D"; else rm -rf "$D"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_plugin "$D"
for h in SLOW FAKE; do
  cc -shared -fPIC -O1 -DHELPER_$h -o "$D/helper_$h.so" "$HERE/helper_plugin.c" || { echo "cannot build helper plugin"; exit 1; }
done
chmod 0755 "$D"/*.so "$D/report.sh"
mkdir -p "$D/topo"
BUSES=0000:17:00.0,0000:27:00.0,0000:37:00.0,0000:47:00.0
python3 "$GEN" -o "$D/topo/n1.xml" --split-numa 2 --gpu numa:0=0000:17:00.0 --gpu numa:0=0000:27:00.0 \
  --gpu numa:1=0000:37:00.0 --gpu numa:1=0000:47:00.0 >/dev/null || exit 1
python3 "$GEN" -o "$D/topo/n2.xml" --split-numa 2 >/dev/null || exit 1
chmod 0644 "$D"/topo/*.xml
XML=$D/topo/n1.xml
# the PUs local to each fake GPU, in PCI order (hwloc-calc, once)
HOMES=$(for b in ${BUSES//,/ }; do hwloc-calc --input "$XML" --po -I pu pci=$b; done | paste -sd'|')
home_of() { cut -d'|' -f$(($1 + 1)) <<<"$HOMES"; }

on_fail() { show "$D/out" 8 out; show "$D/err" 6 err; }   # the last step's R lines, its stderr
lines() { grep -c "$1" "$D/err"; }

# a step of the task probe (probe_step) that also reports the fake GPUs each task can open and uses
gpu_step() { NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES probe_step "$D" -s "$@"; }
# The core assertion: tasks ran, every task's CPUs lie on the NUMA node(s) of the GPUs it
# really uses, and NUMABIND_DEVICES names exactly those (probe index = PCI order = numabind's).
# $2: "exclusive" also checks that all tasks' CPU sets are disjoint.
truth() {
  local name=$1 n; n=$(wc -l <"$D/out")
  local why=""
  [ "$RC" = 0 ] || why+="rc=$RC "
  [ "$n" -ge 1 ] || why+="no task output "
  grep -Eqv ' inhome=(yes|nohome)' "$D/out" && why+="a task's CPUs are not local to the GPU(s) it uses "
  # a task that uses several GPUs owns all of them; a task that can use all GPUs of a shared
  # step owns its share (checked through inhome above): NUMABIND_DEVICES must be among them
  paste -d' ' <(report_values "$D/out" devs) <(report_values "$D/out" uses) | while read -r dv us; do
    for x in ${dv//,/ }; do [[ ",$us," == *",$x,"* ]] || echo "NUMABIND_DEVICES=$dv not in used GPUs $us"; done
  done >"$D/why"
  [ -s "$D/why" ] && why+="$(head -n1 "$D/why") "
  if [ "${2:-}" = exclusive ]; then
    nb_python - "$D/out" <<'PY' || why+="CPU sets overlap "
import sys
from cpulist import ids
seen = set()
for line in open(sys.argv[1]):
    c = ids([f for f in line.split() if f.startswith("cpus=")][0][5:])
    if c & seen: sys.exit(1)
    seen |= c
PY
  fi
  if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}
# tasks using a single GPU: their CPUs are exactly that GPU's NUMA node (mode node) and
# NUMABIND_DEVICES is that GPU
exact_single() {
  local got want
  got=$(paste -d' ' <(report_values "$D/out" uses) <(report_values "$D/out" cpus) <(report_values "$D/out" devs))
  want=$(paste -d' ' <(report_values "$D/out" uses) <(report_values "$D/out" cgcpus) | while read -r u cg; do
    echo "$u $(cpu_ranges "$(home_of "$u")" "$cg") $u"; done)
  check_eq "$1" "$want" "$got"
}
# the cluster's plugstack.conf holds exactly these lines
plugstack() { plugstack_lines "$CD/plugstack.conf" "$@"; }
FILES() { local f="" i; for i in 0 1 2 3; do f+="${f:+,}$CD/dev/%n/nvidia$i"; done; echo "device_files=$f"; }

# ================================================================ cluster A: ConstrainDevices=yes
CD=$D/a
cluster_start "$D/start-a.log" "$CD" --nodes 2 --gpus 4 --node-gpus n2:0 --constrain-devices --oversubscribe \
  --gres-order 1,0,3,2 --conf LaunchParameters=use_interactive_step || exit 1
cd "$D" || exit 1
BASEPLUG="required $D/spank_numabind.so topology=$D/topo/%n.xml $(FILES) mem=none"
plugstack "$BASEPLUG"
# another job holds gres GPU 0 (device file nvidia1): this job's GPUs do not start at 0
sbatch -s -N1 -w n1 -n1 --gpus=1 -o /dev/null --wrap "sleep 600" >/dev/null
for i in $(seq 50); do [ "$(squeue -h -t R | wc -l)" -ge 1 ] && break; sleep 0.1; done
A1=(-N1 -w n1)

gpu_step "${A1[@]}" -n2 --gpus-per-task=1 --numa-binding=node
truth "constrained, --gpus-per-task=1 (CUDA_VISIBLE_DEVICES=0 in both tasks): each task on its own GPU's node"
exact_single "constrained, --gpus-per-task=1: CPUs = NUMA node of the GPU the task can open; NUMABIND_DEVICES = it"
check_eq "constrained: the two tasks hold different GPUs" 2 "$(report_values "$D/out" opens | sort -u | wc -l)"
gpu_step "${A1[@]}" -n2 --gpus-per-task=1 --numa-binding=exclusive
truth "constrained, --gpus-per-task=1, exclusive: a task alone on its GPU's NUMA node is not refused" exclusive
gpu_step "${A1[@]}" -n1 --gpus-per-task=2 --numa-binding=node
truth "constrained, --gpus-per-task=2: the task owns both GPUs, CPUs on their nodes"
check_eq "--gpus-per-task=2: NUMABIND_DEVICES = both GPUs it can open" "$(report_values "$D/out" uses)" "$(report_values "$D/out" devs)"
gpu_step "${A1[@]}" -n2 --gpus-per-node=2 --numa-binding=exclusive
truth "constrained, --gpus-per-node=2 (shared step GPUs): one each, disjoint" exclusive
check_eq "--gpus-per-node=2: the tasks own different GPUs" 2 "$(report_values "$D/out" devs | sort -u | wc -l)"
for b in closest single:1 map_gpu:0,1 mask_gpu:0x1,0x2 per_task:1; do
  gpu_step "${A1[@]}" -n2 --gpus=2 --gpu-bind=$b --numa-binding=exclusive
  truth "constrained, --gpu-bind=$b: tasks on the node(s) of the GPUs they can open, disjoint" exclusive
done
# Slurm >= 24.05, --gres-flags=allow-task-sharing (per-task variables become step-relative):
# the same rule (the GPUs the task can open, the variable applied over that list) still gives
# each task the one it uses.
read -r _ slurm_version < <(srun --version)
if [ "$(printf '%s\n' 24.05 "$slurm_version" | sort -V | head -n1)" = 24.05 ]; then
  gpu_step "${A1[@]}" -n2 --gpus-per-task=1 --gres-flags=allow-task-sharing --numa-binding=exclusive
  truth "constrained, --gpus-per-task=1 --gres-flags=allow-task-sharing: each task on the GPU its variable picks, disjoint" exclusive
  # what the device cgroup lets each task open under the flag, for the record
  echo "note: allow-task-sharing: GPUs each task can open: $(report_values "$D/out" opens | xargs), CUDA_VISIBLE_DEVICES: $(report_values "$D/out" cvd | xargs)"
  check_eq "allow-task-sharing: the tasks use (and own) different GPUs" "2 2" \
    "$(report_values "$D/out" uses | sort -u | wc -l) $(report_values "$D/out" devs | sort -u | wc -l)"
else
  echo "note: Slurm $slurm_version has no --gres-flags=allow-task-sharing (24.05+); case skipped"
fi
gpu_step "${A1[@]}" -n2 --gpus=2 --gpu-bind=map_gpu:0,0 --numa-binding=node
truth "constrained, --gpu-bind=map_gpu:0,0: both tasks on that one GPU's node"
check_eq "map_gpu:0,0: both tasks hold the same GPU" 1 "$(report_values "$D/out" opens | sort -u | wc -l)"
gpu_step "${A1[@]}" -n1 --gpus-per-node=3 --numa-binding=node
truth "fewer tasks than GPUs: one task owns all 3, CPUs of all their nodes"
check_eq "fewer tasks than GPUs: CPUs = both NUMA nodes (within the step's cpuset)" \
  "$(cpu_ranges "$(hwloc-calc --input "$XML" --po -I pu all)" "$(report_values "$D/out" cgcpus)")" "$(report_values "$D/out" cpus)"

# CPU-only steps under a site default: never bound
plugstack "$BASEPLUG default=node"
gpu_step "${A1[@]}" -n2
check_eq "default=node, CPU-only step: not bound, nothing said" "unset unset|" "$(report_values "$D/out" mode | xargs)|$(cat "$D/err")"
plugstack "$BASEPLUG default=node verbose"
gpu_step "${A1[@]}" -n2
check_eq "default=node verbose, CPU-only step: one line per step saying why" 1 "$(lines 'no GPU in this step.*site default node not applied')"
gpu_step "${A1[@]}" -n2 --numa-binding=node
check_eq "explicit --numa-binding on a CPU-only step: runs unbound (NUMABIND_MODE=none), one line per step" \
  "0 none none 1" "$RC $(report_values "$D/out" mode | xargs) $(lines 'numa-binding=node: no GPU allocated.*running unbound (fallback=warn)')"
plugstack "$BASEPLUG default=node"
if command -v mpicc >/dev/null && mpicc -O1 -o "$D/mpi_hello" "$HERE/mpi_hello.c" 2>/dev/null; then
  timeout 60 srun -s "${A1[@]}" -n2 --mpi=pmix "$D/mpi_hello" >"$D/out.raw" 2>"$D/err"; RC=$?
  grep '^M ' "$D/out.raw" >"$D/out"
  check_eq "CPU-only MPI job under default=node: runs, ranks keep Slurm's own CPUs (0 and 1), no output" \
    "0|2|0,1|" "$RC|$(wc -l <"$D/out")|$(sed 's/.*cpus=\([^ ]*\).*/\1/' "$D/out" | sort | paste -sd,)|$(grep numabind "$D/err")"
fi
timeout 60 salloc -s "${A1[@]}" -n2 --gpus=2 srun -n2 --gres=none "$D/report.sh" >"$D/out.raw" 2>"$D/err"
grep '^R ' "$D/out.raw" >"$D/out"
check_eq "--gres=none step inside a GPU job, default=node: not bound" "unset unset" "$(report_values "$D/out" mode | xargs)"
printf '%s/report.sh interactive\nexit\n' "$D" | SHELL=/bin/sh timeout 60 salloc -s "${A1[@]}" -n1 --gpus=1 \
  >"$D/out.raw" 2>"$D/err"
tr -d '\r' <"$D/out.raw" | grep '^R interactive' >"$D/out"
check_eq "interactive step (use_interactive_step) under default=node: treated like the batch step, not bound" \
  "unset" "$(report_values "$D/out" mode)"
plugstack "$BASEPLUG default=node batch_step=yes"
printf "NBPROBE_DEVDIR=%s NBPROBE_HOMES='%s' %s/report.sh interactive\nexit\n" "$CD/dev" "$HOMES" "$D" |
  SHELL=/bin/sh timeout 60 salloc -s "${A1[@]}" -n1 --gpus=1 >"$D/out.raw" 2>"$D/err"
tr -d '\r' <"$D/out.raw" | grep '^R interactive' >"$D/out"; RC=0
check_eq "interactive step with batch_step=yes: bound like the batch shell" "node" "$(report_values "$D/out" mode)"
truth "interactive step with batch_step=yes: on its GPU's node"
cat >"$D/leak.sbatch" <<EOF
#!/bin/sh
$D/report.sh batch
srun -s -n1 --numa-binding=none $D/report.sh none
srun -s -n1 --gres=none $D/report.sh cpuonly
EOF
timeout 90 sbatch -s --wait "${A1[@]}" -n1 --gpus=1 -o "$D/leak.out" "$D/leak.sbatch" >/dev/null 2>&1
check_eq "batch_step=yes: batch shell bound; later steps' NUMABIND_* are their own, never the batch shell's" \
  "node|none:unset:unset|unset:unset:unset" \
  "$(grep '^R batch' "$D/leak.out" >"$D/out"; report_values "$D/out" mode)|$(grep '^R none' "$D/leak.out" >"$D/out"; echo "$(report_values "$D/out" mode):$(report_values "$D/out" cpusenv):$(report_values "$D/out" dev)")|$(grep '^R cpuonly' "$D/leak.out" >"$D/out"; echo "$(report_values "$D/out" mode):$(report_values "$D/out" cpusenv):$(report_values "$D/out" dev)")"
plugstack "$BASEPLUG"
NUMABIND_CPUS=99 NUMABIND_DEVICE=7 NUMABIND_MODE=node gpu_step "${A1[@]}" -n1 --gpus=1
check_eq "a user's NUMABIND_* never reaches a task the plugin leaves alone" "unset:unset:unset" \
  "$(report_values "$D/out" mode):$(report_values "$D/out" cpusenv):$(report_values "$D/out" dev)"
plugstack "$BASEPLUG fallback=warn"
NUMABIND_CPUS=99 NUMABIND_DEVICE=7 gpu_step "${A1[@]}" -n3 -O --gpus=1 --numa-binding=exclusive
check_eq "fallback=warn (exclusive impossible): NUMABIND_MODE=none and no stale NUMABIND_*, one line per step" \
  "none none none|unset unset unset|1" "$(report_values "$D/out" mode | xargs)|$(report_values "$D/out" cpusenv | xargs)|$(lines 'running unbound (fallback=warn)')"

# --mem-bind is respected like --cpu-bind
plugstack "$BASEPLUG default=node"
gpu_step "${A1[@]}" -n1 --gpus=1 --mem-bind=local
check_eq "default=node and an explicit --mem-bind: site default not applied (respect_user_bind=yes)" "unset" "$(report_values "$D/out" mode)"
plugstack "$BASEPLUG default=node respect_cpu_bind=no"
gpu_step "${A1[@]}" -n1 --gpus=1 --mem-bind=local
check_eq "respect_cpu_bind=no (old name of respect_user_bind): the site default wins over --mem-bind" "node" "$(report_values "$D/out" mode)"
truth "respect_cpu_bind=no: bound to its GPU's node"

# a node without GPUs
plugstack "$BASEPLUG default=node verbose"
gpu_step -N1 -w n2 -n8 -O
check_eq "node without GPUs, default=node: tasks unbound, one verbose line per step (not per task)" \
  "0|1|$(printf 'unset %.0s' 1 2 3 4 5 6 7 8)" "$RC|$(grep -c '^numabind' "$D/err")|$(report_values "$D/out" mode | tr '\n' ' ')"
plugstack "$BASEPLUG"
gpu_step -N1 -w n2 -n8 -O --numa-binding=node
check_eq "node without GPUs, explicit --numa-binding: one line per step, NUMABIND_MODE=none" \
  "1|none" "$(grep -c '^numabind' "$D/err")|$(report_values "$D/out" mode | sort -u | xargs)"
check_eq "the line names the plugstack key devices=, not the CLI flag" "1 0" "$(lines 'devices=') $(lines 'device-match')"

# het jobs (one --numa-binding value per srun/sbatch: srun's last, sbatch's first)
NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES timeout 60 srun -s -n1 -w n1 --gpus=1 --numa-binding=node "$D/report.sh" : \
  -n1 -w n2 --numa-binding=exclusive "$D/report.sh" >"$D/out.raw" 2>"$D/err"; RC=$?
grep '^R ' "$D/out.raw" | sort -t= -k2,2n >"$D/out"
check_eq "het job (srun a : b): srun's last --numa-binding applies to every component" "exclusive none" \
  "$(report_values "$D/out" mode | xargs)"
check_eq "het job: the GPU-less component on n2 says so once" 1 "$(lines 'numa-binding=exclusive: no')"
printf '#!/bin/sh\n#SBATCH -s -n1 -w n1 --gpus=1 --numa-binding=socket\n#SBATCH hetjob\n#SBATCH -s -n1 -w n2 --numa-binding=exclusive\nsrun -s --het-group=0 %s/report.sh het\n' "$D" >"$D/het.sbatch"
NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES timeout 90 sbatch --wait -o "$D/het.out" "$D/het.sbatch" >/dev/null 2>&1
grep '^R het' "$D/het.out" >"$D/out"
check_eq "het job (sbatch hetjob): the first component's #SBATCH --numa-binding applies" "socket" "$(report_values "$D/out" mode)"

# a task that reports late: the others bind safely, the step says so once
plugstack "required $D/helper_SLOW.so rank=1 ms=2500" "$BASEPLUG"
gpu_step "${A1[@]}" -n2 --gpus-per-task=1 --numa-binding=exclusive
check_eq "a task 2.5 s late: every task runs (rc 0), CPU sets disjoint, one line naming it" "0 1" \
  "$RC $(lines 'local task(s) 1 did not report their GPUs within 2 s')"
truth_late=$(python3 -c '
import sys
sets = [l.split("cpus=")[1].split()[0] for l in open(sys.argv[1])]
print("disjoint" if len(set(sets)) == len(sets) else "overlap")' "$D/out")
check_eq "a late task: CPU sets still disjoint" disjoint "$truth_late"
truth "a task 2.5 s late, exclusive: the late task on its own GPU's node, the on-time one on its own" exclusive
gpu_step "${A1[@]}" -n2 --gpus-per-task=1 --numa-binding=node
truth "a task 2.5 s late, node: each task on the node of the GPU it can open"
plugstack "$BASEPLUG"
gpu_step "${A1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,verbose
check_eq "no late task: no such line" 0 "$(lines 'did not report')"

# A raw value that reached slurmstepd cannot forge slurmd log lines
sed "s|^PlugStackConfig=.*|PlugStackConfig=$D/fake-plugstack.conf|" "$CD/slurm.conf" >"$D/user-slurm.conf"
echo "required $D/helper_FAKE.so" >"$D/fake-plugstack.conf"
plugstack "$BASEPLUG"
SLURM_CONF=$D/user-slurm.conf gpu_step "${A1[@]}" -n1 --gpus=1 --numa-binding=$'node\n[2030-01-01T00:00:00.000] error: forged'"$(printf 'x%.0s' $(seq 300))"
check_eq "a raw bad value reaching slurmstepd: task runs unbound (fallback=warn), value escaped and cut" \
  "0:none:1:0" "$RC:$(report_values "$D/out" mode):$(lines "invalid --numa-binding mode 'node\\\\x0a\[2030.*\.\.\.'"):$(grep -c '^\[2030' "$D/err" "$CD"/log/slurmd.n1.log | awk -F: '{s += $NF} END {print s}')"
scancel --full -u root >/dev/null 2>&1; cluster_stop "$CD"

# ================================================================ cluster B: ConstrainDevices=no
CD=$D/b
cluster_start "$D/start-b.log" "$CD" --nodes 1 --gpus 4 --cgroup --oversubscribe || exit 1
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

cluster_stop "$CD"

# ================================================================ cluster C: ConstrainDevices=yes, gres.conf in PCI order
# (the paths a site takes without device_files=, and the step rules decided in the front)
CD=$D/c
cluster_start "$D/start-c.log" "$CD" --nodes 1 --gpus 4 --constrain-devices --oversubscribe || exit 1
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
