#!/usr/bin/env bash
# shellcheck disable=SC2317  # helpers (rc, row, ...) are called from the strings check eval's
# tests/fault/fault_matrix.sh — the fault matrix of `numabind run` (SECURITY.md).
# Each fault is run under --fallback fail and --fallback warn and checked against its
# documented outcome:
#   fail: exit 1 and one "numabind: error: ..." line naming the cause; the program never runs
#   warn: the program runs unbound (NUMABIND_MODE=none, the CPU affinity and memory
#         policy numabind found), exit 0, one "...; running unbound (--fallback warn)" line
#   bound: neither fails; the task is bound and a "numabind: warning: ..." names the oddity
#   usage: exit 2 under both (bad explicit input is never silently ignored)
# Usage: fault_matrix.sh NUMABIND_BINARY GEN_TOPOLOGY_PY   (root for the cgroup cases)
set -u
NB=$1
GEN=$2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
CG=""
cleanup() {
  [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"
on_fail() { show "$WORK/err" 5 stderr; }

# What the program sees: its affinity, memory policy line and NUMABIND_MODE.
PROBE='echo "cpus=$(awk "/Cpus_allowed_list/{print \$2}" /proc/self/status) mode=${NUMABIND_MODE:-unset} ran"; grep -m1 -o " \(bind\|prefer\|interleave\|default\)[^ ]*" /proc/self/numa_maps | head -1'
ORIG_CPUS=$(awk '/Cpus_allowed_list/{print $2}' /proc/self/status)
nb() { "${PREFIX[@]}" "$NB" "$@" >"$WORK/out" 2>"$WORK/err"; echo $? >"$WORK/rc"; }
rc() { cat "$WORK/rc"; }
PREFIX=()

# fault_case NAME EXPECT(fail|bound|usage) PATTERN ARGS...  — runs under both fallbacks.
#   fail:  fail -> exit 1 + "error: ...PATTERN"; warn -> ran unbound with the original
#          affinity + "PATTERN...; running unbound"
#   bound: both exit 0, program ran bound (NUMABIND_MODE is the mode), warning PATTERN
#   usage: both exit 2 naming PATTERN, program not run
fault_case() {
  local name=$1 expect=$2 pattern=$3
  shift 3
  nb run --fallback fail "$@" -- sh -c "$PROBE"
  case $expect in
    fail)
      check "$name [fallback=fail]: exit 1, error names it, program not run" \
        eval '[ $(rc) = 1 ] && grep -q "^numabind: error: .*$pattern" "$WORK/err" && ! grep -q ran "$WORK/out"' ;;
    bound)
      check "$name [fallback=fail]: bound with a warning" \
        eval '[ $(rc) = 0 ] && grep -q "mode=[a-z]" "$WORK/out" && ! grep -q "mode=none" "$WORK/out" && grep -q "warning: .*$pattern" "$WORK/err"' ;;
    usage)
      check "$name [fallback=fail]: usage error, exit 2" \
        eval '[ $(rc) = 2 ] && grep -q "$pattern" "$WORK/err" && ! grep -q ran "$WORK/out"' ;;
  esac
  nb run --fallback warn "$@" -- sh -c "$PROBE"
  case $expect in
    fail)
      check "$name [fallback=warn]: runs unbound (affinity $ORIG_CPUS kept, default mempolicy)" \
        eval '[ $(rc) = 0 ] && grep -q "cpus=$ORIG_CPUS mode=none ran" "$WORK/out" && grep -q " default" "$WORK/out" && grep -q "warning: .*$pattern.*running unbound" "$WORK/err"' ;;
    bound)
      check "$name [fallback=warn]: bound with a warning" \
        eval '[ $(rc) = 0 ] && grep -q "mode=[a-z]" "$WORK/out" && ! grep -q "mode=none" "$WORK/out" && grep -q "warning: .*$pattern" "$WORK/err"' ;;
    usage)
      check "$name [fallback=warn]: usage error, exit 2 (not a fallback case)" \
        eval '[ $(rc) = 2 ] && grep -q "$pattern" "$WORK/err" && ! grep -q ran "$WORK/out"' ;;
  esac
}

