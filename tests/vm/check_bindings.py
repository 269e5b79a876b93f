#!/usr/bin/env python3
"""Check what numabind did inside the test guest against the guest kernel's own facts.

    check_bindings.py [--strict] [--api TABLE] SHAPE CASES OUTPUT

SHAPE   epyc or snc (only used in messages and for shape-specific checks)
CASES   the case table the payload ran (tests/vm/payload/SHAPE.cases)
OUTPUT  PAYLOAD_DIR/output.txt written by tests/vm/payload/run.sh in the guest
TABLE   the C API case table the payload ran (tests/vm/payload/SHAPE.api): nb_api_probe
        calls numabind_bind in a process that already runs threads and has touched memory
        on another node; checked per thread (/proc/self/task/*/status and numa_maps) and
        per page (move_pages, numa_maps) against the same kernel facts

Every expected CPU set, node and L3 comes from the kernel facts printed by
guest-facts.sh in the same guest (/sys/devices/system/node, /sys/devices/system/cpu,
/sys/bus/pci/devices): never from numabind's or hwloc's output. numabind's own
`plan --json` is only compared with what `run` actually applied (probe: the kernel's
Cpus_allowed_list, get_mempolicy, /proc/self/numa_maps page counts).

Prints PASS/FAIL/XFAIL/XPASS lines and a summary; exit 0 when nothing FAILed.
XFAIL marks checks of known numabind bugs (KNOWN_BUGS below): they do not fail the
run unless --strict (or NBVM_STRICT=1) is given; an XPASS means the bug is gone.
"""
import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cpulist  # noqa: E402  the one CPU-list parser and formatter (tests/lib/cpulist.py)
from cpulist import ids  # noqa: E402

# Known numabind defects, by check tag: (check, short description). Empty: the one found
# here (exclusive sets overlapping across homes that overlap) is fixed in the planner.
KNOWN_BUGS = {}


# ---------------------------------------------------------------------------- helpers
def fmt(cpus):
    """A CPU set in messages: the kernel's form ("0-2,4"), "(none)" when empty."""
    return cpulist.fmt(cpus) or "(none)"


def pci_key(addr):
    dom, bus, rest = addr.split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16))


class Result:
    def __init__(self, strict):
        self.strict = strict
        self.counts = defaultdict(int)

    def check(self, ok, what, detail="", known=None):
        if known and not self.strict:
            tag = "XPASS" if ok else "XFAIL"
            if not ok:
                detail = (detail + "; " if detail else "") + "known numabind bug: " + KNOWN_BUGS[known]
        else:
            tag = "PASS" if ok else "FAIL"
        self.counts[tag] += 1
        print("%s %s%s" % (tag, what, (" -- " + detail) if detail and (not ok or tag == "XPASS") else ""))
        return ok


# ---------------------------------------------------------------------------- parsing
def parse_output(path):
    """-> facts dict, topo {match: (rc, json|None, err)}, plans {id: (rc, json, err)},
    runs {(id, rank): (rc, {key: value}, [other lines])}, timings [str],
    cpusets {plan id: None | (cpus, mems, effective cpus, effective mems)}, cpuset events"""
    facts, topo, plans, runs, times = {}, {}, {}, {}, []
    apis = {}  # C API case id -> (rc, [probe output lines])
    cpusets = {}  # plan id -> (requested cpus, mems, effective cpus, mems) or None
    events = []   # cpuset lines, in order
    current = None
    block, name, lines = None, None, []
    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n").rstrip("\r")
            if block is None:
                if line == "@@FACTS":
                    block, lines = "facts", []
                elif line.startswith("@@TOPO "):
                    block, name, lines = "topo", line[7:], []
                elif line.startswith("@@PLAN "):
                    block, name, lines = "plan", line[7:], []
                    cpusets[name] = current
                elif line.startswith("@@CPUSET "):
                    f = line.split()[1:]
                    current = None if f[0] == "-" else tuple(f)
                    events.append(line[2:])
                elif line.startswith("@@CPUSET_FAILED"):
                    events.append(line[2:])
                    current = ("failed",)
                elif line.startswith("@@API "):
                    block, name, lines = "api", line[6:], []
                elif line.startswith("@@RUN "):
                    _, cid, rank = line.split()
                    block, name, lines = "run", (cid, int(rank)), []
                elif line.startswith("@@TIME ") or line.startswith("@@GUEST_UPTIME"):
                    times.append(line[2:])
                continue
            if line != "@@END":
                lines.append(line)
                continue
            rc = None
            body, err = [], []
            for ln in lines:
                if ln.startswith("@@RC "):
                    rc = int(ln[5:])
                elif ln.startswith("@@ERR "):
                    err.append(ln[6:])
                else:
                    body.append(ln)
            if block == "facts":
                for ln in body:
                    if "=" in ln:
                        k, v = ln.split("=", 1)
                        facts[k] = v
            elif block == "api":
                apis[name] = (rc, body)
            elif block in ("topo", "plan"):
                try:
                    js = json.loads("\n".join(body)) if rc == 0 else None
                except ValueError as e:
                    js = None
                    err.append("bad JSON: %s" % e)
                (topo if block == "topo" else plans)[name] = (rc, js, err)
            else:
                kv, other = {}, []
                for ln in body:
                    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", ln)
                    if m and m.group(1) not in kv:
                        kv[m.group(1)] = m.group(2)
                    else:
                        other.append(ln)
                runs[name] = (rc, kv, other)
            block = None
    return facts, topo, plans, runs, times, cpusets, events, apis


