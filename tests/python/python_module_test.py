#!/usr/bin/env python3
"""The Python module: bind() reaches threads started before it, worker_init_fn re-applies a
binding a forked worker lost, placement() is `numabind show --json`, errors are exceptions
with the command's messages. Values checked from /proc."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from nbtest import BIN, check, fake_gpu_topology, finish, process_threads

import numabind

with tempfile.TemporaryDirectory() as work:
    xml, gpus = fake_gpu_topology(work)
    bus = sorted(gpus)[-1]
    rank = len(gpus) - 1
    want = gpus[bus]
    stop = threading.Event()
    ts = [threading.Thread(target=stop.wait) for _ in range(3)]
    for t in ts:
        t.start()
    r = numabind.bind(local_rank=rank, ntasks=len(gpus), mode="exclusive", topology=xml, migrate=True)
    threads = process_threads(os.getpid())
    check("bind(): all 4 threads (3 started before) on the GPU's CPUs (hwloc-calc)",
          len(threads) == 4 and all(c == want for _, _, c, _ in threads), threads)
    check("bind(): each thread's memory policy is prefer:0", all(p == "prefer:0" for *_, p in threads), threads)
    check("bind(): os.environ carries NUMABIND_CPUS", os.environ.get("NUMABIND_CPUS") == r["env"]["NUMABIND_CPUS"])
    check("bind(migrate=True) reports pages moved", r["migrated"] and r["pages_moved"] >= 0, r)
    p = numabind.placement(topology=xml)
    cli = json.loads(subprocess.run([BIN, "show", "--json", "--topology", xml], capture_output=True, text=True,
                                    env=dict(os.environ)).stdout)
    check("placement() has `show --json`'s keys and device",
          list(p) == list(cli) and p["device"]["pci"] == bus == cli["device"]["pci"], (p, cli))

    # A forked worker whose thread lost the binding gets it back from worker_init_fn.
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, set(range(os.cpu_count())))
        res = numabind.worker_init_fn(0)
        os.write(wr, json.dumps({"res": res, "cpus": sorted(os.sched_getaffinity(0))}).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = json.loads(os.read(rd, 65536))
    lost = len(want) < os.cpu_count()
    check("worker_init_fn: a worker that lost its CPUs is re-bound",
          child["cpus"] == sorted(want) and (child["res"]["reapplied"] or not lost), child)
    res = numabind.worker_init_fn(0)
    check("worker_init_fn: nothing lost, nothing re-applied", res["checked"] and not res["reapplied"], res)

    try:
        numabind.bind(mode="cores")
        check("bad mode raises UsageError", False)
    except numabind.UsageError as e:
        check("bad mode raises UsageError with the command's message", "invalid mode 'cores'" in str(e), e)
    try:
        numabind.bind(local_rank=0, ntasks=1, topology=os.path.join(work, "missing.xml"))
        check("missing topology raises Error", False)
    except numabind.UsageError:
        check("missing topology is not a usage error", False)
    except numabind.Error as e:
        check("missing topology raises Error naming the file", "missing.xml" in str(e), e)
    stop.set()
finish()