# ---- topologies: this machine's XML with fake GPUs, and synthetic machines ----
python3 "$GEN" -o "$WORK/gpu.xml" --gpu package:0 --gpu package:0 >/dev/null 2>&1 || { echo "gen_topology failed"; exit 1; }
python3 "$GEN" -o "$WORK/nogpu.xml" >/dev/null 2>&1
# Two NUMA nodes (the machine's first PUs, one per node): a machine-level device is then
# a real guess worth a warning (with one NUMA node every device is local and nothing is said).
p0=$(hwloc-calc --po -I pu pu:0); p1=$(hwloc-calc --po -I pu pu:1 2>/dev/null || echo "$p0")
lstopo-no-graphics --input "node:2 core:1 pu:1(indexes=$p0,$p1)" --of xml - >"$WORK/machine.syn.xml" 2>/dev/null
python3 "$GEN" -i "$WORK/machine.syn.xml" -o "$WORK/machine.xml" --gpu machine >/dev/null 2>&1
python3 "$GEN" -o "$WORK/machine1.xml" --gpu machine >/dev/null 2>&1
echo "this is not XML" >"$WORK/garbage.xml"
# PUs 4094-4095 only: CPUs this kernel does not have.
lstopo-no-graphics --input "node:1 core:2 pu:1(indexes=4094,4095)" --of xml - >"$WORK/far.syn.xml" 2>/dev/null
python3 "$GEN" -i "$WORK/far.syn.xml" -o "$WORK/far.xml" --gpu machine >/dev/null 2>&1
NPU=$(hwloc-calc -N pu all)
NCORE=$(hwloc-calc -N core all)
R=(--local-rank 0 --ntasks 1)

# 1. topology cannot be loaded
fault_case "topology_missing" fail "cannot read topology file" --topology "$WORK/missing.xml" "${R[@]}"
fault_case "topology_garbage" fail "could not load the topology" --topology "$WORK/garbage.xml" "${R[@]}"
# 2. no accelerator
fault_case "no_accelerator" fail "no accelerator found" --topology "$WORK/nogpu.xml" "${R[@]}"
# 3. device index out of range (explicit input: usage error under both fallbacks)
fault_case "device_out_of_range_devices" usage "device index 5 in --devices" --topology "$WORK/gpu.xml" --devices 5 "${R[@]}"
export CUDA_VISIBLE_DEVICES=5
fault_case "device_out_of_range_cuda_visible_devices" usage "CUDA_VISIBLE_DEVICES entry 5 out of range" --topology "$WORK/gpu.xml" "${R[@]}"
# 4. UUID without NVML: warned, then local-rank order over all accelerators (bound)
export CUDA_VISIBLE_DEVICES=GPU-0b3e1c2a-6c2b-4e2f-9f3e-000000000000
if ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1; then
  skip_case "uuid_without_nvml (libnvidia-ml.so.1 is installed here)"
else
  fault_case "uuid_without_nvml" bound "is a UUID and NVML is not available" --topology "$WORK/gpu.xml" "${R[@]}"
fi
unset CUDA_VISIBLE_DEVICES
# 6. device with no NUMA node (attached at machine level): local to all nodes, warned
fault_case "device_without_numa_node" bound "has no NUMA affinity" --topology "$WORK/machine.xml" "${R[@]}"
# 6'. the same device on a single-NUMA machine: local to its only node, no warning
nb run --topology "$WORK/machine1.xml" "${R[@]}" --mode node -- sh -c 'echo "mode=$NUMABIND_MODE"'
check "device_without_numa_node on a single-NUMA machine: bound, no warning" \
  eval '[ $(rc) = 0 ] && grep -q "mode=node" "$WORK/out" && ! grep -q "warning" "$WORK/err"'
# 7. empty intersection with the allowed CPUs (topology names CPUs the kernel lacks)
fault_case "allowed_cpus_empty_intersection" fail "none of the CPUs this process may use (.*) is in the topology" --topology "$WORK/far.xml" "${R[@]}"
# 9. PMIx server absent
PREFIX=(env -u PMIX_NAMESPACE -u PMIX_RANK -u PMIX_SERVER_URI -u PMIX_SERVER_URI2 -u PMIX_SERVER_URI3 -u PMIX_SERVER_URI4 -u PMIX_SERVER_URI21 -u PMIX_SERVER_URI41 -u PMIX_SERVER_TMPDIR)
fault_case "pmix_server_absent" fail "--rank-source pmix: " --topology "$WORK/gpu.xml" --rank-source pmix --mode node
PREFIX=()
# 10. more tasks than PUs (exclusive split impossible)
fault_case "more_tasks_than_pus" fail "exclusive binding impossible" --topology "$WORK/gpu.xml" --mode exclusive --ntasks $((NPU + 1)) --local-rank 0