def parse_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith("@"):
                continue
            cid, ntasks, mib, args = line.split("|", 3)
            argv = args.split()
            opts = {}
            i = 0
            while i < len(argv):
                if argv[i].startswith("--") and i + 1 < len(argv):
                    opts[argv[i][2:]] = argv[i + 1]
                    i += 2
                else:
                    i += 1
            cases.append({"id": cid, "ntasks": int(ntasks), "mib": int(mib), "args": args,
                          "mode": opts.get("mode", "node"), "mem": opts.get("mem", "prefer"),
                          "devices": [int(x) for x in opts["devices"].split(",")] if "devices" in opts else None,
                          "match": opts.get("device-match", "")})
    return cases


# ---------------------------------------------------------------------------- kernel model
class Kernel:
    """The guest's topology as its kernel reports it (guest-facts.sh)."""

    def __init__(self, facts):
        self.f = facts
        self.nodes = sorted(int(k[4:-5]) for k in facts if re.match(r"^node\d+\.cpus$", k))
        self.node_cpus = {n: ids(facts["node%d.cpus" % n]) for n in self.nodes}
        self.cpu_nodes = [n for n in self.nodes if self.node_cpus[n]]
        self.dist = {n: dict(zip(self.nodes, map(int, facts["node%d.distance" % n].split())))
                     for n in self.nodes}
        self.has_cpu = ids(facts.get("node.has_cpu", ""))
        self.cpus = ids(facts["cpu.online"])
        self.package = {c: int(facts["cpu%d.package" % c]) for c in self.cpus}
        self.l3 = {c: frozenset(ids(facts["cpu%d.l3" % c])) for c in self.cpus}
        self.pci = {}
        for k, v in facts.items():
            m = re.match(r"^pci\.(.+)\.(id|class|numa_node|local_cpulist)$", k)
            if m:
                self.pci.setdefault(m.group(1), {})[m.group(2)] = v

    def matches(self, addr, spec):
        d = self.pci[addr]
        vendor, device = (int(x, 16) for x in d["id"].split(":"))
        cls = int(d["class"], 16) >> 8  # 0xCCSS
        for item in spec.split(","):
            if item.startswith("class="):
                want = item[6:]
                v = int(want, 16)
                if (len(want) <= 4 and cls >> 8 == v) or (len(want) > 4 and cls == v):
                    return True
                continue
            parts = item.split(":")
            if int(parts[0], 16) != vendor:
                continue
            if len(parts) > 1:
                if int(parts[1], 16) == device:
                    return True
                continue
            if cls >> 8 in (0x03, 0x12):  # display or processing accelerator
                return True
        return False

    def accelerators(self, spec):
        """Matched display devices in PCI address order (numabind's physical index)."""
        return sorted((a for a in self.pci if self.matches(a, spec)), key=pci_key)

    def home(self, addr):
        """(home nodes, fallback?) per numabind's documented rule, from the kernel's numa_node."""
        n = int(self.pci[addr]["numa_node"])
        if n >= 0 and self.node_cpus.get(n):
            return [n], False
        return list(self.cpu_nodes), True

    def cpus_of(self, nodes):
        out = set()
        for n in nodes:
            out |= self.node_cpus[n]
        return out

    def l3_parts(self, cpus):
        """Distinct L3 domains intersected with CPUS, in CPU order."""
        parts = []
        for c in sorted(cpus):
            p = self.l3[c] & cpus
            if p not in parts:
                parts.append(p)
        return parts


# ---------------------------------------------------------------------------- checks
def owned_devices(ntasks, visible, rank):
    """The documented ownership rule: with at least as many tasks as devices task r owns
    visible[r mod n]; with fewer, contiguous blocks in list order, larger blocks first."""
    n = len(visible)
    if ntasks >= n:
        return [visible[rank % n]]
    base, extra = divmod(n, ntasks)
    start = rank * base + min(rank, extra)
    return visible[start:start + base + (1 if rank < extra else 0)]


MEMPOLICY = {"bind": "bind", "interleave": "interleave", "none": "default"}


