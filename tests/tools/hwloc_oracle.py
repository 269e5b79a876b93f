#!/usr/bin/env python3
"""hwloc_oracle.py TOPOLOGY.xml -o OUT.json — what hwloc's own tools say about a topology,
as JSON, for tests that must not take expected values from numabind.

Every number comes from hwloc-calc / hwloc-info (hwloc 2.x) on TOPOLOGY.xml; hwloc-calc reads
its questions from stdin (one process per kind of question, not one per question). PU sets
are OS indexes in hwloc-calc's list form ("0,16,1,17"); objects are logical indexes except
NUMA nodes (OS indexes). "Disallowed" PUs (outside an allowed set the XML records) are
included everywhere except in "allowed_pus" and "pci.*.allowed_pus".

  allowed_pus                  hwloc-calc all                       (what a restricted process sees)
  all_pus                      hwloc-calc --disallowed all
  numa.OS.{pus, cores, l3, package, gpu_memory}
                               --pi numa:OS -I pu / core / l3cache / package; hwloc-info subtype
  l3[L].{pus, cores, numa}     l3cache:L
  cores[C]                     PUs of core:C
  packages[P]                  PUs of package:P
  pci.BUSID.{pus, allowed_pus, numa, l3, package, class, id, osdevs}
                               pci=BUSID (locality = first non-I/O ancestor), hwloc-info of
                               every PCI function and its OS devices
Python 3 standard library only.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys


def die(msg):
    sys.stderr.write("hwloc_oracle: %s\n" % msg)
    sys.exit(1)


def tool(name):
    p = shutil.which(name)
    if not p:
        die("%s (Debian package hwloc) not found" % name)
    return p


class Calc:
    def __init__(self, xml):
        self.xml = xml
        self.calc = tool("hwloc-calc")

    def ask(self, options, questions, disallowed=True):
        """One hwloc-calc for many questions (stdin mode): one answer line per question."""
        if not questions:
            return []
        cmd = [self.calc, "--input", self.xml] + (["--disallowed"] if disallowed else []) + options
        r = subprocess.run(cmd, input="\n".join(questions) + "\n", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        lines = r.stdout.split("\n")
        if lines and lines[0].startswith("Waiting for locations"):  # hwloc-calc's stdin-mode banner
            lines = lines[1:]
        answers = lines[:len(questions)]
        if r.returncode != 0 or len(answers) != len(questions):
            die("%s failed: %s" % (" ".join(cmd), r.stderr.strip()))
        return answers


def ids(text):
    return [int(x) for x in text.split(",") if x != ""]


def info_blocks(xml, args):
    r = subprocess.run([tool("hwloc-info"), "--input", xml, "--whole-io", "--disallowed"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die("hwloc-info %s failed: %s" % (" ".join(args), r.stderr.strip()))
    blocks, cur = [], None
    for line in r.stdout.splitlines():
        if line and not line.startswith(" "):
            cur = {"header": line}
            blocks.append(cur)
        elif cur is not None and " = " in line:
            k, _, v = line.strip().partition(" = ")
            cur[k] = v
    return blocks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("topology")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    c = Calc(a.topology)

    nnuma, npkg, nl3, ncore = (int(c.ask(["-N", t], ["all"])[0]) for t in ("numa", "package", "l3cache", "core"))
    numa_os = ids(c.ask(["--po", "-I", "numa"], ["all"])[0])
    out = {
        "allowed_pus": c.ask(["--po", "-I", "pu"], ["all"], disallowed=False)[0],
        "all_pus": c.ask(["--po", "-I", "pu"], ["all"])[0],
        "numa": {}, "l3": [], "cores": [], "packages": [], "pci": {},
    }
    q = ["numa:%d" % n for n in numa_os]
    pus = c.ask(["--pi", "--po", "-I", "pu"], q)
    cores = c.ask(["--pi", "-I", "core"], q)
    l3 = c.ask(["--pi", "-I", "l3cache"], q) if nl3 else [""] * len(q)
    pkg = c.ask(["--pi", "-I", "package"], q) if npkg else [""] * len(q)
    gpu_memory = {int(b["os index"]) for b in info_blocks(a.topology, ["numa:all"])
                  if b.get("subtype") == "GPUMemory"}
    for i, n in enumerate(numa_os):
        out["numa"][str(n)] = {"pus": pus[i], "cores": ids(cores[i]), "l3": ids(l3[i]), "package": ids(pkg[i]),
                               "gpu_memory": n in gpu_memory}
    q = ["l3cache:%d" % i for i in range(nl3)]
    for p, co, nu in zip(c.ask(["--po", "-I", "pu"], q), c.ask(["-I", "core"], q), c.ask(["--po", "-I", "numa"], q)):
        out["l3"].append({"pus": p, "cores": ids(co), "numa": ids(nu)})
    out["cores"] = c.ask(["--po", "-I", "pu"], ["core:%d" % i for i in range(ncore)])
    out["packages"] = c.ask(["--po", "-I", "pu"], ["package:%d" % i for i in range(npkg)])

    pcis = [b for b in info_blocks(a.topology, ["pci:all"]) if b.get("type") == "PCIDev"]
    osdevs = {}
    for b in info_blocks(a.topology, ["--descendants", "osdev", "pci:all"]):
        m = re.search(r"descendant #\d+ of PCI L#(\d+)", b["header"])
        if m and "name" in b:
            osdevs.setdefault(int(m.group(1)), []).append(b["name"])
    q = ["pci=" + b["attr PCI bus id"] for b in pcis]
    answers = zip(c.ask(["--po", "-I", "pu"], q), c.ask(["--po", "-I", "pu"], q, disallowed=False),
                  c.ask(["--po", "-I", "numa"], q), c.ask(["-I", "l3cache"], q) if nl3 else [""] * len(q),
                  c.ask(["-I", "package"], q) if npkg else [""] * len(q))
    for b, (p, ap_, nu, l3_, pk) in zip(pcis, answers):
        out["pci"][b["attr PCI bus id"]] = {
            "pus": p, "allowed_pus": ap_, "numa": ids(nu), "l3": ids(l3_), "package": ids(pk),
            "class": b.get("attr PCI class"), "id": b.get("attr PCI id"),
            "osdevs": osdevs.get(int(b["logical index"]), [])}
    with open(a.output, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