# 8. the kernel refuses or alters the binding (LD_PRELOAD fault shim)
SHIM="$WORK/refuse_shim.so"
if cc -shared -fPIC -O1 -o "$SHIM" "$HERE/refuse_shim.c" -ldl 2>"$WORK/cc.err"; then
  # An ASan-instrumented numabind wants its runtime first in the library list.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
  PREFIX=(env LD_PRELOAD="$SHIM" NB_FAULT=affinity)
  fault_case "sched_setaffinity_refused" fail "sched_setaffinity to CPUs .* failed: Operation not permitted" --topology "$WORK/gpu.xml" "${R[@]}"
  PREFIX=(env LD_PRELOAD="$SHIM" NB_FAULT=mempolicy)
  fault_case "set_mempolicy_refused" fail "set_mempolicy(bind, nodes 0) failed: Operation not permitted" --topology "$WORK/gpu.xml" --mem bind "${R[@]}"
  PREFIX=(env LD_PRELOAD="$SHIM" NB_FAULT=mpolswap)
  fault_case "mempolicy_altered" fail "memory policy is preferred after setting bind" --topology "$WORK/gpu.xml" --mem bind "${R[@]}"
  if [ "$NPU" -ge 2 ]; then
    PREFIX=(env LD_PRELOAD="$SHIM" NB_FAULT=narrow)
    fault_case "affinity_narrowed" fail "narrowed by a cpuset" --topology "$WORK/gpu.xml" --mode node "${R[@]}"
  else
    skip_case "affinity_narrowed (needs 2 PUs)"
  fi
  PREFIX=()
else
  skip_case "kernel-refusal cases (no C compiler: $(head -1 "$WORK/cc.err"))"
fi

# 8'. real kernel, no shim: split-NUMA XML whose node 1 the kernel lacks, mem=bind to the
# GPU's node 1. The planner sees node 1 is not in this process's allowed memory nodes and
# binds memory to the allowed node of the task's CPUs instead, with a warning.
if [ "$NCORE" -ge 2 ]; then
  python3 "$GEN" -o "$WORK/split.xml" --split-numa 2 --gpu numa:1 >/dev/null 2>&1
  fault_case "mem_bind_to_absent_node" bound "memory of NUMA node(s) 1 is not allowed" --topology "$WORK/split.xml" --mem bind "${R[@]}"
else
  skip_case "mem_bind_to_absent_node (needs 2 cores)"
fi

# 5 and 7'. cpuset cgroup cases (root, cgroup v1 cpuset or v2 with the cpuset controller)
make_cpuset() {  # CPUS -> sets CG to a new cpuset cgroup directory
  local cpus=$1
  if [ -d /sys/fs/cgroup/cpuset ] && [ -w /sys/fs/cgroup/cpuset ]; then
    CG=/sys/fs/cgroup/cpuset/numabind-fault.$$
    mkdir -p "$CG" && echo "$cpus" >"$CG/cpuset.cpus" && cat /sys/fs/cgroup/cpuset/cpuset.mems >"$CG/cpuset.mems" && return 0
  elif grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null && [ -w /sys/fs/cgroup ]; then
    CG=/sys/fs/cgroup/numabind-fault.$$
    grep -qw cpuset /sys/fs/cgroup/cgroup.subtree_control || echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    mkdir -p "$CG" && echo "$cpus" >"$CG/cpuset.cpus" && return 0
  fi
  CG=""
  return 1
}
in_cpuset() {  # run the rest of the command line inside $CG
  PREFIX=(sh -c 'echo $$ > "$0/cgroup.procs" 2>/dev/null || echo $$ > "$0/tasks"; exec "$@"' "$CG")
}
if [ "$(id -u)" = 0 ] && [ "$NCORE" -ge 2 ] && make_cpuset "$(hwloc-calc --po -I pu core:0 | cut -d, -f1)"; then
  # 5. the device's home node has no CPU the task may use: nearest allowed CPUs, warned
  python3 "$GEN" -o "$WORK/split.xml" --split-numa 2 --gpu numa:1 >/dev/null 2>&1
  in_cpuset
  ORIG_SAVE=$ORIG_CPUS
  ORIG_CPUS=$(sh -c 'echo $$ > "$0/cgroup.procs" 2>/dev/null || echo $$ > "$0/tasks"; awk "/Cpus_allowed_list/{print \$2}" /proc/self/status' "$CG")
  fault_case "home_node_without_allowed_cpus" bound "no allowed CPU on NUMA node(s) 1 of device(s) 0" --topology "$WORK/split.xml" "${R[@]}"
  # 7'. a topology whose only PU is outside the cpuset: the same refusal as 7
  other=$(hwloc-calc --po -I pu core:1 | cut -d, -f1)
  lstopo-no-graphics --input "node:1 core:1 pu:1(indexes=$other)" --of xml - >"$WORK/other.syn.xml" 2>/dev/null
  python3 "$GEN" -i "$WORK/other.syn.xml" -o "$WORK/other.xml" --gpu machine >/dev/null 2>&1
  fault_case "cpuset_excludes_topology" fail "none of the CPUs this process may use (.*) is in the topology" --topology "$WORK/other.xml" "${R[@]}"
  PREFIX=()
  ORIG_CPUS=$ORIG_SAVE
else
  skip_case "cpuset cgroup cases (need root, 2 cores and a writable cpuset cgroup)"
fi

finish
