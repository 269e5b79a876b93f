#!/usr/bin/env python3
"""`numabind show --pid`: a process that resets one thread's affinity after binding (the
mismatch must name that thread), a process bound by `numabind run` (plan from its environ),
a device on another node than the CPUs, and the owner-or-root rule. Expected values are read
from /proc (the kernel) and hwloc-calc, not from numabind."""
import json
import os
import subprocess
import sys
import tempfile
import time

from nbtest import BIN, PROBE, check, ids, fake_gpu_topology, finish, process_threads


def wait_for(path, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and open(path).read().strip() == "ready":
            return True
        time.sleep(0.02)
    return False


def show(pid, *extra):
    return subprocess.run([BIN, "show", "--pid", str(pid), *extra], capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as work:
    os.chmod(work, 0o755)
    xml, gpus = fake_gpu_topology(work)
    bus0 = sorted(gpus)[0]
    plan_cpus = gpus[bus0]
    n = len(gpus)

    # ---- bound through the C API, then one thread resets its own affinity
    ready = os.path.join(work, "ready")
    p = subprocess.Popen([PROBE, "--threads", "2", "--reset-thread", "--hold", ready, "mode=exclusive", "local_rank=0",
                          f"ntasks={n}", f"topology={xml}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check("probe bound and holding", wait_for(ready))
        kernel = process_threads(p.pid)
        strays = [tid for tid, _, cpus, _ in kernel if not cpus <= plan_cpus]
        check("the kernel shows exactly one thread outside the plan (the reset one)", len(strays) == 1, kernel)
        r = show(p.pid, "--json", "--topology", xml)
        check("show --pid --json exits 0", r.returncode == 0, r.stderr)
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        mism = j.get("mismatches", [])
        check("the mismatch names the reset thread, and only it",
              len([m for m in mism if m.startswith("thread ")]) == 1 and strays and f"thread {strays[0]} " in mism[0], mism)
        check("plan from bind()'s marker: the GPU's CPUs (hwloc-calc)",
              j.get("plan") and set(j["plan"]["cpus"]) == plan_cpus and "marker" in j["plan"]["source"], j.get("plan"))
        by_tid = {t["tid"]: t for t in j.get("threads", [])}
        check("every thread's CPUs as the kernel has them",
              all(set(by_tid.get(tid, {}).get("cpus", [])) == cpus for tid, _, cpus, _ in kernel), (by_tid, kernel))
        check("every thread's memory policy as numa_maps has it",
              all(by_tid.get(tid, {}).get("mem_policy") == pol for tid, _, _, pol in kernel), (by_tid, kernel))
        check("devices: the planned GPU", [d["pci"] for d in j.get("devices", [])] == [bus0], j.get("devices"))
        pages = sum(j.get("pages_by_node", {}).values())
        check("resident pages per node reported", pages > 0, j.get("pages_by_node"))
        t = show(p.pid, "--threads", "--topology", xml)
        check("text: one line per thread and the mismatch",
              t.returncode == 0 and t.stdout.count("\nthread ") == len(kernel) and "mismatch: thread" in t.stdout, t.stdout)

        # ---- not the owner: one line, exit 1 (run as nobody)
        if os.geteuid() == 0:
            u = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BIN, "show", "--pid",
                                str(p.pid), "--topology", xml], capture_output=True, text=True)
            check("another user: exit 1, one-line permission error",
                  u.returncode == 1 and u.stderr.count("\n") == 1 and "permission denied" in u.stderr and
                  "only its owner or root" in u.stderr, (u.returncode, u.stderr))
    finally:
        p.stdin.close()
        out = p.stdout.read()
        p.wait(timeout=30)
    check("the probe's own report agrees on the reset thread",
          strays and f"reset_tid={strays[0]}" in out, out[-500:])

    # ---- bound by `numabind run`: the plan is in its environ; all matches
    runp = subprocess.Popen([BIN, "run", "--mode", "exclusive", "--local-rank", "0", "--ntasks", str(n), "--topology", xml,
                             "--", "sleep", "30"])
    try:
        time.sleep(0.5)
        r = show(runp.pid, "--json", "--topology", xml)
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        check("numabind run: plan from the environment, no mismatch",
              j.get("plan", {}) and j["plan"]["source"] == "environment" and j.get("mismatches") == [], r.stdout + r.stderr)
    finally:
        runp.kill()
        runp.wait()

    # ---- a device on another node than the CPUs: split this machine into 2 NUMA nodes in XML
    if len(ids(open("/sys/devices/system/cpu/online").read())) >= 2:
        split = os.path.join(work, "split.xml")
        subprocess.run([sys.executable, os.environ["NUMABIND_GEN_TOPOLOGY"], "-o", split, "--split-numa", "2",
                        "--gpu", "numa:0", "--gpu", "numa:1"], check=True, capture_output=True)
        runp = subprocess.Popen([BIN, "run", "--mode", "exclusive", "--local-rank", "0", "--ntasks", "2", "--topology",
                                 split, "--", "sleep", "30"])
        try:
            time.sleep(0.5)
            node1 = subprocess.run(["hwloc-calc", "--input", split, "node:1", "--intersect", "pu"],
                                   capture_output=True, text=True).stdout.strip()
            subprocess.run(["taskset", "-pc", node1, str(runp.pid)], check=True, capture_output=True)
            r = show(runp.pid, "--json", "--topology", split)
            mism = json.loads(r.stdout).get("mismatches", []) if r.returncode == 0 else [r.stderr]
            check("moved to node 1's CPUs: outside the plan, and device 0 is on node 0",
                  any(m.startswith("thread ") for m in mism) and any("device 0" in m and "node(s) 0" in m for m in mism),
                  mism)
        finally:
            runp.kill()
            runp.wait()
    r = show(999999999)
    check("no such process: exit 1, one line", r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr)
finish()
