#!/usr/bin/env bash
# tests/slurm/spank_test.sh — spank_numabind.so against a real Slurm (no mock).
#
#   spank_test.sh [PATH/spank_numabind.so]        (as root; default: build/spank/spank_numabind.so)
#
# Starts one 2-node test cluster (tests/slurm/cluster.sh: slurmd n1 and n2 on this machine,
# 2 fake GPUs each, Slurm's own task/affinity binding) and reuses it for every case; each case
# rewrites DIR/plugstack.conf (srun, sbatch and slurmstepd re-read it per launch). The
# topologies (this machine's real CPUs plus fake NVIDIA GPUs, so bindings are really applied)
# and the expectations (hwloc-calc on the generated XML, never the plugin): spank_lib.sh.
# Under task/cgroup: spank_cgroup_test.sh.
# Exit 0: all passed; 1: a check failed; 77: skipped (not root / no Slurm).
# NBSPANK_KEEP=1 keeps the cluster directory. NBSPANK_ONLY=regex runs matching cases only.
set -uo pipefail

# shellcheck source=tests/slurm/spank_lib.sh
. "$(dirname "$0")/spank_lib.sh" "${1:-}"

# ------------------------------------------------------------------ cluster
cluster_start "$D/cluster-start.log" "$D" --nodes 2 --gpus 2 || exit 1
cd "$D" || exit 1

# Two tasks that ran (rc 0) as Slurm placed them ($BASE), without NUMABIND_*, nothing said.
check_untouched() {
  check_eq "$1" "0"$'\n'"$(per_rank 0:unset 1:unset)"$'\n'"$BASE"$'\n' \
    "$RC"$'\n'"$(report_by_rank "$D/out" mode)"$'\n'"$(report_by_rank "$D/out" cpus)"$'\n'"$(cat "$D/err")"
}
N1=(-N1 -w n1)

# Slurm's own per-task binding, without the plugin binding anything (default=none)
plugin_args "topology=$ONE"
probe_step "$D" "${N1[@]}" -n2
BASE=$(report_by_rank "$D/out" cpus)
check_eq "baseline: plugin loaded, default none: tasks keep Slurm's binding, no NUMABIND_*" \
  "$(per_rank 0:unset 1:unset)" "$(report_by_rank "$D/out" mode)"

# ------------------------------------------------------------------ modes
if case_on modes; then
  plugin_args "topology=$ONE"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "mode node (one NUMA node, shared GPUs): CPUs = NUMA node of the GPU" \
    "$(per_rank "0:node:$(node_cpus "$ONE" 0)" "1:node:$(node_cpus "$ONE" 1)")" "$(mc "$D/out")"
  check_eq "mode node: NUMABIND_MODE/NUMABIND_DEVICE exported" "$(per_rank 0:node/0 1:node/1)" \
    "$(paste -d/ <(report_by_rank "$D/out" mode) <(report_by_rank "$D/out" dev | cut -d: -f2))"
  check_eq "mode node: default memory policy prefer -> preferred on the GPU's node" \
    "$(per_rank "0:preferred:$(numa_os "$ONE" 0)" "1:preferred:$(numa_os "$ONE" 1)")" "$(report_by_rank "$D/out" mem)"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=socket
  check_eq "mode socket: CPUs = package of the GPU" \
    "$(per_rank "0:socket:$(pkg_cpus "$ONE" 0)" "1:socket:$(pkg_cpus "$ONE" 1)")" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=exclusive
  check_eq "mode exclusive: 2 tasks on one node split its cores" \
    "$(per_rank "0:exclusive:$(core_cpus "$ONE" 0)" "1:exclusive:$(core_cpus "$ONE" 1)")" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=core-complex
  check_eq "mode core-complex: 2 tasks, 1 L3 -> both on the whole L3 (shared, as torch.numa.binding)" \
    "$(per_rank "0:core-complex:$(l3_cpus "$ONE" 0)" "1:core-complex:$(l3_cpus "$ONE" 1)")" "$(mc "$D/out")"
  plugin_args "topology=$SWAP"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=core-complex,mem=none
  check_eq "mode core-complex (2 L3, GPUs swapped): CPUs = L3 of the GPU" \
    "$(per_rank "0:core-complex:$(l3_cpus "$SWAP" 0)" "1:core-complex:$(l3_cpus "$SWAP" 1)")" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=none
  check_eq "mode none: NUMABIND_MODE=none, Slurm's binding untouched" \
    "$(per_rank 0:none 1:none)"$'\n'"$BASE" "$(report_by_rank "$D/out" mode)"$'\n'"$(report_by_rank "$D/out" cpus)"
fi