def check_topo(R, K, shape, topo, matches):
    for spec in matches:
        rc, js, err = topo.get(spec, (None, None, ["no output"]))
        what = "%s topo --device-match %s" % (shape, spec)
        if not R.check(rc == 0 and js is not None, what + ": exit 0 with JSON", "rc=%s %s" % (rc, err)):
            continue
        R.check(not err, what + ": nothing on stderr", "; ".join(err))
        nodes = {n["os_index"]: set(n["cpus"]) for n in js["numa_nodes"]}
        R.check(sorted(nodes) == K.nodes, what + ": NUMA nodes %s as in /sys/devices/system/node" % K.nodes,
                "numabind: %s" % sorted(nodes))
        for n in K.nodes:
            R.check(nodes.get(n) == K.node_cpus[n],
                    what + ": node %d cpus %s as the kernel's node%d/cpulist" % (n, fmt(K.node_cpus[n]), n),
                    "numabind: %s" % (fmt(nodes[n]) if n in nodes else "missing"))
        accs = js["accelerators"]
        want = K.accelerators(spec)
        R.check([a["pci"] for a in accs] == want,
                what + ": accelerators %s (kernel's display devices matching, in PCI order)" % " ".join(want),
                "numabind: %s" % " ".join(a["pci"] for a in accs))
        for a in accs:
            addr = a["pci"]
            if addr not in K.pci:
                R.check(False, what + ": device %s exists in the kernel" % addr)
                continue
            kd = K.pci[addr]
            home, fallback = K.home(addr)
            R.check(a["id"] == kd["id"] and a["class"] == kd["class"][:6],
                    what + ": %s id %s class %s" % (addr, kd["id"], kd["class"][:6]),
                    "numabind: %s %s" % (a["id"], a["class"]))
            R.check(a["home_nodes"] == home,
                    what + ": %s (sysfs numa_node %s) home nodes %s" % (addr, kd["numa_node"], home),
                    "numabind: %s" % a["home_nodes"])
            R.check(not any(n not in K.cpu_nodes for n in a["home_nodes"]),
                    what + ": %s home has no CPU-less node" % addr, "numabind: %s" % a["home_nodes"])
            R.check(set(a["home_cpus"]) == K.cpus_of(home),
                    what + ": %s home cpus %s" % (addr, fmt(K.cpus_of(home))), "numabind: %s" % fmt(a["home_cpus"]))
            if not fallback:
                R.check(set(a["local_cpus"]) == ids(kd["local_cpulist"]),
                        what + ": %s local cpus = sysfs local_cpulist %s" % (addr, kd["local_cpulist"]),
                        "numabind: %s" % fmt(a["local_cpus"]))
                R.check("warning" not in a, what + ": %s has no home warning" % addr, a.get("warning", ""))
            else:
                R.check(addr in a.get("warning", "") and "all NUMA nodes" in a.get("warning", ""),
                        what + ": %s (numa_node %s) warns it is treated as local to all NUMA nodes"
                        % (addr, kd["numa_node"]), "warning: %r" % a.get("warning"))


