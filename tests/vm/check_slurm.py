#!/usr/bin/env python3
"""Host-side checker of tests/vm/slurm_vm_test.sh (ctest vm_slurm).

    check_slurm.py CASES OUTPUT

CASES  the case table the guest ran (tests/vm/payload/slurm.cases)
OUTPUT the guest's output (tests/vm/payload/slurm-guest.sh: @@FACT, @@LSTOPO, @@CASE ...)

Every expectation comes from facts the guest reported about itself, never from numabind:
NUMA nodes' CPUs and distances and SMT siblings (sysfs), each display-class PCI device's
numa_node/local_cpulist (sysfs) and its local PUs/NUMA nodes (hwloc-calc), cores/PUs/NUMA
nodes (lstopo XML), and, per task (tests/vm/probe.c): Cpus_allowed_list, its cgroup cpuset,
which fake GPU files open(2) lets it open, get_mempolicy and where its touched pages are.
The GPU files are in PCI order: file K is the K-th display-class device by PCI address.
Exit 0 when every check passed, 1 otherwise.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cpulist  # noqa: E402  the one CPU-list parser and formatter (tests/lib/cpulist.py)
from cpulist import ids  # noqa: E402


def fmt(cpus):
    """A CPU set in messages: the kernel's form ("0-2,4"), "(none)" when empty."""
    return cpulist.fmt(cpus) or "(none)"


def hwloc_set(text):
    """hwloc XML bitmap ("0x000000ff" or "0x...,0x..." 32-bit words, high first)."""
    bits, words = set(), [w for w in (text or "").split(",") if w]
    for k, word in enumerate(reversed(words)):
        v = int(word, 16)
        for b in range(32):
            if v >> b & 1:
                bits.add(32 * k + b)
    return bits


class Output:
    def __init__(self, path):
        self.facts, self.cases, self.times, self.lstopo = {}, [], [], []
        self.cluster = []
        cur, in_lstopo = None, False
        for raw in open(path, errors="replace"):
            line = raw.rstrip("\n")
            if in_lstopo:
                if line == "@@END":
                    in_lstopo = False
                else:
                    self.lstopo.append(line)
                continue
            if line.startswith("@@FACT "):
                k, _, v = line[7:].partition("=")
                self.facts[k] = v
            elif line == "@@LSTOPO":
                in_lstopo = True
            elif line.startswith("@@CLUSTER_RC "):
                self.cluster.append(line[13:])
            elif line.startswith("@@CASE "):
                cid, _, checks = line[7:].partition("|")
                cur = {"id": cid, "checks": checks, "out": [], "err": [], "rc": None,
                       "plugstack": [], "srun": "", "time": None}
                self.cases.append(cur)
            elif cur is not None and line.startswith("@@OUT "):
                cur["out"].append(line[6:])
            elif cur is not None and line.startswith("@@ERR "):
                cur["err"].append(line[6:])
            elif cur is not None and line.startswith("@@PLUGSTACK "):
                cur["plugstack"].append(line[12:])
            elif cur is not None and line.startswith("@@SRUN "):
                cur["srun"] = line[7:]
            elif cur is not None and line.startswith("@@RC "):
                cur["rc"] = int(line[5:])
            elif line.startswith("@@TIME "):
                name, _, sec = line[7:].rpartition(" ")
                self.times.append((name, sec))
                if cur is not None and name == cur["id"]:
                    cur["time"] = sec
            elif line == "@@END":
                cur = None


