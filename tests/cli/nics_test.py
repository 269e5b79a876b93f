#!/usr/bin/env python3
"""nics_test.py NUMABIND GEN_TOPOLOGY [CORPUS_DIR] — the nearest NICs per task.

Expected NICs come from hwloc's own answers (tests/tools/nic_oracle.py: hwloc-info's PCI tree
and OS devices, hwloc-calc's localities), never from numabind. Checked:
  - `topo --json`: every accelerator's "nics" (names and PCI addresses);
  - `plan --json`: every task's "nics", the union of its devices' in PCI order (one task per
    GPU, and one task owning all of them), and the text table's column;
  - `run`: NUMABIND_NICS (removed when none), --ucx sets UCX_NET_DEVICES unless it is set;
on generated nodes (gen_topology.py presets: one HCA per GPU behind its switch with a 1 GbE
port that must be ignored, NICs on the other socket, no fabric NIC, ...) and on every recorded
server of the corpus (read in place; skipped with one line when absent).
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "..", "tools", "nic_oracle.py")
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + detail))
    if not ok:
        failures.append(what)


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("%s: rc %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r.stdout


def busid_key(b):
    return tuple(int(x, 16) for x in b.replace(".", ":").split(":"))


def oracle(xml, gpus):
    return json.loads(run([sys.executable, ORACLE, xml, "--gpus", ",".join(gpus)]))


def check_file(nb, xml, label):
    """Returns {gpu busid: level} as hwloc's answer gives it."""
    accs = json.loads(run([nb, "topo", "--json", "--topology", xml]))["accelerators"]
    gpus = sorted({a["pci"] for a in accs}, key=busid_key)
    if not gpus:
        return {}
    o = oracle(xml, gpus)
    pci_of = {n["name"]: n["pci"] for n in o["nics"]}
    bad = []
    for a in accs:
        want = [{"name": n, "pci": pci_of[n]} for n in o["gpus"][a["pci"]]["nics"]]
        if a.get("nics") != want:
            bad.append("GPU %d %s: numabind %s, hwloc %s" % (a["index"], a["pci"], a.get("nics"), want))
    check("%s: topo --json nics of %d GPU(s) as hwloc's PCI tree says" % (label, len(accs)), not bad, "; ".join(bad))
    # One task per GPU, then one task owning every GPU: the union in PCI order.
    for ntasks in sorted({len(accs), 1}):
        plan = json.loads(run([nb, "plan", "--json", "--topology", xml, "--mode", "node", "--ntasks", str(ntasks)]))
        bad = []
        for t in plan["tasks"]:
            names = set()
            for d in t["devices"]:
                names.update(o["gpus"][accs[d]["pci"]]["nics"])
            want = sorted(({"name": n, "pci": pci_of[n]} for n in names), key=lambda n: busid_key(n["pci"]))
            if t["nics"] != want:
                bad.append("task %d (devices %s): numabind %s, hwloc %s" % (t["local_rank"], t["devices"], t["nics"], want))
        check("%s: plan --json --ntasks %d nics per task" % (label, ntasks), not bad, "; ".join(bad))
    table = run([nb, "plan", "--topology", xml, "--mode", "node", "--ntasks", str(len(accs))])
    rows = [l.split() for l in table.splitlines()[2:] if l[:1].isdigit()]
    want = [",".join(sorted(o["gpus"][accs[t["devices"][0]]["pci"]]["nics"], key=lambda n: busid_key(pci_of[n])))
            or "-" for t in plan["tasks"]]
    check("%s: plan table's nics column" % label, [r[-1] for r in rows] == want, "%s vs %s" % ([r[-1] for r in rows], want))
    return {g: o["gpus"][g]["level"] for g in gpus}


