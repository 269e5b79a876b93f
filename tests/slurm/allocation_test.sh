#!/usr/bin/env bash
# tests/slurm/allocation_test.sh — on a node shared by two jobs, every task of each job stays
# inside the CPUs Slurm allocated to that job, in every mode, whether or not a cpuset
# constrains it: task/affinity alone, task/cgroup with ConstrainCores=no, and with =yes.
#
#   allocation_test.sh [PATH/spank_numabind.so]      (as root; default: build/spank/spank_numabind.so)
#
# The node's two CPUs are presented as two NUMA nodes (topology= XML from gen_topology.py),
# GPU 0 on node 1 and GPU 1 on node 0, so each job's GPU sits next to the other job's CPU:
# binding to the GPU's node would put the task on a CPU Slurm gave someone else. Expected
# values are Slurm's: CPU_IDs of `scontrol show job -d` for each job.
# Exit 0 all passed, 1 a check failed, 77 skipped. NBSPANK_KEEP=1 keeps the directory.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/../slurm/plugin_test_env.sh" "${1:-}" srun salloc scontrol hwloc-calc

test_workdir nballoc

[ "$(hwloc-calc -N pu all)" -ge 2 ] || skip "needs at least 2 CPUs"
install_plugin "$D"
python3 "$GEN" -o "$D/two.xml" --split-numa 2 --gpu numa:1=0000:17:00.0 --gpu numa:0=0000:27:00.0 >/dev/null || exit 1
chmod 0644 "$D/two.xml"

# Slurm's CPUs of job $1 on n1, as scontrol says ("CPU_IDs=1").
slurm_cpus() { scontrol show job -d "$1" | grep -o 'CPU_IDs=[^ ]*' | head -n1 | cut -d= -f2; }
# A job holding $@ without a shell (its id on stdout).
hold() {
  timeout 60 salloc --no-shell "$@" 2>&1 | grep -o 'Granted job allocation [0-9]*' | awk '{print $4}'
}
# "yes" when every CPU of every task (column cpus=) is in the list $1.
inside() {
  nb_python - "$1" "$D/out" <<'PY'
import sys
from cpulist import ids
allowed = ids(sys.argv[1])
bad = [l.split("cpus=")[1].split()[0] for l in open(sys.argv[2]) if not ids(l.split("cpus=")[1].split()[0]) <= allowed]
print("yes" if not bad else "no (tasks on %s)" % " ".join(bad))
PY
}

shared_node() {  # SETUP: a cluster is running; two jobs share its node
  local setup=$1 a b mode job cpus
  echo "required $D/spank_numabind.so topology=$D/two.xml mem=none" >"$CD/plugstack.conf"
  b=$(hold -n1 --gpus=1)   # first: CPU 0 and GPU 0 (next to CPU 1)
  a=$(hold -n1 --gpus=1)   # then: CPU 1 and GPU 1 (next to CPU 0)
  [ -n "$a" ] && [ -n "$b" ] || { fail "$setup: cannot start two one-CPU jobs on the node"; return; }
  check_eq "$setup: the two jobs hold different CPUs (scontrol show job -d)" 2 \
    "$(printf '%s\n%s\n' "$(slurm_cpus "$a")" "$(slurm_cpus "$b")" | sort -u | wc -l)"
  for job in "$a" "$b"; do
    cpus=$(slurm_cpus "$job")
    for mode in node socket exclusive core-complex; do
      probe_step "$D" -s --jobid="$job" -n1 --numa-binding=$mode
      check_eq "$setup, job holding CPU $cpus, $mode: the task runs inside its job's CPUs" "0 yes $mode" \
        "$RC $(inside "$cpus") $(report_values "$D/out" mode)"
    done
  done
  probe_step "$D" -s --jobid="$a" -n1 --numa-binding=node,verbose
  check_eq "$setup: the verbose line names only the job's CPU" 1 "$(grep -c "CPUs $(slurm_cpus "$a")," "$D/err")"
  scancel "$a" "$b" >/dev/null 2>&1
  # One CPU for two tasks (-O): exclusive cannot split it; whatever happens stays inside.
  b=$(hold -n1)
  a=$(hold -n2 -O --gpus=2)
  [ -n "$a" ] && [ -n "$b" ] || { fail "$setup: cannot start the -O job beside another"; return; }
  cpus=$(slurm_cpus "$a")
  for mode in node exclusive; do
    probe_step "$D" -s --jobid="$a" -n2 -O --numa-binding=$mode
    check_eq "$setup, -n2 -O on one CPU ($cpus), $mode: both tasks inside the job's CPU" "2 yes" \
      "$(wc -l <"$D/out") $(inside "$cpus")"
  done
  scancel "$a" "$b" >/dev/null 2>&1
  # The whole node to one job: nothing narrowed, each task on its GPU's node.
  a=$(hold -n2 --gpus=2)
  probe_step "$D" -s --jobid="$a" -n2 --gpus-per-task=1 --numa-binding=exclusive
  check_eq "$setup, a job holding the whole node: each task on its own GPU's node (hwloc-calc)" \
    "$(for b in 0000:17:00.0 0000:27:00.0; do hwloc-calc --input "$D/two.xml" --po -I pu pci=$b; done | paste -sd' ')" \
    "$(report_values "$D/out" cpus | paste -sd' ')"
  scancel "$a" >/dev/null 2>&1
}

CD=$D/c1
cluster_start "$D/start1.log" "$CD" --gpus 2 || exit 1
shared_node "task/affinity alone (no cpuset)"
cluster_stop "$CD"

CD=$D/c2
cluster_start "$D/start2.log" "$CD" --gpus 2 --no-constrain-cores || exit 1
shared_node "task/cgroup, ConstrainCores=no"
cluster_stop "$CD"

CD=$D/c3
cluster_start "$D/start3.log" "$CD" --gpus 2 --cgroup || exit 1
shared_node "task/cgroup, ConstrainCores=yes"
cluster_stop "$CD"

finish