# ------------------------------------------------------------------ memory policies
if case_on mem; then
  plugin_args "topology=$ONE"
  for m in bind:bind interleave:interleave none:default; do
    probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node,mem=${m%%:*}
    exp=${m#*:}:$(numa_os "$ONE" 0)
    [ "${m%%:*}" = none ] && exp=default:
    check_eq "mem=${m%%:*}: policy read back" "$(per_rank "0:$exp" "1:$exp")" "$(report_by_rank "$D/out" mem)"
  done
  plugin_args "topology=$ONE mem=interleave"
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=node
  check_eq "plugstack mem=interleave is the default policy" "0:interleave:$(numa_os "$ONE" 0)" "$(report_by_rank "$D/out" mem)"
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=node,mem=bind
  check_eq "option mem=bind overrides plugstack mem=" "0:bind:$(numa_os "$ONE" 0)" "$(report_by_rank "$D/out" mem)"
fi

# ------------------------------------------------------------------ GPUs per task / per node
if case_on gpus; then
  plugin_args "topology=$SWAP"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,mem=none
  check_eq "--gpus-per-task=1: each task sees one GPU" "$(per_rank 0:0 1:1)" "$(report_by_rank "$D/out" cvd)"
  check_eq "--gpus-per-task=1: task bound to its own GPU's node (swapped topology)" \
    "$(per_rank "0:node:$(node_cpus "$SWAP" 0)" "1:node:$(node_cpus "$SWAP" 1)")" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node,mem=none
  check_eq "--gpus-per-node=2: all tasks see all GPUs" "$(per_rank 0:0,1 1:0,1)" "$(report_by_rank "$D/out" cvd)"
  check_eq "--gpus-per-node=2: task r uses GPU r" \
    "$(per_rank "0:node:$(node_cpus "$SWAP" 0)" "1:node:$(node_cpus "$SWAP" 1)")" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=1 --numa-binding=node,mem=none
  g=$(report_by_rank "$D/out" cvd | head -n1 | cut -d: -f2)
  check_eq "--gpus-per-node=1: both tasks share the step's GPU $g" \
    "$(per_rank "0:node:$(node_cpus "$SWAP" "$g")" "1:node:$(node_cpus "$SWAP" "$g")")" "$(mc "$D/out")"
  plugin_args "topology=$NEAR"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=exclusive,mem=none
  check_eq "exclusive with --gpus-per-task=1 (GPU per NUMA node): each task its node's cores" \
    "$(per_rank "0:exclusive:$(node_cpus "$NEAR" 0)" "1:exclusive:$(node_cpus "$NEAR" 1)")" "$(mc "$D/out")"
fi

# ------------------------------------------------------------------ nearest NICs
if case_on nics; then
  # one: each GPU with a ConnectX behind its own PCIe switch; expected names from hwloc's
  # PCI tree (tests/tools/nic_oracle.py), never from numabind
  NICS=$D/topo/nics.xml
  gen -o "$NICS" --gpu core:0=$B0,switch=a --pci core:0=0000:18:00.0,kind=cx6,switch=a \
    --gpu core:1=$B1,switch=b --pci core:1=0000:28:00.0,kind=cx6,switch=b
  chmod 0644 "$NICS"
  nic_of() { python3 "$HERE/../tools/nic_oracle.py" "$NICS" --gpus "$(bus "$1")" |
    python3 -c 'import json, sys; g = json.load(sys.stdin)["gpus"]; print(",".join(next(iter(g.values()))["nics"]))'; }
  n0=$(nic_of 0) n1=$(nic_of 1)
  plugin_args "topology=$NICS"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,mem=none
  check_eq "srun: NUMABIND_NICS = the HCA behind each task's GPU's switch, UCX_NET_DEVICES untouched" \
    "$(per_rank "0:$n0/0:unset" "1:$n1/1:unset")" "$(paste -d/ <(report_by_rank "$D/out" nics) <(report_by_rank "$D/out" ucx))"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,mem=none,ucx
  check_eq "srun --numa-binding=node,ucx: UCX_NET_DEVICES=<hca>:1" "$(per_rank "0:$n0:1" "1:$n1:1")" "$(report_by_rank "$D/out" ucx)"
  plugin_args "topology=$NICS ucx=yes"
  UCX_NET_DEVICES=mine:2 probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,mem=none
  check_eq "plugstack ucx=yes keeps the user's UCX_NET_DEVICES" "$(per_rank 0:mine:2 1:mine:2)" "$(report_by_rank "$D/out" ucx)"
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=2 --numa-binding=node,mem=none
  check_eq "plugstack ucx=yes, one task owning both GPUs: the union in PCI order" \
    "0:$n0,$n1/0:$n0:1,$n1:1" "$(paste -d/ <(report_by_rank "$D/out" nics) <(report_by_rank "$D/out" ucx))"
  # as a task of a bound batch shell has it: numabind's own value (and marker) is replaced
  UCX_NET_DEVICES=mlx5_9:1 NUMABIND_UCX_NET_DEVICES=mlx5_9:1 probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,mem=none
  check_eq "plugstack ucx=yes replaces a UCX_NET_DEVICES numabind set in an outer binding" \
    "$(per_rank "0:$n0:1" "1:$n1:1")" "$(report_by_rank "$D/out" ucx)"
  plugin_args "topology=$ONE ucx=yes"
  NUMABIND_NICS=stale probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,mem=none
  check_eq "no fabric NIC: NUMABIND_NICS removed, UCX_NET_DEVICES not set" \
    "$(per_rank 0:unset/0:unset 1:unset/1:unset)" "$(paste -d/ <(report_by_rank "$D/out" nics) <(report_by_rank "$D/out" ucx))"
fi

# ------------------------------------------------------------------ verbose
if case_on verbose; then
  plugin_args "topology=$SWAP"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,verbose,mem=none
  check_eq "verbose: exactly one numabind line per task on srun's stderr" 2 "$(grep -c '^numabind: ' "$D/err")"
  for r in 0 1; do
    check_grep "verbose: task $r line is short: node, task, local rank, mode, GPU+PCI, its NUMA node, CPUs, memory" \
      "^numabind: node n1 task $r \\(local $r\\): node, GPU $r \\($(bus $r), NUMA $(numa_os "$SWAP" $r)\\), CPUs $(node_cpus "$SWAP" $r), memory not bound$" "$D/err"
  done
  check_eq "verbose: no timing detail at the first level" 0 "$(grep -c 'took ' "$D/err")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-task=1 --numa-binding=node,verbose=2,mem=none
  check_eq "verbose=2: timings and the GPU source added" 2 "$(grep -c '; GPUs from .*; took [0-9]* us' "$D/err")"
  t=$(sed -n 's/.*; took \([0-9]*\) us (.*; step setup \([0-9]*\) us)$/\1 \2/p' "$D/err" | head -n1)
  [ -n "$t" ] && echo "info - plugin's own timing: task_init ${t%% *} us per task, step setup (topology load) ${t##* } us"
  plugin_args "topology=$ONE verbose default=node"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2
  check_eq "plugstack verbose: one line per task" 2 "$(grep -c '^numabind: node n1 task' "$D/err")"
  plugin_args "topology=$ONE"
  # -Q: srun's own "job queued" notes when the previous job is still being cleaned up
  probe_step "$D" "${N1[@]}" -Q -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "without verbose: nothing on stderr" "" "$(cat "$D/err")"
fi

# ------------------------------------------------------------------ bad values
if case_on bad; then
  plugin_args "topology=$ONE"
  rm -f "$D/marker"
  timeout 30 srun "${N1[@]}" -n1 --numa-binding=bogus touch "$D/marker" 2>"$D/err"; rc=$?
  check_eq "bad option value: srun refuses (rc!=0), nothing launched" "refused,nolaunch" \
    "$([ $rc -ne 0 ] && echo refused || echo rc=0),$([ -e "$D/marker" ] && echo launched || echo nolaunch)"
  check_eq "bad option value: one numabind line naming it and the valid modes" 1 \
    "$(grep -c "numabind: invalid --numa-binding mode 'bogus'.*none, node, socket, exclusive, core-complex" "$D/err")"
  for v in node,fast node,mem=fast node,verbose,verbose ""; do
    timeout 30 srun "${N1[@]}" -n1 --numa-binding="$v" touch "$D/marker" 2>"$D/err"; rc=$?
    check_eq "bad option value '$v': refused before launch" "refused,nolaunch" \
      "$([ $rc -ne 0 ] && echo refused || echo rc=0),$([ -e "$D/marker" ] && echo launched || echo nolaunch)"
    [ "$v" = node,mem=fast ] &&
      check_grep "bad memory policy: one line naming it and the valid policies" \
        "numabind: invalid --numa-binding memory policy 'fast'.*prefer, bind, interleave, none" "$D/err"
  done
  SLURM_SPANK__SLURM_SPANK_OPTION_numabind_numa_binding=bogus timeout 30 srun "${N1[@]}" -n1 touch "$D/marker" 2>"$D/err"; rc=$?
  check_eq "bad value in SLURM_SPANK_* environment: srun refuses before launch" "refused,nolaunch" \
    "$([ $rc -ne 0 ] && echo refused || echo rc=0),$([ -e "$D/marker" ] && echo launched || echo nolaunch)"
  check_grep "bad environment value: named with the valid modes" "numabind: invalid --numa-binding mode 'bogus'" "$D/err"
  timeout 30 sbatch "${N1[@]}" -n1 --numa-binding=bogus --wrap "touch $D/marker" >/dev/null 2>"$D/err"; rc=$?
  check_eq "bad option value: sbatch refuses (no job)" "refused" "$([ $rc -ne 0 ] && echo refused || echo rc=0)"
  printf '#!/bin/sh\n#SBATCH --numa-binding=sockets\ntouch %s\n' "$D/marker" >"$D/bad.sbatch"
  timeout 30 sbatch "${N1[@]}" -n1 "$D/bad.sbatch" >/dev/null 2>"$D/err"; rc=$?
  check_eq "bad #SBATCH --numa-binding: sbatch refuses" "refused" "$([ $rc -ne 0 ] && echo refused || echo rc=0)"
  check_grep "bad #SBATCH value: named" "'sockets'" "$D/err"
  SLURM_SPANK__SLURM_SPANK_OPTION_numabind_numa_binding=bogus timeout 30 sbatch "${N1[@]}" -n1 --wrap true >/dev/null 2>"$D/err"; rc=$?
  check_eq "bad value in environment: sbatch refuses" "refused" "$([ $rc -ne 0 ] && echo refused || echo rc=0)"
  for a in "bogus=1" "default=fast" "fallback=maybe" "respect_cpu_bind=perhaps" "devices=zz" \
           "topology=relative.xml" "topology=/x/%q.xml" "mem=all" "default=node default=node"; do
    plugin_args "topology=$ONE $a"
    timeout 30 srun "${N1[@]}" -n1 touch "$D/marker" 2>"$D/err"; rc=$?
    key=${a%%=*}
    check_eq "plugstack '$a': plugin refuses to load, srun fails before launch" "refused,nolaunch,named" \
      "$([ $rc -ne 0 ] && echo refused || echo rc=0),$([ -e "$D/marker" ] && echo launched || echo nolaunch),$(grep -q "numabind: plugstack.conf: .*$key" "$D/err" && echo named || echo unnamed)"
  done
  plugin_args "topology=$ONE"
fi

# ------------------------------------------------------------------ sbatch
if case_on sbatch; then
  plugin_args "topology=$SWAP"
  cat >"$D/job.sbatch" <<EOF
#!/bin/sh
#SBATCH --numa-binding=node,mem=none
$D/report.sh batch
srun -n2 --gpus-per-task=1 $D/report.sh inherited
srun -n2 --gpus-per-task=1 --numa-binding=exclusive,mem=none $D/report.sh override
srun -n2 --gpus-per-task=1 --numa-binding=none $D/report.sh none
EOF
  timeout 90 sbatch --wait "${N1[@]}" -n2 --gpus=2 -o "$D/job.out" "$D/job.sbatch" >/dev/null 2>"$D/err"; rc=$?
  check_eq "sbatch --wait job ran" 0 "$rc"
  for tag in inherited override none; do grep "^R $tag " "$D/job.out" | sort -t= -k2,2n >"$D/out.$tag"; done
  check_eq "#SBATCH --numa-binding reaches every srun step (mode)" "$(per_rank 0:node 1:node)" "$(report_by_rank "$D/out.inherited" mode)"
  check_eq "#SBATCH --numa-binding: step tasks bound to their GPU's node" \
    "$(per_rank "0:node:$(node_cpus "$SWAP" 0)" "1:node:$(node_cpus "$SWAP" 1)")" "$(mc "$D/out.inherited")"
  check_eq "srun's own --numa-binding overrides #SBATCH (exclusive, per-task GPUs)" \
    "$(per_rank "0:exclusive:$(node_cpus "$SWAP" 0)" "1:exclusive:$(node_cpus "$SWAP" 1)")" "$(mc "$D/out.override")"
  check_eq "srun --numa-binding=none overrides #SBATCH" "$(per_rank 0:none 1:none)" "$(report_by_rank "$D/out.none" mode)"
  grep '^R batch ' "$D/job.out" >"$D/out.batch"
  check_eq "batch_step=no (default): the batch shell is not bound" "0:unset" "$(report_by_rank "$D/out.batch" mode)"

  # NEAR: GPU 0 (the one Slurm gives first) is on the node of CPU 0 (the one it allocates
  # first on the idle node), so the GPU's node is inside the job's allocation, which a task never leaves
  plugin_args "topology=$NEAR batch_step=yes"
  timeout 90 sbatch --wait "${N1[@]}" -n1 --gpus=1 -o "$D/job2.out" "$D/job.sbatch" >/dev/null 2>"$D/err"; rc=$?
  grep '^R batch ' "$D/job2.out" >"$D/out.batch"
  g=$(report_by_rank "$D/out.batch" cvd | cut -d: -f2)
  check_eq "batch_step=yes: the batch shell is bound to its GPU ($g)'s node" "0:node:$(node_cpus "$NEAR" "${g:-0}")" \
    "$(report_by_rank "$D/out.batch" mode | cut -d: -f2 | sed 's/^/0:/'):$(report_by_rank "$D/out.batch" cpus | cut -d: -f2)"

  plugin_args "topology=$ONE default=node"
  printf '#!/bin/sh\nsrun -n2 %s/report.sh step\n' "$D" >"$D/job3.sbatch"
  timeout 90 sbatch --wait "${N1[@]}" -n2 --gpus=2 -o "$D/job3.out" "$D/job3.sbatch" >/dev/null 2>"$D/err"
  grep '^R step ' "$D/job3.out" | sort -t= -k2,2n >"$D/out"
  check_eq "plugstack default=node applies to steps of a batch job" \
    "$(per_rank "0:node:$(node_cpus "$ONE" 0)" "1:node:$(node_cpus "$ONE" 1)")" \
    "$(paste -d: <(report_by_rank "$D/out" mode) <(report_by_rank "$D/out" cpus | cut -d: -f2))"
fi

# ------------------------------------------------------------------ site default, respect_cpu_bind
if case_on default; then
  plugin_args "topology=$ONE default=node"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2
  check_eq "default=node without any option: tasks bound" \
    "$(per_rank "0:node:$(node_cpus "$ONE" 0)" "1:node:$(node_cpus "$ONE" 1)")" \
    "$(paste -d: <(report_by_rank "$D/out" mode) <(report_by_rank "$D/out" cpus | cut -d: -f2))"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --cpu-bind=cores
  check_eq "respect_user_bind=yes (default): explicit --cpu-bind wins over the site default" \
    "$(per_rank 0:unset 1:unset)"$'\n'"$BASE" "$(report_by_rank "$D/out" mode)"$'\n'"$(report_by_rank "$D/out" cpus)"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --cpu-bind=cores --numa-binding=node
  check_eq "explicit --numa-binding applies even with --cpu-bind" \
    "$(per_rank "0:node:$(node_cpus "$ONE" 0)" "1:node:$(node_cpus "$ONE" 1)")" \
    "$(paste -d: <(report_by_rank "$D/out" mode) <(report_by_rank "$D/out" cpus | cut -d: -f2))"
  plugin_args "topology=$ONE default=node respect_cpu_bind=no"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --cpu-bind=cores
  check_eq "respect_cpu_bind=no: the site default overrides --cpu-bind" \
    "$(per_rank "0:node:$(node_cpus "$ONE" 0)" "1:node:$(node_cpus "$ONE" 1)")" \
    "$(paste -d: <(report_by_rank "$D/out" mode) <(report_by_rank "$D/out" cpus | cut -d: -f2))"
  plugin_args "topology=$ONE default=exclusive mem=none"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "explicit --numa-binding overrides default=" "$(per_rank 0:node 1:node)" "$(report_by_rank "$D/out" mode)"
fi

# ------------------------------------------------------------------ fallback
if case_on fallback; then
  plugin_args "topology=$NOGPU default=node"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2
  check_untouched "site default, no GPU in topology: tasks run (rc 0) untouched, no NUMABIND_*, nothing said"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "fallback=warn (default), explicit mode, no GPU in topology: unbound, NUMABIND_MODE=none" \
    "0"$'\n'"$(per_rank 0:none 1:none)"$'\n'"$BASE" "$RC"$'\n'"$(report_by_rank "$D/out" mode)"$'\n'"$(report_by_rank "$D/out" cpus)"
  check_eq "fallback=warn: one warning per step naming the reason and the plugstack key" 1 \
    "$(grep -c '^numabind: warning: node n1: --numa-binding=node: no accelerator on this node (plugstack devices=.*running unbound (fallback=warn)' "$D/err")"
  plugin_args "topology=$NOGPU default=node fallback=fail"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2
  check_eq "fallback=fail, site default, no GPU: the site default does nothing (tasks run)" "0,2" "$RC,$(wc -l <"$D/out" | tr -d ' ')"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "fallback=fail, explicit mode, no GPU: srun fails, no task ran" "failed,0" \
    "$([ $RC -ne 0 ] && echo failed || echo rc=0),$(wc -l <"$D/out" | tr -d ' ')"
  check_grep "fallback=fail: clear error on srun's stderr" "error: numabind: node n1: .*no accelerator.*\(fallback=fail\)" "$D/err"
  plugin_args "topology=$ONE fallback=fail"
  probe_step "$D" "${N1[@]}" -n3 -O --gpus-per-node=2 --numa-binding=exclusive
  check_eq "fallback=fail, exclusive with 3 tasks on 2 PUs: srun fails" "failed" "$([ $RC -ne 0 ] && echo failed || echo rc=0)"
  check_grep "fallback=fail: impossible exclusive split reported" "error: numabind: .*exclusive binding impossible" "$D/err"
  check_eq "fallback=fail: the cause said once for the step, not per task, not as 'numabind: error:'" "1 0" \
    "$(grep -c 'numabind:' "$D/err") $(grep -c 'numabind: error:' "$D/err")"
  plugin_args "topology=$ONE fallback=warn"
  probe_step "$D" "${N1[@]}" -n3 -O --gpus-per-node=2 --numa-binding=exclusive
  check_eq "fallback=warn, exclusive with 3 tasks on 2 PUs: 3 tasks run unbound" "0,3,none" \
    "$RC,$(wc -l <"$D/out" | tr -d ' '),$(report_by_rank "$D/out" mode | cut -d: -f2 | sort -u | tr '\n' ' ' | xargs)"
  plugin_args "topology=$D/topo/missing-%n.xml fallback=fail"
  probe_step "$D" "${N1[@]}" -n1 --gpus=1 --numa-binding=node
  check_grep "fallback=fail, missing topology file: error names the file" "error: numabind: .*missing-n1.xml" "$D/err"
fi

# ------------------------------------------------------------------ the step engine beside the plugin
# The front (spank_numabind.so) loads numabind_stepd.so only for steps that bind: without it a
# step that does not bind is untouched, a step that binds follows fallback= and says why once.
if case_on engine; then
  mv "$D/numabind_stepd.so" "$D/numabind_stepd.so.away"
  plugin_args "topology=$ONE"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2
  check_untouched "engine missing, nothing asked: tasks run as Slurm placed them, nothing said"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=none
  check_eq "engine missing, --numa-binding=none: NUMABIND_MODE=none, nothing said" \
    "0"$'\n'"$(per_rank 0:none 1:none)"$'\n' "$RC"$'\n'"$(report_by_rank "$D/out" mode)"$'\n'"$(cat "$D/err")"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "engine missing, fallback=warn: tasks run unbound (NUMABIND_MODE=none)" \
    "0"$'\n'"$(per_rank 0:none 1:none)"$'\n'"$BASE" "$RC"$'\n'"$(report_by_rank "$D/out" mode)"$'\n'"$(report_by_rank "$D/out" cpus)"
  check_eq "engine missing, fallback=warn: one warning per step naming the missing file" 1 \
    "$(grep -c "^numabind: warning: node n1: cannot find the step engine $D/numabind_stepd.so: .*running unbound (fallback=warn)" "$D/err")"
  plugin_args "topology=$ONE fallback=fail"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "engine missing, fallback=fail: srun fails, no task ran" "failed,0" \
    "$([ $RC -ne 0 ] && echo failed || echo rc=0),$(wc -l <"$D/out" | tr -d ' ')"
  check_grep "engine missing, fallback=fail: the error names the file" "error: numabind: node n1: cannot find the step engine .*numabind_stepd.so" "$D/err"
  mv "$D/numabind_stepd.so.away" "$D/numabind_stepd.so"
  chmod 0777 "$D/numabind_stepd.so"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_grep "engine writable by others: not loaded, said why" "error: numabind: .*numabind_stepd.so is writable by group or others" "$D/err"
  chmod 0755 "$D/numabind_stepd.so"
  plugin_args "topology=$ONE"
  probe_step "$D" "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=node
  check_eq "engine back: the step binds again" "$(per_rank 0:node 1:node)" "$(report_by_rank "$D/out" mode)"
fi

# ------------------------------------------------------------------ no topology=: live discovery + per-boot cache
# Without topology= slurmstepd discovers this machine and writes /run/numabind as root on the
# first step; later steps load that file. The accelerator is this machine's first Ethernet
# function (picked with devices=class=0x0200; found here from sysfs, independently of hwloc).
if case_on cache; then
  NIC=$(for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/class")" = 0x020000 ] && basename "$d"; done | sort | head -n1)
  if [ -z "$NIC" ]; then
    skip_case "cache: this machine has no Ethernet PCI function to stand in for a GPU"
  else
    before=$(ls /run/numabind/topology-*.xml 2>/dev/null)
    # The step engine's model cache (model-*.txt) would spare the step hwloc altogether: start
    # without one, as the first step after a boot does (the files are rebuilt on demand).
    rm -f /run/numabind/model-*.txt
    plugin_args "devices=class=0x0200 fallback=fail"
    probe_step "$D" "${N1[@]}" -n1 --gpus=1 --numa-binding=node,verbose
    check_grep "no topology=: live discovery finds the device ($NIC)" "numabind: node n1 task 0 .*GPU 0 \\($NIC, NUMA" "$D/err"
    cache=$(ls /run/numabind/topology-*.xml 2>/dev/null | head -n1)
    check_eq "first step wrote the per-boot cache, root-owned 0644 in a root-owned 0755 dir" "root:644:root:755" \
      "$( [ -n "$cache" ] && stat -c %U:%a "$cache"):$(stat -c %U:%a /run/numabind 2>/dev/null)"
    model=$(ls /run/numabind/model-*.txt 2>/dev/null | head -n1)
    check_eq "first step wrote the model cache, root-owned 0644" "root:644" "$( [ -n "$model" ] && stat -c %U:%a "$model")"
    mtime=$( [ -n "$cache" ] && stat -c %Y.%y "$cache")
    model_mtime=$( [ -n "$model" ] && stat -c %Y.%y "$model")
    probe_step "$D" "${N1[@]}" -n1 --gpus=1 --numa-binding=node,verbose
    check_eq "second step reads the cache (bound, file not rewritten)" "0:node:$mtime" \
      "$RC:$(report_by_rank "$D/out" mode | cut -d: -f2):$( [ -n "$cache" ] && stat -c %Y.%y "$cache")"
    check_eq "second step reads the model cache (not rewritten)" "$model_mtime" "$( [ -n "$model" ] && stat -c %Y.%y "$model")"
    # A model cache cut at a line boundary (its PCI lines lost, the accelerator with them) is
    # refused and rebuilt, the step still binds to the device, and slurmd's log says so once
    # per boot (the marker is removed first: earlier runs this boot said it already).
    if [ -n "$model" ]; then
      rm -f /run/numabind.reported.model
      for round in 1 2; do
        head -n "$(grep -n '^pci ' "$model" | head -n1 | cut -d: -f1)" "$model" | head -n -1 >"$model.cut" && mv "$model.cut" "$model"
        probe_step "$D" "${N1[@]}" -n1 --gpus=1 --numa-binding=node,verbose
        check_eq "cut model cache, step $round: refused, the step still finds the device" "0:node" "$RC:$(report_by_rank "$D/out" mode | cut -d: -f2)"
      done
      check_eq "cut model cache: rebuilt whole (an end line again)" "1" "$(tail -n1 "$model" | grep -c '^end [0-9]* [0-9a-f]\{16\}$')"
      check_eq "cut model cache: slurmd's log says it once per boot" "1" \
        "$(cat "$D"/log/slurmd.*.log | grep -c "model cache ($model): unusable (model cache: cut short")"
    fi
    [ -z "$before" ] && rm -f /run/numabind/topology-*.xml
  fi
fi

# ------------------------------------------------------------------ non-root user
if case_on user; then
  plugin_args "topology=$SWAP"
  su nbtest -s /bin/sh -c ". '$D/env.sh'; cd /tmp; timeout 60 srun -N1 -w n1 -n2 --gpus-per-task=1 --numa-binding=node,mem=none,verbose '$D/report.sh'" \
    >"$D/out.raw" 2>"$D/err"
  grep '^R ' "$D/out.raw" | sort -t= -k2,2n >"$D/out"
  check_eq "job of user nbtest: tasks bound to their GPU's node" \
    "$(per_rank "0:node:$(node_cpus "$SWAP" 0)" "1:node:$(node_cpus "$SWAP" 1)")" \
    "$(paste -d: <(report_by_rank "$D/out" mode) <(report_by_rank "$D/out" cpus | cut -d: -f2))"
  check_eq "job of user nbtest: verbose lines" 2 "$(grep -c '^numabind: node n1 task' "$D/err")"
fi

# ------------------------------------------------------------------ two nodes, two topologies
if case_on nodes; then
  plugin_args "topology=$D/topo/node-%n.xml"
  # the whole of both nodes (a step inside an allocation uses all of its CPUs): each GPU's node
  # is inside the allocation, which a task never leaves
  J=$(timeout 60 salloc --no-shell -N2 --exclusive --gpus-per-node=1 2>&1 | grep -o 'Granted job allocation [0-9]*' | awk '{print $4}')
  probe_step "$D" --jobid="$J" -N2 -n2 --gpus-per-node=1 --numa-binding=node,mem=none
  scancel "$J" >/dev/null 2>&1
  g1=$(awk '/node=n1/' "$D/out" | report_by_rank /dev/stdin cvd | cut -d: -f2)
  g2=$(awk '/node=n2/' "$D/out" | report_by_rank /dev/stdin cvd | cut -d: -f2)
  check_eq "2 nodes: each node plans from its own topology (topology=...-%n.xml)" \
    "n1:$(node_cpus "$D/topo/node-n1.xml" "${g1:-0}") n2:$(node_cpus "$D/topo/node-n2.xml" "${g2:-0}")" \
    "n1:$(awk '/node=n1/' "$D/out" | report_by_rank /dev/stdin cpus | cut -d: -f2) n2:$(awk '/node=n2/' "$D/out" | report_by_rank /dev/stdin cpus | cut -d: -f2)"
  check_eq "2 nodes: both tasks bound (mode node)" "$(per_rank 0:node 1:node)" "$(report_by_rank "$D/out" mode)"
fi

# ------------------------------------------------------------------ PMIx
if case_on pmix; then
  plugin_args "topology=$SWAP"
  probe_step "$D" "${N1[@]}" -n2 --mpi=pmix --gpus-per-task=1 --numa-binding=node,mem=none
  check_eq "--mpi=pmix: tasks run and are bound, PMIx env intact" \
    "0:node:$(node_cpus "$SWAP" 0):0 1:node:$(node_cpus "$SWAP" 1):1" \
    "$(paste -d: <(mc "$D/out") <(report_by_rank "$D/out" pmix | cut -d: -f2) | tr '\n' ' ' | xargs)"
  if command -v mpicc >/dev/null && mpicc -O1 -o "$D/mpi_hello" "$HERE/mpi_hello.c" 2>"$D/err"; then
    timeout 60 srun "${N1[@]}" -n2 --mpi=pmix --gpus-per-task=1 --numa-binding=node,mem=none "$D/mpi_hello" \
      >"$D/out.raw" 2>"$D/err"; RC=$?
    check_eq "--mpi=pmix MPI program: MPI_Init/Allreduce work under the plugin, ranks bound" \
      "0|rank=0 size=2 local=0 cpus=$(node_cpus "$SWAP" 0) sum=1|rank=1 size=2 local=1 cpus=$(node_cpus "$SWAP" 1) sum=1" \
      "$RC|$(grep '^M ' "$D/out.raw" | sed 's/^M //' | sort | paste -sd'|')"
  else
    echo "note - mpicc not usable: MPI program case skipped"
  fi
fi

# ------------------------------------------------------------------ overhead
if case_on overhead; then
  cat >"$D/bench.sh" <<EOF
#!/bin/bash
# steps inside one allocation: empty plugstack, plugin with default none, plugin binding
t() { local s=\$(date +%s%N); for i in 1 2 3 4 5 6 7 8 9 10; do srun -n2 true; done; echo \$(( (\$(date +%s%N) - s) / 10000 )); }
: >"$D/plugstack.conf"; t >/dev/null
: >"$D/plugstack.conf"; a=\$(t)
echo "required $D/spank_numabind.so topology=$ONE" >"$D/plugstack.conf"; b=\$(t)
echo "required $D/spank_numabind.so topology=$ONE default=exclusive" >"$D/plugstack.conf"; c=\$(t)
: >"$D/plugstack.conf"; a2=\$(t)
echo "required $D/spank_numabind.so topology=$ONE default=exclusive" >"$D/plugstack.conf"; c2=\$(t)
echo "BENCH none=\$a,\$a2 loaded=\$b bind=\$c,\$c2"
EOF
  chmod 0755 "$D/bench.sh"
  line=$(timeout 120 salloc "${N1[@]}" -n2 --gpus-per-node=2 "$D/bench.sh" 2>/dev/null | grep '^BENCH')
  # microseconds per step -> "x.y" ms
  fmt() { awk -v v="$1" 'BEGIN { printf "%.1f", v / 1000 }'; }
  if [ -n "$line" ]; then
    set -- $(echo "$line" | sed 's/BENCH //; s/[a-z]*=//g; s/,/ /g')
    echo "info - per-step time (srun -n2 true, mean of 10, ms): no plugin $(fmt $1)/$(fmt $2)," \
         "plugin loaded (default none) $(fmt $3), plugin binding (exclusive) $(fmt $4)/$(fmt $5)"
    pass "overhead measured"
  else
    fail "overhead: bench did not run"
  fi
  plugin_args "topology=$ONE"
fi

# ------------------------------------------------------------------ smt=1 and omp
if case_on opts; then
  # This machine's CPUs described as one core of two threads, both GPUs on it.
  gen --synthetic "package:1 core:1 pu:2" -o "$D/topo/smt.xml" --gpu package:0=$B0 --gpu package:0=$B1
  chmod 0644 "$D/topo/smt.xml"
  SMT=$D/topo/smt.xml
  first=$(cpu_ranges "$(hwloc-calc --input "$SMT" --no-smt --po -I pu all)")   # hwloc: one PU per core
  both=$(cpu_ranges "$(hwloc-calc --input "$SMT" --po -I pu all)")
  plugin_args "topology=$SMT"
  for mode in node socket exclusive core-complex; do
    probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=$mode,smt=1,mem=none
    check_eq "srun --numa-binding=$mode,smt=1: one PU per core ($first)" "0:$mode:$first" "$(mc "$D/out")"
  done
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=node,mem=none
  check_eq "srun --numa-binding=node: both siblings ($both)" "0:node:$both" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --hint=nomultithread --numa-binding=node,mem=none
  check_eq "srun --hint=nomultithread --numa-binding=node: one PU per core ($first)" "0:node:$first" "$(mc "$D/out")"
  plugin_args "topology=$SMT smt=1"
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=node,mem=none
  check_eq "plugstack smt=1: one PU per core ($first)" "0:node:$first" "$(mc "$D/out")"
  probe_step "$D" "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=node,smt=all,mem=none
  check_eq "plugstack smt=1, srun smt=all: both siblings" "0:node:$both" "$(mc "$D/out")"
  # omp: one place per core of the task's CPUs, the core's PUs in it (hwloc-calc core:0 here)
  omp_line() {  # srun args... -> "OMP <threads> <places> <bind>" of task 0
    timeout 60 srun "${N1[@]}" -n1 --gpus-per-node=1 "$@" \
      sh -c 'echo "OMP ${OMP_NUM_THREADS-unset} ${OMP_PLACES-unset} ${OMP_PROC_BIND-unset}"' >"$D/out.raw" 2>"$D/err"
    grep '^OMP ' "$D/out.raw"
  }
  unset OMP_NUM_THREADS OMP_PLACES OMP_PROC_BIND   # srun passes the environment on
  plugin_args "topology=$SMT"
  core0=$(hwloc-calc --input "$SMT" --po -I pu core:0)
  check_eq "srun --numa-binding=node,omp: OMP_NUM_THREADS=1 (cores), OMP_PLACES={$core0}, close" \
    "OMP 1 {$core0} close" "$(omp_line --numa-binding=node,omp,mem=none)"
  check_eq "srun --numa-binding=node,omp,smt=1: OMP_PLACES={$first}" \
    "OMP 1 {$first} close" "$(omp_line --numa-binding=node,omp,smt=1,mem=none)"
  check_eq "srun --numa-binding=node,omp keeps the user's OMP_NUM_THREADS=5" \
    "OMP 5 {$core0} close" "$(OMP_NUM_THREADS=5 omp_line --numa-binding=node,omp,mem=none)"
  check_eq "srun --numa-binding=node (no omp): no OMP_* set" \
    "OMP unset unset unset" "$(omp_line --numa-binding=node,mem=none)"
  plugin_args "topology=$SMT omp=yes verbose"
  out=$(OMP_PROC_BIND=spread omp_line --numa-binding=node,mem=none)
  check_eq "plugstack omp=yes: set, the user's OMP_PROC_BIND=spread kept" "OMP 1 {$core0} spread" "$out"
  check_grep "verbose: the task line says which OMP_* were set and kept" \
    "OMP_NUM_THREADS=1 OMP_PLACES=\{$core0\} set; OMP_PROC_BIND kept" "$D/err"
  # A real OpenMP program (libgomp): its places are the task's cores (hwloc-calc), each thread on its place.
  if gcc -fopenmp -O1 -o "$D/omp_probe" "$HERE/../cli/omp_probe.c" 2>/dev/null; then
    chmod 0755 "$D/omp_probe"
    plugin_args "topology=$ONE"
    timeout 60 srun "${N1[@]}" -n1 -c2 --gpus-per-node=2 --numa-binding=node,omp,mem=none "$D/omp_probe" >"$D/out.raw" 2>"$D/err"
    RC=$?
    home=$(node_cpus "$ONE" 0)
    places=$(for c in $(hwloc-calc --input "$ONE" --intersect core $(hwloc-calc --input "$ONE" -I numa --li pci="$B0" | tr , '\n' | sed 's/^/numa:/') | tr , ' '); do
      hwloc-calc --input "$ONE" --po -I pu core:$c; done | paste -sd' ')
    got=$(nb_python - "$D/out.raw" $places <<'PY'
import sys
from cpulist import ids
want = sys.argv[2:]
places, threads = [], {}
for l in open(sys.argv[1]):
    w = l.split()
    if l.startswith("place "):
        places.append(w[3])
    elif l.startswith("thread "):
        threads[int(w[1])] = (int(w[5]), ids(w[7]))
ok = places == want and len(threads) == len(want) and all(
    0 <= p < len(places) and ran <= ids(places[p]) for p, ran in threads.values())
print("ok" if ok else "places %s threads %s, want %s" % (places, threads, want))
PY
)
    check_eq "srun --numa-binding=node,omp: a libgomp program has one place per core of $home, one thread on each" "0 ok" "$RC $got"
  else
    skip_case "srun with a libgomp program: gcc -fopenmp failed"
  fi
  srun "${N1[@]}" -n1 --gpus-per-node=1 --numa-binding=node,smt=3 true >"$D/out.raw" 2>"$D/err"
  RC=$?
  check_eq "srun --numa-binding=node,smt=3: refused by srun" "1" "$([ "$RC" -ne 0 ] && grep -c "smt=3.*valid: smt=1, smt=all" "$D/err")"
  plugin_args "topology=$ONE"
fi

# ------------------------------------------------------------------ salloc
if case_on salloc; then
  plugin_args "topology=$ONE"
  timeout 60 salloc "${N1[@]}" -n2 --gpus-per-node=2 --numa-binding=exclusive \
    srun -n2 "$D/report.sh" >"$D/out.raw" 2>"$D/err"
  grep '^R ' "$D/out.raw" | sort -t= -k2,2n >"$D/out"
  check_eq "salloc --numa-binding reaches the steps of the allocation" \
    "$(per_rank "0:exclusive:$(core_cpus "$ONE" 0)" "1:exclusive:$(core_cpus "$ONE" 1)")" "$(mc "$D/out")"
fi

finish