def main():
    nb, gen = sys.argv[1], sys.argv[2]
    corpus = sys.argv[3] if len(sys.argv) > 3 else ""
    corpus = os.environ.get("NUMABIND_TOPOLOGY_CORPUS") or corpus
    work = tempfile.mkdtemp(prefix="numabind-nics-")

    levels = {}
    for preset in ("dgx-h100", "nic-far-socket", "no-fabric", "nps4", "dgx-a100", "power9", "mi300a-spx",
                   "gh200", "16gpu"):
        xml = os.path.join(work, preset + ".xml")
        run([sys.executable, gen, "--preset", preset, "-o", xml])
        levels[preset] = check_file(nb, xml, preset)
    # The shapes the presets were made for, as hwloc's answer says (the test covers each branch).
    check("dgx-h100: every GPU shares a switch with its own HCA (the i350 behind GPU 0's is ignored)",
          set(levels["dgx-h100"].values()) == {"bridge"})
    check("nic-far-socket: socket 0's GPUs get none, socket 1's the package's NICs",
          sorted(levels["nic-far-socket"].values()) == ["none", "none", "package", "package"],
          str(levels["nic-far-socket"]))
    check("no-fabric: management ports only, no NIC", set(levels["no-fabric"].values()) == {"none"})
    check("nps4: NICs on each GPU's NUMA node", set(levels["nps4"].values()) == {"numa"})

    if corpus and os.path.isfile(os.path.join(corpus, "expected_gpu_locality.json")):
        with open(os.path.join(corpus, "expected_gpu_locality.json"), encoding="utf-8") as f:
            files = sorted(json.load(f))
        seen = {}
        for name in files:
            xml = os.path.join(corpus, name)
            if os.path.isfile(xml):
                for level in check_file(nb, xml, name).values():
                    seen[level] = seen.get(level, 0) + 1
        check("corpus: GPUs at every level of the rule (%s)" % seen,
              all(seen.get(k, 0) > 0 for k in ("bridge", "numa", "none")))
    else:
        print("skip corpus: recorded topology corpus not found at %r (set NUMABIND_TOPOLOGY_CORPUS)" % corpus)

    # numabind run on this machine's CPUs with two fake GPUs, each with an HCA behind its switch.
    this = os.path.join(work, "this.xml")
    run([sys.executable, gen, "-o", this, "--gpu", "package:0=0000:21:00.0,switch=a",
         "--pci", "package:0=0000:22:00.0,kind=cx6,switch=a", "--gpu", "package:0=0000:41:00.0,switch=b",
         "--pci", "package:0=0000:42:00.0,kind=cx6,switch=b"])
    o = oracle(this, ["0000:21:00.0", "0000:41:00.0"])
    show = "echo nics=${NUMABIND_NICS-unset} ucx=${UCX_NET_DEVICES-unset}"
    env = {k: v for k, v in os.environ.items() if k not in ("UCX_NET_DEVICES", "NUMABIND_NICS")}
    for rank, gpu in ((0, "0000:21:00.0"), (1, "0000:41:00.0")):
        names = o["gpus"][gpu]["nics"]
        base = [nb, "run", "--topology", this, "--mode", "node", "--ntasks", "2", "--local-rank", str(rank)]
        out = run(base + ["--", "sh", "-c", show], env).strip()
        check("run rank %d: NUMABIND_NICS=%s, UCX_NET_DEVICES untouched" % (rank, ",".join(names)),
              out == "nics=%s ucx=unset" % ",".join(names), out)
        shown = json.loads(run(base + ["--", nb, "show", "--topology", this, "--json"], env))
        check("show rank %d: nics %s" % (rank, ",".join(names)), [n["name"] for n in shown["nics"]] == names, shown)
        out = run(base + ["--ucx", "--", "sh", "-c", show], env).strip()
        want = ",".join(n + ":1" for n in names)  # the generator's HCAs have port 1 ACTIVE
        check("run --ucx rank %d: UCX_NET_DEVICES=%s" % (rank, want), out == "nics=%s ucx=%s" % (",".join(names), want), out)
        out = run(base + ["--ucx", "--", "sh", "-c", show], dict(env, UCX_NET_DEVICES="mine:1")).strip()
        check("run --ucx rank %d keeps the user's UCX_NET_DEVICES" % rank, out.endswith("ucx=mine:1"), out)
    # A nested `numabind run --ucx` (or a step under a bound batch shell) replaces the value an
    # outer numabind set; without --ucx it removes it; the user's own value stays.
    r0 = [nb, "run", "--topology", this, "--mode", "node", "--ntasks", "2"]
    n1 = ",".join(n + ":1" for n in o["gpus"]["0000:41:00.0"]["nics"])
    out = run(r0 + ["--local-rank", "0", "--ucx", "--"] + r0 + ["--local-rank", "1", "--ucx", "--", "sh", "-c", show],
              env).strip()
    check("nested run --ucx: the inner task's NICs replace the outer's UCX_NET_DEVICES", out.endswith("ucx=" + n1), out)
    out = run(r0 + ["--local-rank", "0", "--ucx", "--"] + r0 + ["--local-rank", "1", "--", "sh", "-c", show], env).strip()
    check("nested run without --ucx: the outer's UCX_NET_DEVICES removed", out.endswith("ucx=unset"), out)
    out = run(r0 + ["--local-rank", "0", "--ucx", "--"] + r0 + ["--local-rank", "1", "--ucx", "--", "sh", "-c", show],
              dict(env, UCX_NET_DEVICES="mine:1")).strip()
    check("nested run --ucx keeps the user's UCX_NET_DEVICES", out.endswith("ucx=mine:1"), out)
    bare = os.path.join(work, "bare.xml")
    run([sys.executable, gen, "-o", bare, "--gpu", "package:0", "--pci", "package:0,kind=i350"])
    out = run([nb, "run", "--topology", bare, "--mode", "node", "--ntasks", "1", "--local-rank", "0", "--ucx", "--",
               "sh", "-c", show], dict(env, NUMABIND_NICS="stale")).strip()
    check("run without a fabric NIC removes NUMABIND_NICS and leaves UCX alone", out == "nics=unset ucx=unset", out)

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