def check_case(R, K, shape, case, plans, runs, cpuset):
    cid, n, mode, mem = case["id"], case["ntasks"], case["mode"], case["mem"]
    tag = "%s %s" % (shape, cid)
    # what the tasks may use: the cpuset cgroup's effective sets as the kernel reports them
    A, M = set(K.cpus), set(K.nodes)
    if cpuset:
        if not R.check(len(cpuset) == 4, tag + ": cpuset cgroup set up", "%s" % (cpuset,)):
            return
        A, M = ids(cpuset[2]), ids(cpuset[3])
        R.check(A == ids(cpuset[0]) and M == ids(cpuset[1]),
                tag + ": cpuset effective cpus %s mems %s as requested" % (cpuset[2], cpuset[3]))
        tag += " [cpuset %s/%s]" % (fmt(A), fmt(M))
    rc, plan, err = plans.get(cid, (None, None, ["no output"]))
    if not R.check(rc == 0 and plan is not None, tag + ": plan --json exit 0", "rc=%s %s" % (rc, "; ".join(err))):
        return
    R.check(plan["mode"] == mode and len(plan["tasks"]) == n,
            tag + ": plan has mode %s and %d tasks" % (mode, n), "plan: %s, %d" % (plan["mode"], len(plan["tasks"])))
    accs = K.accelerators(case["match"])
    visible = case["devices"] if case["devices"] is not None else list(range(len(accs)))

    # per task: kernel expectations
    exp = []
    for r in range(n):
        owned = owned_devices(n, visible, r)
        if len(owned) > 1 and mode != "none":
            raise ValueError("%s: tasks owning several devices are modelled for mode none only" % tag)
        idx = owned[0]
        addr = accs[idx]
        home, fallback = K.home(addr)
        e = {"idx": idx, "pci": addr, "home": home, "fallback": fallback, "cpu_nodes": home, "near": False,
             "memfb": False, "home_cpus": K.cpus_of(home) & A}
        if not e["home_cpus"]:
            # documented: the nearest nodes (distance from the home) that have allowed CPUs
            cand = [m for m in K.cpu_nodes if K.node_cpus[m] & A]
            best = min(min(K.dist[h][m] for h in home) for m in cand)
            e["cpu_nodes"] = [m for m in cand if min(K.dist[h][m] for h in home) == best]
            e["home_cpus"] = K.cpus_of(e["cpu_nodes"]) & A
            e["near"] = True
        e["mems"] = [m for m in home if m in M]
        if not e["mems"]:
            e["mems"] = [m for m in e["cpu_nodes"] if m in M]
            e["memfb"] = True
        exp.append(e)

    applied = {}  # rank -> cpus the kernel reports for the probe
    for r in range(n):
        t = plan["tasks"][r]
        e = exp[r]
        rt = "%s rank %d" % (tag, r)
        pcpus, pmems = set(t["cpus"]), t["mems"]
        dev = t.get("device") or {}
        R.check(dev.get("index") == e["idx"] and dev.get("pci") == e["pci"],
                rt + ": plan device %d = %s" % (e["idx"], e["pci"]), "plan: %s" % dev)

        rrc, kv, other = runs.get((cid, r), (None, {}, ["no output"]))
        if not R.check(rrc == 0 and "cpus" in kv and "pages_total" in kv, rt + ": run exit 0, probe ran",
                       "rc=%s %s" % (rrc, " | ".join(other[-5:]))):
            continue
        kcpus = ids(kv["cpus"])
        applied[r] = kcpus
        R.check(kcpus == pcpus, rt + ": Cpus_allowed_list %s = planned cpus" % kv["cpus"],
                "plan: %s" % fmt(pcpus))
        warns = [ln for ln in other if ln.startswith("numabind:")]

        R.check(ids(kv.get("mems_allowed", "")) == M, rt + ": Mems_allowed_list %s" % fmt(M),
                "got %s" % kv.get("mems_allowed"))
        if mode == "none":
            R.check(kcpus == A, rt + ": mode none leaves all allowed CPUs %s" % fmt(A), "got %s" % fmt(kcpus))
            R.check(kv.get("mempolicy") == "default", rt + ": mode none leaves the default memory policy",
                    "got %s %s" % (kv.get("mempolicy"), kv.get("mempolicy_nodes")))
            R.check(kv.get("NUMABIND_MODE") == "none", rt + ": NUMABIND_MODE=none", kv.get("NUMABIND_MODE", ""))
            R.check(not warns, rt + ": no warnings", " | ".join(warns))
            continue

        hc = e["home_cpus"]
        if mode == "socket":
            # the whole package(s) of the home: includes the home, may go beyond it
            R.check(hc <= kcpus, rt + ": cpus %s include the device's node(s) %s (cpus %s; sysfs numa_node %s)"
                    % (fmt(kcpus), e["home"], fmt(hc), K.pci[e["pci"]]["numa_node"]))
        else:
            R.check(bool(kcpus) and kcpus <= hc,
                    rt + ": cpus %s lie on the device's node(s) %s%s (allowed cpus %s; sysfs numa_node %s)"
                    % (fmt(kcpus), e["home"], " -> nearest %s" % e["cpu_nodes"] if e["near"] else "",
                       fmt(hc), K.pci[e["pci"]]["numa_node"]))
        off = {c for c in kcpus if not any(c in K.node_cpus[x] for x in K.cpu_nodes)}
        R.check(not off, rt + ": no CPU outside the CPU-bearing nodes %s" % K.cpu_nodes, fmt(off))
        if mode == "node":
            R.check(kcpus == hc, rt + ": node mode gets all allowed cpus %s of node(s) %s"
                    % (fmt(hc), e["cpu_nodes"]), "got %s" % fmt(kcpus))
        elif mode == "socket":
            pk = {K.package[c] for c in hc}
            want = {c for c in K.cpus if K.package[c] in pk} & A
            R.check(kcpus == want, rt + ": socket mode gets package(s) %s = cpus %s" % (sorted(pk), fmt(want)),
                    "got %s" % fmt(kcpus))
        elif mode == "core-complex":
            l3s = {K.l3[c] for c in kcpus}
            R.check(len(l3s) == 1, rt + ": core-complex cpus %s within one L3" % fmt(kcpus),
                    "L3s: %s" % " ".join(fmt(x) for x in l3s))

        # warnings: the documented treatment of a device without CPU-bearing NUMA node,
        # of a home without allowed CPUs and of a home without allowed memory
        wanted = []
        if e["fallback"]:
            wanted.append(("device %s (sysfs numa_node %s) warned local to all NUMA nodes"
                           % (e["pci"], K.pci[e["pci"]]["numa_node"]),
                           lambda w: e["pci"] in w and "all NUMA nodes" in w))
        if e["near"]:
            wanted.append(("no allowed CPU at home: warned, nearest node(s) %s" % e["cpu_nodes"],
                           lambda w: "no allowed CPU" in w and fmt(e["home_cpus"]) in w))
        if e["memfb"]:
            wanted.append(("home memory not allowed: warned, node(s) %s" % e["mems"],
                           lambda w: "is not allowed" in w))
        if e["near"] and not e["memfb"] and mem != "none":
            # memory follows the GPU, the CPUs come from elsewhere: said
            wanted.append(("memory stays on the device's node(s) %s, CPUs from %s: warned" % (e["mems"], e["cpu_nodes"]),
                           lambda w: "keeps memory on the devices' NUMA node(s) %s" % ",".join(map(str, e["mems"])) in w))
        for what, pred in wanted:
            R.check(any(pred(w) for w in t["warnings"]) and any(pred(w) for w in warns),
                    rt + ": " + what + " (plan and run)", "plan %s / run %s" % (t["warnings"], warns))
        R.check(len(t["warnings"]) == len(wanted) and len(warns) == len(wanted),
                rt + ": %d warning(s), no others" % len(wanted), "plan %s / run %s" % (t["warnings"], warns))

        # memory
        R.check(pmems == e["mems"], rt + ": planned memory nodes %s (home%s; never a CPU-less node)"
                % (e["mems"], " ∩ allowed, else CPU nodes" if cpuset else ""), "plan: %s" % pmems)
        R.check(all(m in K.cpu_nodes for m in pmems), rt + ": memory nodes have CPUs", "plan: %s" % pmems)
        R.check(t["mem_policy"] == mem, rt + ": plan mem_policy %s" % mem, "plan: %s" % t["mem_policy"])
        want_pol = MEMPOLICY.get(mem) or ("preferred" if len(pmems) == 1 else "preferred_many")
        want_nodes = "" if mem == "none" else fmt(pmems).replace("(none)", "")
        R.check(kv.get("mempolicy") == want_pol and kv.get("mempolicy_nodes") == want_nodes,
                rt + ": get_mempolicy %s nodes %s" % (want_pol, want_nodes or "-"),
                "got %s nodes %s" % (kv.get("mempolicy"), kv.get("mempolicy_nodes")))
        pages = {int(k[1:]): int(v) for k, v in
                 (x.split("=") for x in kv.get("pages_by_node", "").split(",") if x)}
        total = int(kv["pages_total"])
        R.check(total == case["mib"] * 256 and sum(pages.values()) == total,
                rt + ": numa_maps shows all %d touched pages" % (case["mib"] * 256), kv.get("pages_by_node", ""))
        if mem in ("bind", "prefer"):
            # prefer: the nodes have plenty of free memory, so the preferred node(s) get it all
            R.check(set(pages) <= set(pmems),
                    rt + ": --mem %s: every touched page on node(s) %s" % (mem, pmems),
                    "numa_maps: %s" % kv.get("pages_by_node"))
        elif mem == "interleave":
            R.check(set(pages) <= set(pmems) and (len(pmems) == 1 or len(pages) > 1),
                    rt + ": --mem interleave: pages spread over node(s) %s only" % pmems,
                    "numa_maps: %s" % kv.get("pages_by_node"))
        # environment
        R.check(kv.get("NUMABIND_MODE") == mode and kv.get("NUMABIND_DEVICE") == str(e["idx"])
                and kv.get("NUMABIND_DEVICE_PCI") == e["pci"] and ids(kv.get("NUMABIND_CPUS", "")) == kcpus
                and kv.get("NUMABIND_MEMS") == ",".join(map(str, pmems)) and kv.get("NUMABIND_MEM_POLICY") == mem,
                rt + ": NUMABIND_* environment describes the binding",
                " ".join("%s=%s" % (k, v) for k, v in sorted(kv.items()) if k.startswith("NUMABIND_")))

    if mode not in ("exclusive", "core-complex") or len(applied) != n:
        return
    # tasks sharing one home: split rules
    groups = defaultdict(list)
    for r in range(n):
        groups[tuple(exp[r]["cpu_nodes"])].append(r)
    # Homes that overlap another home (a device local to every node next to one on node 0):
    # the planner hands each CPU out once, the most specific home first; check that each
    # task stays in its home, nothing is shared, and together they use every home CPU.
    def overlaps_other(key):
        hc = exp[groups[key][0]]["home_cpus"]
        return any(other != key and hc & exp[groups[other][0]]["home_cpus"] for other in groups)
    mixed_keys = [key for key in groups if overlaps_other(key)]
    if mixed_keys:
        ranks = [r for key in mixed_keys for r in groups[key]]
        homes_union = set().union(*(exp[r]["home_cpus"] for r in ranks))
        used = set().union(*(applied[r] for r in ranks))
        inside = all(applied[r] <= exp[r]["home_cpus"] and applied[r] for r in ranks)
        if mode == "exclusive":
            R.check(inside and used == homes_union,
                    "%s ranks %s (overlapping homes): each set non-empty inside its home, together covering %s"
                    % (tag, ",".join(map(str, ranks)), fmt(homes_union)),
                    " ".join("rank %d:%s" % (r, fmt(applied[r])) for r in ranks))
        else:
            parts = K.l3_parts(homes_union)
            R.check(inside and all(any(applied[r] <= p for p in parts) for r in ranks),
                    "%s ranks %s (overlapping homes): each set non-empty, inside its home and one L3 (%s)"
                    % (tag, ",".join(map(str, ranks)), " ".join(fmt(p) for p in parts)),
                    " ".join("rank %d:%s" % (r, fmt(applied[r])) for r in ranks))
    for home, members in groups.items():
        if home in mixed_keys:
            continue
        hc = exp[members[0]]["home_cpus"]
        home = exp[members[0]]["cpu_nodes"]
        gt = "%s ranks %s (home node(s) %s)" % (tag, ",".join(map(str, members)), list(home))
        sets = [applied[r] for r in members]
        # core-complex shares only whole L3 parts (more tasks than parts, as torch.numa.binding)
        disjoint = all(not (sets[i] & sets[j]) or (mode == "core-complex" and sets[i] == sets[j])
                       for i in range(len(sets)) for j in range(i + 1, len(sets)))
        R.check(disjoint, gt + ": CPU sets pairwise disjoint" + (" or the same L3 part" if mode == "core-complex"
                                                                 else ""), " ".join(fmt(s) for s in sets))
        parts = K.l3_parts(hc)
        k = len(members)
        if mode == "exclusive":
            union = set().union(*sets)
            R.check(union == hc, gt + ": exclusive sets cover the home cpus %s" % fmt(hc), "union %s" % fmt(union))
            sizes = [len(s) for s in sets]
            R.check(max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True),
                    gt + ": even split, remainder to the first (sizes %s)" % sizes)
            # contiguous blocks of the home CPUs (PU logical order = CPU number order in
            # these guests), in task order: by device, then by rank
            order = sorted(range(k), key=lambda i: (exp[members[i]]["idx"], members[i]))
            flat = [c for i in order for c in sorted(sets[i])]
            R.check(flat == sorted(hc), gt + ": contiguous blocks in device/rank order",
                    " ".join("rank %d:%s" % (members[i], fmt(sets[i])) for i in order))
            if len(parts) % k == 0:
                ok = all(all(p <= s or not (p & s) for p in parts) for s in sets)
                R.check(ok, gt + ": L3-aligned (each set a union of whole L3 parts %s)"
                        % " ".join(fmt(p) for p in parts), " ".join(fmt(s) for s in sets))
            elif k % len(parts) == 0:
                ok = all(any(s <= p for p in parts) for s in sets)
                R.check(ok, gt + ": L3-aligned (each set inside one L3 part of %s)"
                        % " ".join(fmt(p) for p in parts), " ".join(fmt(s) for s in sets))
        else:
            if k <= len(parts):
                ok = all(s in parts for s in sets) and len({frozenset(s) for s in sets}) == k
                R.check(ok, gt + ": core-complex: one whole L3 part of the home each, distinct (parts %s)"
                        % " ".join(fmt(p) for p in parts), " ".join(fmt(s) for s in sets))
            else:
                # torch.numa.binding: whole parts shared round-robin; every part used, as evenly as possible
                counts = [sum(1 for s in sets if s == p) for p in parts]
                ok = all(s in parts for s in sets) and min(counts) >= 1 and max(counts) - min(counts) <= 1
                R.check(ok, gt + ": core-complex with more tasks than L3 parts (%s): whole parts shared, "
                        "each used, task counts %s differ by one at most" % (" ".join(fmt(p) for p in parts), counts),
                        " ".join(fmt(s) for s in sets))
    if len(groups) > 1:
        pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if applied[a] & applied[b]
                 and not (mode == "core-complex" and applied[a] == applied[b])]
        mixed = any(exp[a]["cpu_nodes"] != exp[b]["cpu_nodes"] for a, b in pairs)
        R.check(not pairs, "%s: %s sets of all ranks pairwise disjoint (ranks with different home nodes too)"
                % (tag, mode),
                "overlapping: " + ", ".join("rank %d (node(s) %s) %s & rank %d (node(s) %s) %s"
                                            % (a, exp[a]["cpu_nodes"], fmt(applied[a]), b, exp[b]["cpu_nodes"],
                                               fmt(applied[b])) for a, b in pairs),
                known="cross-home-overlap" if mixed else None)


