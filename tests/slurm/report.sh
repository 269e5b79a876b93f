#!/bin/sh
# Task probe for the SPANK tests: one line with what the task really has.
#   R <tag> rank=<global> local=<local> node=<node> cvd=<CUDA_VISIBLE_DEVICES> cpus=<Cpus_allowed_list>
#     cgcpus=<cgroup cpuset> mem=<policy>:<nodes> mode=<NUMABIND_MODE> dev=<NUMABIND_DEVICE> cpusenv=<NUMABIND_CPUS>
#     devs=<NUMABIND_DEVICES> opens=<fake GPUs open(2) lets it open> uses=<CUDA_VISIBLE_DEVICES over those>
#     home=<PUs local to the used GPUs> inhome=yes|no|nohome|- nics=<NUMABIND_NICS> ucx=<UCX_NET_DEVICES>
# CPUs are read back from /proc/self/status, the memory policy with get_mempolicy(2).
# With NBPROBE_DEVDIR (fake GPU files DIR/<node>/nvidiaN, N = PCI order) and NBPROBE_HOMES
# (the PUs local to each of them, "|"-separated in PCI order, from hwloc-calc on the node's
# XML, computed once by the test) the probe also says which GPUs the task
# can open (EPERM: denied by the device cgroup; success or ENXIO: held), which of them its
# CUDA runtime would use (CUDA_VISIBLE_DEVICES counts over the openable ones), the CPUs
# local to those (hwloc-calc on the XML) and whether its own CPUs lie there (nohome: the
# step's cpuset holds none of them, and the task's CPUs are inside that cpuset).
# CPU lists are read and written by tests/lib/cpulist.py: beside this file where install_plugin
# (plugin_test_env.sh) put both, in ../lib when it runs from the source tree.
tag=${1:-task}
here=$(dirname "$0")
PYTHONPATH=$here:$here/../lib${PYTHONPATH:+:$PYTHONPATH} python3 - "$tag" <<'PY'
import ctypes, errno, os, platform, sys
from cpulist import fmt, ids
e = os.environ
tag = sys.argv[1]
cpus = [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith("Cpus_allowed_list")][0]
try:
    cg = open("/sys/fs/cgroup/cpuset%s/cpuset.effective_cpus" % open("/proc/self/cpuset").read().strip()).read().strip()
except OSError:
    cg = "-"
names = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local", 5: "preferred_many"}
libc = ctypes.CDLL(None, use_errno=True)
mode = ctypes.c_int(0)
mask = (ctypes.c_ulong * 16)()
nr = 239 if platform.machine() == "x86_64" else 236  # get_mempolicy
if libc.syscall(nr, ctypes.byref(mode), mask, ctypes.c_ulong(16 * 64), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
    mem = "error"
else:
    m = mode.value & ~((1 << 15) | (1 << 14))
    mem = "%s:%s" % (names.get(m, str(m)), ",".join(str(i) for i in range(16 * 64) if mask[i // 64] >> (i % 64) & 1))

opens = uses = home = inhome = "-"
devdir, homes = e.get("NBPROBE_DEVDIR"), e.get("NBPROBE_HOMES", "").split("|")
if devdir:
    held, i = [], 0
    while os.path.exists("%s/%s/nvidia%d" % (devdir, e.get("SLURMD_NODENAME", "?"), i)):
        try:
            os.close(os.open("%s/%s/nvidia%d" % (devdir, e.get("SLURMD_NODENAME", "?"), i), os.O_RDONLY | os.O_NONBLOCK))
            held.append(i)
        except OSError as err:
            if err.errno in (errno.ENXIO, errno.ENODEV): held.append(i)
        i += 1
    used = held
    if "CUDA_VISIBLE_DEVICES" in e:
        used = [held[int(x)] for x in e["CUDA_VISIBLE_DEVICES"].split(",") if x != "" and int(x) < len(held)]
    opens, uses = ",".join(map(str, held)), ",".join(map(str, used))
    if used and len(homes) > max(used):
        pus = set()
        for d in used:
            pus |= ids(homes[d])
        home = fmt(pus)
        # "nohome": the step's cpuset has no CPU local to the GPU(s); only the nearest are possible
        allowed = ids(cg) if cg != "-" else None
        if allowed is not None and not (pus & allowed):
            inhome = "nohome" if ids(cpus) <= allowed else "no"
        else:
            inhome = "yes" if ids(cpus) <= pus else "no"
print("R %s rank=%s local=%s node=%s cvd=%s cpus=%s cgcpus=%s mem=%s mode=%s dev=%s cpusenv=%s pmix=%s devs=%s opens=%s uses=%s home=%s inhome=%s nics=%s ucx=%s" % (
    tag, e.get("SLURM_PROCID", "?"), e.get("SLURM_LOCALID", "?"), e.get("SLURMD_NODENAME", "?"),
    e.get("CUDA_VISIBLE_DEVICES", "unset"), cpus, cg, mem, e.get("NUMABIND_MODE", "unset"),
    e.get("NUMABIND_DEVICE", "unset"), e.get("NUMABIND_CPUS", "unset"), e.get("PMIX_RANK", "unset"),
    e.get("NUMABIND_DEVICES", "unset"), opens or "none", uses or "none", home, inhome,
    e.get("NUMABIND_NICS", "unset"), e.get("UCX_NET_DEVICES", "unset")))
PY
