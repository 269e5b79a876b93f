#!/usr/bin/env python3
"""nic_oracle.py TOPOLOGY.xml --gpus BUSID,... — the nearest fabric NICs of each GPU by the
rule below, computed from hwloc's own answers (never from numabind), as JSON on stdout:

  {"nics": [{"name": "mlx5_0", "pci": "0000:43:00.0"}, ...],      the fabric NICs, PCI order
   "gpus": {"0000:44:00.0": {"nics": ["mlx5_0"], "level": "bridge"}, ...}}

hwloc-info --ancestors gives each PCI function's bridges (host bridge and PCI bridges),
hwloc-info --descendants osdev its OS devices (kind, name, subtype), hwloc-calc the CPUs of
each function's locality, of the NUMA nodes (those with CPUs: asked with a CPU location, see
DEVELOPING.md) and of the packages. The rule: a fabric NIC is a network (02xx) or InfiniBand
(0c06) function with an OpenFabrics OS device, or a Slingshot interface (Cray vendor 17db,
subtype Slingshot); where EFA (1d0f:efaX) is present only EFA. Nearest: the NICs sharing the
deepest bridge with the GPU, else those whose locality lies within the GPU's home NUMA nodes
(the nodes with CPUs its locality intersects, all of them when none), else within the
packages of those nodes, else none.
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hwloc_oracle import Calc, ids, info_blocks  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cpulist import ids as pu_set  # noqa: E402  the one CPU-list parser (tests/lib/cpulist.py)


def busid_key(b):
    return tuple(int(x, 16) for x in re.split(r"[:.]", b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("topology")
    ap.add_argument("--gpus", default="", help="comma-separated PCI bus ids of the GPUs")
    a = ap.parse_args()
    xml = a.topology
    gpus = [g for g in a.gpus.split(",") if g]
    c = Calc(xml)

    pcis = {}  # logical index -> block
    for b in info_blocks(xml, ["pci:all"]):
        if b.get("type") == "PCIDev":
            pcis[int(b["logical index"])] = b
    busid = {li: b["attr PCI bus id"] for li, b in pcis.items()}
    bridges = {li: [] for li in pcis}  # (distance, gp index)
    for b in info_blocks(xml, ["--ancestors", "pci:all"]):
        m = re.search(r"= parent #(\d+) of PCI L#(\d+)", b["header"])
        if m and b.get("type") == "Bridge":
            bridges[int(m.group(2))].append((int(m.group(1)), b["gp index"]))
    chain = {li: [gp for _, gp in sorted(v, reverse=True)] for li, v in bridges.items()}
    first_li = {}
    for li in sorted(pcis):
        first_li.setdefault(busid[li], li)
    osdevs = {li: [] for li in pcis}
    for b in info_blocks(xml, ["--descendants", "osdev", "pci:all"]):
        m = re.search(r"descendant #\d+ of PCI L#(\d+)", b["header"])
        if m and "name" in b:
            osdevs[int(m.group(1))].append(b)

    nics = []
    for li, b in pcis.items():
        cls = b.get("attr PCI class", "")
        vendor, _, device = b.get("attr PCI id", ":").partition(":")
        if not (cls.startswith("02") or cls == "0c06"):
            continue
        rdma = [o["name"] for o in osdevs[li] if o.get("attr osdev type") == "OpenFabrics"]
        net = [o for o in osdevs[li] if o.get("attr osdev type") == "Network"]
        slingshot = vendor == "17db" or any(o.get("subtype") == "Slingshot" or o["name"].startswith("cxi")
                                            for o in net)
        if rdma:
            name = rdma[0]
        elif slingshot and net:
            marked = [o["name"] for o in net if o.get("subtype") == "Slingshot"]
            name = marked[0] if marked else net[0]["name"]
        else:
            continue
        efa = vendor == "1d0f" and device.startswith("efa")
        nics.append({"name": name, "pci": busid[li], "efa": efa, "li": li})
    if any(n["efa"] for n in nics):
        nics = [n for n in nics if n["efa"]]
    nics.sort(key=lambda n: busid_key(n["pci"]))

    # NICs located by their OS device (os=mlx5_0): a bus id may occur twice in a hand-edited
    # file (hwloc's own 32em64t test file has two 0000:04:00.0), and pci= takes the first.
    where = dict(zip([n["pci"] for n in nics],
                     (pu_set(x) for x in c.ask(["--po", "-I", "pu"], ["os=" + n["name"] for n in nics]))))
    node_of = dict(zip(gpus, (ids(x) for x in c.ask(["--po", "-I", "numa"], ["pci=" + g for g in gpus]))))
    cpu_nodes = ids(c.ask(["--po", "-I", "numa"], ["pu:all"])[0])
    node_pus = dict(zip(cpu_nodes, (pu_set(x) for x in c.ask(["--pi", "--po", "-I", "pu"],
                                                                ["numa:%d" % n for n in cpu_nodes]))))
    npkg = int(c.ask(["-N", "package"], ["all"])[0])
    packages = [pu_set(x) for x in c.ask(["--po", "-I", "pu"], ["package:%d" % i for i in range(npkg)])]

    out = {"nics": [{"name": n["name"], "pci": n["pci"]} for n in nics], "gpus": {}}
    for g in gpus:
        def common(n):
            k = 0
            for x, y in zip(chain[first_li[g]], chain[n["li"]]):
                if x != y:
                    break
                k += 1
            return k
        deepest = max([common(n) for n in nics] + [0])
        if deepest:
            chosen, level = [n for n in nics if common(n) == deepest], "bridge"
        else:
            home = [n for n in node_of[g] if n in node_pus] or cpu_nodes
            home_pus = set().union(*(node_pus[n] for n in home)) if home else set()
            chosen = [n for n in nics if where[n["pci"]] and where[n["pci"]] <= home_pus]
            level = "numa"
            if not chosen:
                pkg = set().union(*([p for p in packages if p & home_pus] or [set()]))
                chosen = [n for n in nics if where[n["pci"]] and pkg and where[n["pci"]] <= pkg]
                level = "package" if chosen else "none"
        out["gpus"][g] = {"nics": [n["name"] for n in chosen], "level": level}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