# ---------------------------------------------------------------------------- C API
def parse_api_cases(path):
    """SHAPE.api: ID|THREADS|TOUCH_MIB|TOUCH_NODE|KEY=VALUE ... (numabind_options)"""
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            cid, threads, mib, node, opts = line.split("|", 4)
            o = dict(x.split("=", 1) for x in opts.split())
            cases.append({"id": cid, "threads": int(threads), "mib": int(mib),
                          "touch_node": None if node == "-" else int(node), "opts": o})
    return cases


def parse_probe(lines):
    """nb_api_probe output -> (top-level {key: value}, [(tid, cpus, policy)],
    {"before"|"after": (move_pages {node: pages} or None, numa_maps {node: pages} or None)})"""
    kv, threads, buf = {}, [], {}
    section = "start"
    for ln in lines:
        if ln in ("before:", "after:"):
            section = ln[:-1]
            continue
        m = re.match(r"^thread=(\d+) cpus=(\S*) policy=(.*)$", ln)
        if m:
            threads.append((m.group(1), ids(m.group(2)), m.group(3)))
            continue
        if ln.startswith("buffer_pages_by_node="):
            v = ln.split("=", 1)[1]
            pages = None
            if not v.startswith("error"):
                pages = {}
                for x in filter(None, v.split(",")):
                    k, c = x.split("=")
                    pages[int(k[1:]) if k.startswith("N") else k] = int(c)
            buf.setdefault(section, [None, None])[0] = pages
            continue
        if ln.startswith("buffer_numa_maps="):
            counts = {int(a): int(b) for a, b in re.findall(r"\bN(\d+)=(\d+)", ln)}
            buf.setdefault(section, [None, None])[1] = counts
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", ln)
        if m and m.group(1) not in kv:
            kv[m.group(1)] = m.group(2)
    return kv, threads, buf


