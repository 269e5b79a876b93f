#!/usr/bin/env python3
"""bind() and the C API export the task's nearest NICs: NUMABIND_NICS in the C
environment and os.environ, "nics" in the result, UCX_NET_DEVICES only with ucx=True and only
where it was not set, NUMABIND_NICS removed on a node without a fabric NIC. Expected names
come from hwloc's PCI tree (tests/tools/nic_oracle.py). Each bind runs in its own process."""
import json
import os
import subprocess
import sys
import tempfile

from nbtest import GEN, check, finish

ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "nic_oracle.py")
PROBE = r"""
import json, os, sys, numabind
r = numabind.bind(topology=sys.argv[1], local_rank=int(sys.argv[2]), ntasks=2, mode="node", ucx=sys.argv[3] == "1")
c = {k: os.popen("printenv " + k).read().strip() or None for k in ("NUMABIND_NICS", "UCX_NET_DEVICES")}
print(json.dumps({"nics": r.get("nics"), "env": {k: os.environ.get(k) for k in c}, "c_env": c}))
"""


def probe(xml, rank, ucx, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("NUMABIND_NICS", "UCX_NET_DEVICES")}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", PROBE, xml, str(rank), "1" if ucx else "0"], capture_output=True,
                       text=True, env=e)
    if r.returncode != 0:
        raise SystemExit("bind probe failed: " + r.stderr)
    return json.loads(r.stdout)


def main():
    work = tempfile.mkdtemp(prefix="nb-nics-")
    xml = os.path.join(work, "nics.xml")
    subprocess.run([sys.executable, GEN, "-o", xml, "--gpu", "package:0=0000:21:00.0,switch=a",
                    "--pci", "package:0=0000:22:00.0,kind=cx6,switch=a", "--gpu", "package:0=0000:41:00.0,switch=b",
                    "--pci", "package:0=0000:42:00.0,kind=cx6,switch=b"], check=True, capture_output=True)
    o = json.loads(subprocess.run([sys.executable, ORACLE, xml, "--gpus", "0000:21:00.0,0000:41:00.0"], check=True,
                                  capture_output=True, text=True).stdout)
    pci_of = {n["name"]: n["pci"] for n in o["nics"]}
    for rank, gpu in ((0, "0000:21:00.0"), (1, "0000:41:00.0")):
        names = o["gpus"][gpu]["nics"]
        got = probe(xml, rank, False)
        check("bind() rank %d: result nics %s" % (rank, names), got["nics"] == [{"name": n, "pci": pci_of[n]} for n in names],
              got["nics"])
        check("bind() rank %d: NUMABIND_NICS in os.environ and the C environment, no UCX_NET_DEVICES" % rank,
              got["env"] == got["c_env"] == {"NUMABIND_NICS": ",".join(names), "UCX_NET_DEVICES": None}, got)
        got = probe(xml, rank, True)
        check("bind(ucx=True) rank %d: UCX_NET_DEVICES=<hca>:1" % rank,
              got["env"]["UCX_NET_DEVICES"] == got["c_env"]["UCX_NET_DEVICES"] == ",".join(n + ":1" for n in names), got)
        got = probe(xml, rank, True, UCX_NET_DEVICES="mine:1")
        check("bind(ucx=True) rank %d keeps the user's UCX_NET_DEVICES" % rank,
              got["env"]["UCX_NET_DEVICES"] == got["c_env"]["UCX_NET_DEVICES"] == "mine:1", got)
    bare = os.path.join(work, "bare.xml")
    subprocess.run([sys.executable, GEN, "-o", bare, "--gpu", "package:0", "--gpu", "package:0", "--pci",
                    "package:0,kind=i350"], check=True, capture_output=True)
    got = probe(bare, 0, True, NUMABIND_NICS="stale")
    check("bind() without a fabric NIC: NUMABIND_NICS removed, UCX_NET_DEVICES not set",
          got["nics"] == [] and got["env"] == got["c_env"] == {"NUMABIND_NICS": None, "UCX_NET_DEVICES": None}, got)
    finish()


if __name__ == "__main__":
    main()
