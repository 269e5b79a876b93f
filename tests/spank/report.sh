#!/bin/sh
# Task probe for the SPANK tests: one line with what the task really has.
#   R <tag> rank=<global> local=<local> node=<node> cvd=<CUDA_VISIBLE_DEVICES> cpus=<Cpus_allowed_list>
#     cgcpus=<cgroup cpuset> mem=<policy>:<nodes> mode=<NUMABIND_MODE> dev=<NUMABIND_DEVICE> cpusenv=<NUMABIND_CPUS>
# CPUs are read back from /proc/self/status, the memory policy with get_mempolicy(2).
tag=${1:-task}
cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
# the cpuset the task may use (cgroup v1 cpuset controller; "-" when there is none)
cg=$(cat "/sys/fs/cgroup/cpuset$(cat /proc/self/cpuset 2>/dev/null)/cpuset.effective_cpus" 2>/dev/null || echo -)
mem=$(python3 - <<'PY'
import ctypes
names = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local", 5: "preferred_many"}
libc = ctypes.CDLL(None, use_errno=True)
mode = ctypes.c_int(0)
mask = (ctypes.c_ulong * 16)()
# get_mempolicy is syscall 239 on x86_64, 236 on aarch64
import platform
nr = 239 if platform.machine() == "x86_64" else 236
if libc.syscall(nr, ctypes.byref(mode), mask, ctypes.c_ulong(16 * 64), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
    print("error")
else:
    m = mode.value & ~((1 << 15) | (1 << 14))
    nodes = [str(i) for i in range(16 * 64) if mask[i // 64] >> (i % 64) & 1]
    print("%s:%s" % (names.get(m, str(m)), ",".join(nodes)))
PY
)
echo "R $tag rank=${SLURM_PROCID:-?} local=${SLURM_LOCALID:-?} node=${SLURMD_NODENAME:-?} cvd=${CUDA_VISIBLE_DEVICES-unset} cpus=$cpus cgcpus=$cg mem=$mem mode=${NUMABIND_MODE-unset} dev=${NUMABIND_DEVICE-unset} cpusenv=${NUMABIND_CPUS-unset} pmix=${PMIX_RANK-unset}"