def numa_maps_policy(mem, nodes):
    """The policy column the kernel (mpol_to_str) writes in numa_maps for this request."""
    if mem == "none":
        return "default"
    name = {"bind": "bind", "interleave": "interleave"}.get(mem) or ("prefer" if len(nodes) == 1 else "prefer (many)")
    return "%s:%s" % (name, fmt(nodes))


def api_expected_cpus(K, accs, visible, ntasks, rank, mode):
    """This rank's CPUs by numabind's documented rule, from the kernel's facts only
    (node: the home's CPUs; exclusive: contiguous even blocks of them, remainder first,
    in device/rank order among the ranks sharing the home)."""
    home = lambda r: K.home(accs[visible[r % len(visible)]])[0]
    hc = sorted(K.cpus_of(home(rank)))
    if mode == "node":
        return set(hc)
    if mode != "exclusive":
        raise ValueError("C API case mode %s: only node and exclusive are modelled here" % mode)
    members = sorted((r for r in range(ntasks) if home(r) == home(rank)), key=lambda r: (visible[r % len(visible)], r))
    k, out, start = len(members), {}, 0
    for i, r in enumerate(members):
        size = len(hc) // k + (1 if i < len(hc) % k else 0)
        out[r] = set(hc[start:start + size])
        start += size
    return out[rank]