class Machine:
    """The guest as sysfs, hwloc-calc and lstopo describe it (cross-checked)."""

    def __init__(self, out, problems):
        f = out.facts
        self.node_cpus, self.dist = {}, {}
        for k, v in f.items():
            m = re.fullmatch(r"node\.(\d+)\.cpulist", k)
            if m:
                self.node_cpus[int(m.group(1))] = ids(v)
        nodes = sorted(self.node_cpus)
        for n in nodes:
            d = f.get("node.%d.distance" % n, "").split()
            self.dist[n] = {nodes[i]: int(x) for i, x in enumerate(d)}
        self.siblings = {}
        for k, v in f.items():
            m = re.fullmatch(r"cpu\.(\d+)\.siblings", k)
            if m:
                self.siblings[int(m.group(1))] = frozenset(ids(v))
        self.gpus = sorted({k[4:-len(".numa_node")] for k in f if k.startswith("pci.") and k.endswith(".numa_node")})
        self.gpu_node, self.gpu_pus = [], []
        for addr in self.gpus:
            node = int(f["pci.%s.numa_node" % addr])
            pus = ids(f.get("pci.%s.hwloc_pus" % addr))
            local = ids(f.get("pci.%s.local_cpulist" % addr))
            hw_numa = ids(f.get("pci.%s.hwloc_numa" % addr))
            if not (node in self.node_cpus and pus == local == self.node_cpus[node] and hw_numa == {node}):
                problems.append("facts: %s: sysfs numa_node %s (CPUs %s), local_cpulist %s, hwloc PUs %s, "
                                "hwloc NUMA %s disagree" % (addr, node, fmt(self.node_cpus.get(node, ())),
                                                              fmt(local), fmt(pus), fmt(hw_numa)))
            self.gpu_node.append(node)
            self.gpu_pus.append(pus)
        # cores from lstopo, checked against sysfs thread siblings
        self.core_of = {}
        self.cores = []  # in lstopo's (hwloc's logical) order
        try:
            root = ET.fromstring("\n".join(out.lstopo))
            for core in root.iter("object"):
                if core.get("type") != "Core":
                    continue
                pus = frozenset(int(p.get("os_index")) for p in core.iter("object") if p.get("type") == "PU")
                self.cores.append(pus)
                for p in pus:
                    self.core_of[p] = pus
                    if self.siblings.get(p) != pus:
                        problems.append("facts: lstopo core of PU %d is %s, sysfs thread_siblings_list %s"
                                        % (p, fmt(pus), fmt(self.siblings.get(p, ()))))
            for obj in root.iter("object"):
                if obj.get("type") == "NUMANode":
                    n = int(obj.get("os_index"))
                    if hwloc_set(obj.get("cpuset")) != self.node_cpus.get(n):
                        problems.append("facts: lstopo NUMA node %d cpuset %s, sysfs %s"
                                        % (n, fmt(hwloc_set(obj.get("cpuset"))), fmt(self.node_cpus.get(n, ()))))
        except ET.ParseError as e:
            problems.append("facts: lstopo XML does not parse: %s" % e)
        if not self.core_of:
            problems.append("facts: no cores in lstopo's XML")
        self.files = [x for x in f.get("gpu_files", "").split(",") if x]

    def node_of_cpu(self, c):
        return next((n for n, s in self.node_cpus.items() if c in s), None)


