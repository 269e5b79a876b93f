#!/usr/bin/env bash
# tests/slurm/gpu_truth_constrained_test.sh — every Slurm task binds to the GPUs it really holds,
# under task/cgroup ConstrainDevices=yes with gres.conf NOT in PCI order (1,0,3,2), GPU 0 of
# gres.conf held by another job first (so the job's GPUs do not start at 0), node n2 without
# GPUs, use_interactive_step: every --gpu-bind form, CPU-only steps under a site default, the
# batch and interactive steps, --mem-bind, het jobs, a late task, a forged option value.
#
#   gpu_truth_constrained_test.sh [PATH/spank_numabind.so]   (as root; default: build/spank/spank_numabind.so)
#
# The fixtures (4 fake GPUs on 2 fake NUMA nodes) and the assertions: tests/slurm/gpu_truth_lib.sh.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
# shellcheck source=tests/slurm/gpu_truth_lib.sh
. "$(dirname "$0")/gpu_truth_lib.sh" "${1:-}"

cluster_start "$D/start.log" "$CD" --nodes 2 --gpus 4 --node-gpus n2:0 --constrain-devices --oversubscribe \
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
scancel --full -u root >/dev/null 2>&1

finish