def check_api(R, K, shape, cases, apis):
    for case in cases:
        o, cid = case["opts"], case["id"]
        tag = "%s api %s" % (shape, cid)
        accs = K.accelerators(o.get("device_match", ""))
        visible = [int(x) for x in o["devices"].split(",")] if "devices" in o else list(range(len(accs)))
        ntasks, rank = int(o.get("ntasks", 1)), int(o.get("local_rank", 0))
        if len(owned_devices(ntasks, visible, rank)) > 1:
            raise ValueError("%s: tasks owning several devices are not modelled here" % tag)
        mode, mem, migrate = o.get("mode", "node"), o.get("mem", "prefer"), o.get("migrate", "0") == "1"
        addr = accs[visible[rank % len(visible)]]
        home, fallback = K.home(addr)
        want_cpus = api_expected_cpus(K, accs, visible, ntasks, rank, mode)
        want_pol = numa_maps_policy(mem, home)
        rc, lines = apis.get(cid, (None, ["no output"]))
        kv, threads, buf = parse_probe(lines)
        if not R.check(rc == 0 and kv.get("status") == "0", tag + ": probe exit 0, numabind_bind status 0",
                       "rc=%s status=%s error=%s | %s" % (rc, kv.get("status"), kv.get("error"), " | ".join(lines[-5:]))):
            continue
        R.check("touch_policy_error" not in kv, tag + ": the probe's set_mempolicy for the touch worked",
                kv.get("touch_policy_error", ""))
        nthreads = case["threads"] + 1
        R.check(len(threads) == nthreads, tag + ": %d threads in /proc/self/task (%d started before the call)"
                % (nthreads, case["threads"]), "got %d" % len(threads))
        bad = [(t, fmt(c)) for t, c, _ in threads if c != want_cpus]
        R.check(not bad and threads, tag + ": every thread's Cpus_allowed_list = %s (%s of %s, sysfs numa_node %s: node(s) %s)"
                % (fmt(want_cpus), mode, addr, K.pci[addr]["numa_node"], home),
                "threads off the plan: %s" % bad)
        R.check(want_cpus <= K.cpus_of(home), tag + ": those cpus lie on node(s) %s (nodeN/cpulist)" % home)
        badp = [(t, p) for t, _, p in threads if p != want_pol]
        R.check(not badp and threads, tag + ": every thread's memory policy (task/TID/numa_maps) is %s" % want_pol,
                "threads: %s" % badp)
        R.check(kv.get("result_threads") == str(nthreads), tag + ": numabind reports %d threads bound" % nthreads,
                "result_threads=%s" % kv.get("result_threads"))
        try:
            res = json.loads(kv.get("result", ""))
        except ValueError:
            res = {}
        R.check(set(res.get("cpus", [])) == want_cpus and res.get("mems") == home,
                tag + ": its result names cpus %s mems %s" % (fmt(want_cpus), home),
                "result cpus %s mems %s" % (res.get("cpus"), res.get("mems")))
        print("INFO %s: bind_ms=%s threads=%d pages_moved=%s" % (tag, kv.get("bind_ms"), len(threads),
                                                               kv.get("result_pages_moved")))
        if case["touch_node"] is None:
            continue
        total, tn = case["mib"] * 256, case["touch_node"]
        R.check(tn not in home, tag + ": touch node %d is off the home node(s) %s" % (tn, home))
        before = buf.get("before", [None, None])
        after = buf.get("after", [None, None])
        for label, pages in (("move_pages", before[0]), ("numa_maps", before[1])):
            R.check(pages == {tn: total}, tag + ": before the call %s has all %d pages on node %d" % (label, total, tn),
                    "got %s" % pages)
        moved_pages = 0
        for label, pages in (("move_pages", after[0]), ("numa_maps", after[1])):
            pages = pages or {}
            on_home = sum(c for n, c in pages.items() if n in home)
            if label == "move_pages":
                moved_pages = on_home
            if migrate:
                R.check(sum(pages.values()) == total and on_home == total,
                        tag + ": migrate=1: after the call %s has all %d pages on node(s) %s" % (label, total, home),
                        "got %s" % pages)
            else:
                R.check(pages == {tn: total},
                        tag + ": migrate=0: after the call %s still has all %d pages on node %d" % (label, total, tn),
                        "got %s" % pages)
        moved = int(kv.get("result_pages_moved", "-1"))
        if migrate:
            # the buffer's pages were all off home (checked above); other anonymous pages may move too
            R.check(res.get("migrated") is True and moved >= total,
                    tag + ": numabind reports migrated, at least the %d buffer pages moved" % total,
                    "migrated=%s pages_moved=%d" % (res.get("migrated"), moved))
        else:
            R.check(moved == 0 and not res.get("migrated"), tag + ": migrate=0 reports no pages moved",
                    "migrated=%s pages_moved=%d" % (res.get("migrated"), moved))
        print("INFO %s: %d pages touched on node %d; on node(s) %s after the call: %d (move_pages)"
              % (tag, total, tn, home, moved_pages))