def parse_tasks(case):
    tasks = {}
    for line in case["out"]:
        m = re.match(r"\s*(\d+): ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if m:
            tasks.setdefault(int(m.group(1)), {})[m.group(2)] = m.group(3)
            continue
        # tests/cli/omp_probe.c run after the probe (NBPROBE_THEN): its places and threads
        m = re.match(r"\s*(\d+): place (\d+) procs (\S+)$", line)
        if m:
            tasks.setdefault(int(m.group(1)), {}).setdefault("gomp_places", {})[int(m.group(2))] = ids(m.group(3))
            continue
        m = re.match(r"\s*(\d+): thread (\d+) of (\d+) place (-?\d+) cpus (\S+)$", line)
        if m:
            t = tasks.setdefault(int(m.group(1)), {})
            t.setdefault("gomp_threads", {})[int(m.group(2))] = (int(m.group(4)), ids(m.group(5)))
            t["gomp_team"] = int(m.group(3))
    return tasks


def ntasks_of(srun):
    srun = srun[srun.find("srun "):]  # the step's own -n, not salloc's
    m = re.search(r"(?:^| )-n ?(\d+)(?: |$)", srun)
    return int(m.group(1)) if m else 1


class Checker:
    def __init__(self, machine):
        self.m = machine
        self.failed = []  # (case, check, why)
        self.passed = 0

    def check(self, case, name, ok, why=""):
        if ok:
            self.passed += 1
            print("ok   - %s: %s" % (case, name))
        else:
            self.failed.append((case, name, why))
            print("FAIL - %s: %s%s" % (case, name, (": " + why) if why else ""))
        return ok

    def home_of(self, t):
        """The PUs and NUMA nodes of the GPUs this task can open (hwloc-calc's PUs)."""
        gpus = sorted(ids(t.get("opens")))
        pus, nodes = set(), set()
        for g in gpus:
            if g < len(self.m.gpu_pus):
                pus |= self.m.gpu_pus[g]
                nodes.add(self.m.gpu_node[g])
        return gpus, pus, nodes

    def run_case(self, case):
        cid, checks = case["id"], [c for c in case["checks"].split(",") if c]
        tasks = parse_tasks(case)
        n = ntasks_of(case["srun"])
        desc = "; ".join("task %d: cpus=%s cgroup=%s opens=%s mode=%s" % (
            r, t.get("cpus"), t.get("cgroup_cpus"), t.get("opens"), t.get("NUMABIND_MODE", "unset"))
            for r, t in sorted(tasks.items()))
        errs = " | ".join(case["err"][:6])
        if not self.check(cid, "srun exit 0, one probe per task",
                          case["rc"] == 0 and sorted(tasks) == list(range(n)) and
                          all("cpus" in t for t in tasks.values()),
                          "rc=%s, tasks %s of %d; stderr: %s" % (case["rc"], sorted(tasks), n, errs)):
            return
        print("       %s" % desc)
        for e in case["err"]:
            print("       stderr: %s" % e)
        bad = [r for r, t in tasks.items() if t.get("cgroup_cpus", "-") != "-" and
               not ids(t["cpus"]) <= ids(t["cgroup_cpus"])]
        self.check(cid, "every task's CPUs inside its cgroup cpuset", not bad, "tasks %s" % bad)
        if "untouched" not in checks:  # a CPU-only step holds no GPU
            bad = [r for r, t in tasks.items() if not ids(t.get("opens"))]
            self.check(cid, "every task can open a GPU (ConstrainDevices)", not bad, "tasks %s open none" % bad)
        else:
            bad = [r for r, t in tasks.items() if ids(t.get("opens"))]
            self.check(cid, "a CPU-only step's tasks open no GPU (ConstrainDevices)", not bad, "tasks %s open one" % bad)
        for c in checks:
            getattr(self, "c_" + c.split("=")[0])(cid, tasks, case, c)

    # ---- one function per CHECKS keyword (see tests/vm/payload/slurm.cases) ----
    def c_home(self, cid, tasks, case, _):
        why = []
        for r, t in sorted(tasks.items()):
            gpus, pus, nodes = self.home_of(t)
            allowed = ids(t.get("cgroup_cpus")) or set().union(*self.m.node_cpus.values())
            cpus = ids(t["cpus"])
            if pus & allowed and not cpus <= pus:
                why.append("task %d holds GPU(s) %s on node(s) %s (PUs %s) but runs on %s"
                           % (r, gpus, sorted(nodes), fmt(pus), fmt(cpus)))
        self.check(cid, "each task on the NUMA node of the GPU it can open", not why, "; ".join(why))

    def c_cover(self, cid, tasks, case, checks):
        smt1 = "smt1" in case["checks"].split(",")
        why = []
        for r, t in sorted(tasks.items()):
            _, pus, _ = self.home_of(t)
            allowed = ids(t.get("cgroup_cpus")) or set().union(*self.m.node_cpus.values())
            cpus, want = ids(t["cpus"]), pus & allowed
            if smt1:
                cores = {self.m.core_of[c] for c in want}
                missing = [fmt(k) for k in cores if not k & cpus]
                if missing:
                    why.append("task %d misses cores %s of its node" % (r, " ".join(missing)))
            elif not want <= cpus:
                why.append("task %d has %s, its node's allowed PUs are %s" % (r, fmt(cpus), fmt(want)))
        self.check(cid, "node mode: every allowed %s of the GPU's node" % ("core" if smt1 else "PU"),
                   not why, "; ".join(why))

    def c_keep(self, cid, tasks, case, _):
        why = []
        for r, t in sorted(tasks.items()):
            want = int(t.get("SLURM_CPUS_PER_TASK", "1"))
            have = len(ids(t["cpus"]))
            if have < want:
                why.append("task %d has %d CPUs (%s), Slurm allocated %d (-c)" % (r, have, t["cpus"], want))
        self.check(cid, "no task has fewer CPUs than Slurm allocated it", not why, "; ".join(why))

    def c_extend(self, cid, tasks, case, _):
        why = []
        for r, t in sorted(tasks.items()):
            _, pus, nodes = self.home_of(t)
            allowed = ids(t.get("cgroup_cpus")) or set().union(*self.m.node_cpus.values())
            cpus = ids(t["cpus"])
            if not (pus & allowed) <= cpus:
                why.append("task %d lacks its GPU node's PUs %s" % (r, fmt((pus & allowed) - cpus)))
            extra = cpus - pus
            used = {self.m.node_of_cpu(c) for c in extra}
            home = min(nodes) if nodes else None
            for x in used:
                closer = [y for y in self.m.node_cpus if y not in nodes and y != x and home is not None
                          and self.m.dist[home][y] < self.m.dist[home][x]]
                for y in closer:
                    if (self.m.node_cpus[y] & allowed) - cpus:
                        why.append("task %d uses node %d but not all of the closer node %d" % (r, x, y))
        lines = [e for e in case["err"] if re.search("extend", e, re.I)]
        self.check(cid, "home PUs first, then the nearest other node", not why, "; ".join(why))
        self.check(cid, "one stderr line says the binding was extended", len(lines) == 1,
                   "%d lines match /extend/i" % len(lines))

    def c_smt1(self, cid, tasks, case, _):
        why = []
        for r, t in sorted(tasks.items()):
            cpus = ids(t["cpus"])
            doubled = sorted({fmt(self.m.core_of[c]) for c in cpus if len(self.m.core_of[c] & cpus) > 1})
            if doubled:
                why.append("task %d (%s) has both threads of cores %s" % (r, fmt(cpus), " ".join(doubled)))
        self.check(cid, "--hint=nomultithread: at most one hardware thread per core", not why, "; ".join(why))

    def c_omp(self, cid, tasks, case, _):
        """--numa-binding=...,omp: one OpenMP place per core of the task's CPUs (lstopo's cores,
        in its order), each that core's CPUs of the task; one thread per place; close."""
        why = []
        for r, t in sorted(tasks.items()):
            cpus = ids(t["cpus"])
            want = ["{%s}" % ",".join(str(p) for p in sorted(c & cpus)) for c in self.m.cores if c & cpus]
            got = (t.get("OMP_NUM_THREADS"), t.get("OMP_PLACES"), t.get("OMP_PROC_BIND"))
            if got != (str(len(want)), ",".join(want), "close"):
                why.append("task %d (CPUs %s): OMP_NUM_THREADS/OMP_PLACES/OMP_PROC_BIND %s, want %s"
                           % (r, fmt(cpus), got, (str(len(want)), ",".join(want), "close")))
        self.check(cid, "OMP_* = one place per core of the task (lstopo), one thread each, close", not why,
                   "; ".join(why))

    def c_gomp(self, cid, tasks, case, _):
        """A libgomp program in the task (NBPROBE_THEN=omp_probe): its places are the task's
        cores (lstopo), one thread per place, each thread seen only on its place's CPUs."""
        why = []
        for r, t in sorted(tasks.items()):
            cpus = ids(t["cpus"])
            want = [c & cpus for c in self.m.cores if c & cpus]
            places = [t.get("gomp_places", {}).get(p) for p in range(len(t.get("gomp_places", {})))]
            threads = t.get("gomp_threads", {})
            if places != want:
                why.append("task %d: places %s, want %s" % (r, [fmt(p or ()) for p in places], [fmt(p) for p in want]))
            elif t.get("gomp_team") != len(want) or sorted(threads) != list(range(len(want))):
                why.append("task %d: team %s threads %s, want %d" % (r, t.get("gomp_team"), sorted(threads), len(want)))
            else:
                for k, (p, ran) in sorted(threads.items()):
                    if not (0 <= p < len(places) and ran <= places[p]):
                        why.append("task %d thread %d (place %d) ran on %s" % (r, k, p, fmt(ran)))
        self.check(cid, "libgomp: one place per core of the task (lstopo), one thread on each, none off its place",
                   not why, "; ".join(why))

    def c_disjoint(self, cid, tasks, case, _):
        why, seen = [], {}
        for r, t in sorted(tasks.items()):
            for c in ids(t["cpus"]):
                if c in seen:
                    why.append("CPU %d in tasks %d and %d" % (c, seen[c], r))
                seen[c] = r
        self.check(cid, "tasks' CPU sets disjoint", not why, "; ".join(why[:4]))

    def c_bound(self, cid, tasks, case, _):
        modes = {r: t.get("NUMABIND_MODE", "unset") for r, t in tasks.items()}
        unbound = [e for e in case["err"] if re.search("unbound", e, re.I)]
        self.check(cid, "every task bound (NUMABIND_MODE set, nothing runs unbound)",
                   all(m not in ("unset", "none") for m in modes.values()) and not unbound,
                   "modes %s; %s" % (modes, " | ".join(unbound)))

    def c_untouched(self, cid, tasks, case, _):
        modes = {r: t.get("NUMABIND_MODE", "unset") for r, t in tasks.items()}
        said = [e for e in case["err"] if "numabind" in e]
        self.check(cid, "no task touched (no NUMABIND_MODE), nothing said",
                   all(m == "unset" for m in modes.values()) and not said,
                   "modes %s; %s" % (modes, " | ".join(said)))

    def c_plan(self, cid, tasks, case, check):
        """plan=step|exchange: every task's verbose=2 line names the plan it took."""
        want = {"step": "planned the step's plan;", "exchange": "planned the exchange;"}[check.split("=")[1]]
        said = [e for e in case["err"] if want in e]
        self.check(cid, "every task %s" % want.rstrip(";"), len(said) == len(tasks),
                   "%d of %d tasks say so" % (len(said), len(tasks)))

    def c_diffnodes(self, cid, tasks, case, _):
        nodes = {r: sorted(self.home_of(t)[2]) for r, t in tasks.items()}
        self.check(cid, "precondition: the tasks' GPUs are on different NUMA nodes",
                   len({tuple(v) for v in nodes.values()}) >= 2, "GPU nodes per task %s" % nodes)

    def c_fits(self, cid, tasks, case, _):
        """Precondition: the step's CPUs on each GPU's node can hold its tasks' -c (cores when
        --hint=nomultithread: one thread each), so "all on the GPU's node" and "never fewer than
        Slurm allocated" can both hold (else the allocation, not the plugin, is at fault)."""
        smt1 = "smt1" in case["checks"].split(",")
        share = "disjoint" in case["checks"].split(",")
        homes = {}
        for r, t in sorted(tasks.items()):
            _, pus, _ = self.home_of(t)
            allowed = ids(t.get("cgroup_cpus")) or set().union(*self.m.node_cpus.values())
            units = len({self.m.core_of[c] for c in pus & allowed}) if smt1 else len(pus & allowed)
            h = homes.setdefault(frozenset(pus), [units, []])
            h[1].append(int(t.get("SLURM_CPUS_PER_TASK", "1")))
        why = ["node PUs %s: %d allowed %s, tasks need %s" % (fmt(k), u, "cores" if smt1 else "PUs", need)
               for k, (u, need) in homes.items() if u < (sum(need) if share else max(need))]
        self.check(cid, "precondition: the step's CPUs on the GPU's node hold the tasks' -c", not why,
                   "; ".join(why))

    def c_mem(self, cid, tasks, case, check):
        policy = check.split("=", 1)[1]
        mib = int(case["srun"].split()[-1])
        why = []
        for r, t in sorted(tasks.items()):
            _, _, nodes = self.home_of(t)
            want_mode = {"bind": ("bind",), "prefer": ("preferred", "preferred_many")}[policy]
            if t.get("mempolicy") not in want_mode or ids(t.get("mempolicy_nodes")) != nodes:
                why.append("task %d: get_mempolicy %s nodes %s, GPU node(s) %s"
                           % (r, t.get("mempolicy"), t.get("mempolicy_nodes"), sorted(nodes)))
            if not nodes <= ids(t.get("mems_allowed")):
                why.append("task %d: Mems_allowed_list %s lacks its GPU node(s) %s"
                           % (r, t.get("mems_allowed"), sorted(nodes)))
            pages = {int(k[1:]): int(v) for k, v in
                     (p.split("=") for p in t.get("pages_by_node", "").split(",") if p)}
            off = {k: v for k, v in pages.items() if k not in nodes}
            if off or sum(pages.values()) < mib * 256:
                why.append("task %d: %d MiB touched, pages by node %s (GPU node(s) %s)"
                           % (r, mib, t.get("pages_by_node"), sorted(nodes)))
        self.check(cid, "mem=%s: policy on the GPU's node (allowed by Mems_allowed_list), every touched page there" % policy,
                   not why, "; ".join(why))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    table = [l.split("|")[0] for l in open(sys.argv[1]) if l.strip() and l[0] not in "#@"]
    out = Output(sys.argv[2])
    problems = []
    m = Machine(out, problems)
    ch = Checker(m)
    ch.check("facts", "16 PUs on 2 NUMA nodes, SMT pairs, 4 GPUs on 2 nodes",
             len(m.core_of) == 16 and len(m.node_cpus) == 2 and len(m.gpus) == 4 and
             len(set(m.gpu_node)) == 2 and len(m.files) == 4,
             "cores of %d PUs, nodes %s, GPUs %s on %s, files %s" %
             (len(m.core_of), sorted(m.node_cpus), m.gpus, m.gpu_node, m.files))
    ch.check("facts", "sysfs, hwloc-calc and lstopo agree", not problems, "; ".join(problems))
    ch.check("facts", "every cluster start succeeded", out.cluster and all(c == "0" for c in out.cluster),
             "cluster.sh start exit codes %s" % out.cluster)
    seen = {c["id"] for c in out.cases}
    for cid in table:
        ch.check(cid, "case ran", cid in seen, "no @@CASE block (guest timed out or cluster failed?)")
    for case in out.cases:
        print("# case %s (%s s): %s" % (case["id"], case["time"], case["srun"]))
        for p in case["plugstack"]:
            print("#   plugstack: %s" % p)
        ch.run_case(case)
    print("# times (guest): " + ", ".join("%s %s s" % t for t in out.times))
    cases_failed = sorted({c for c, _, _ in ch.failed}, key=lambda c: table.index(c) if c in table else -1)
    print("# %d checks passed, %d failed" % (ch.passed, len(ch.failed)))
    for c in cases_failed:
        print("# FAILED case %s: %s" % (c, "; ".join(n for cc, n, _ in ch.failed if cc == c)))
    return 1 if ch.failed else 0


if __name__ == "__main__":
    sys.exit(main())