def main(argv):
    strict = os.environ.get("NBVM_STRICT") == "1"
    api_path = None
    while argv and argv[0] in ("--strict", "--api"):
        if argv[0] == "--strict":
            strict, argv = True, argv[1:]
        else:
            api_path, argv = argv[1], argv[2:]
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    shape, cases_path, out_path = argv
    R = Result(strict)
    facts, topo, plans, runs, times, cpusets, events, apis = parse_output(out_path)
    if not R.check(bool(facts), "%s: guest printed its kernel facts" % shape):
        return 1
    K = Kernel(facts)
    print("INFO %s: kernel: nodes %s, CPU nodes %s (has_cpu %s), %d display devices" %
          (shape, K.nodes, K.cpu_nodes, fmt(K.has_cpu), len(K.pci)))
    R.check(set(K.cpu_nodes) == K.has_cpu, "%s: nodes with cpulist = node/has_cpu" % shape)
    cases = parse_cases(cases_path)
    check_topo(R, K, shape, topo, sorted({c["match"] for c in cases}))
    for ev in events:
        print("INFO %s guest %s" % (shape, ev))
        f = ev.split()
        R.check(f[0] == "CPUSET", "%s: cpuset directive ran: %s" % (shape, ev))
        if f[0] == "CPUSET" and f[1] == "-":
            R.check(len(f) == 5 and ids(f[3]) == K.cpus and ids(f[4]) == set(K.nodes),
                    "%s: back in the root cgroup: cpus %s mems %s" % (shape, fmt(K.cpus), fmt(K.nodes)), ev)
    for case in cases:
        check_case(R, K, shape, case, plans, runs, cpusets.get(case["id"]))
    if api_path:
        api_cases = parse_api_cases(api_path)
        R.check(bool(api_cases), "%s: C API case table %s has cases" % (shape, api_path))
        check_api(R, K, shape, api_cases, apis)
    R.check("DONE" in "".join(times) or any(t.startswith("TIME payload") for t in times),
            "%s: payload ran to the end" % shape)
    for t in times:
        print("INFO %s guest %s" % (shape, t))
    c = R.counts
    print("SUMMARY %s: %d checks: %d passed, %d failed, %d xfail (known bugs), %d xpass"
          % (shape, sum(c.values()), c["PASS"], c["FAIL"], c["XFAIL"], c["XPASS"]))
    return 1 if c["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
