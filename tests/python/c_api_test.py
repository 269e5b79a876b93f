#!/usr/bin/env python3
"""The C API through nb_api_probe (a C program): threads started before numabind_bind are all
bound, every thread's memory policy is the plan's, errors are the command's one-line messages,
and libnumabind.so.0 exports only numabind_*. Expected CPUs come from hwloc-calc."""
import os
import subprocess
import tempfile

from nbtest import PROBE, BIN, check, ids, fake_gpu_topology, finish, mems_of_cpus


def probe(*args, env=None):
    r = subprocess.run([PROBE, *args], capture_output=True, text=True, env=env, timeout=60)
    kv = {}
    threads = []
    for line in r.stdout.splitlines():
        if line.startswith("thread="):
            f = dict(x.split("=", 1) for x in line.split(" ", 2)[:2])
            pol = line.split(" policy=", 1)[1]
            threads.append((f["thread"], ids(f["cpus"]), pol))
        elif "=" in line:
            k, v = line.split("=", 1)
            kv.setdefault(k, v)
    return r, kv, threads


with tempfile.TemporaryDirectory() as work:
    xml, gpus = fake_gpu_topology(work)
    buses = sorted(gpus)
    n = len(buses)
    for rank, bus in enumerate(buses):
        r, kv, threads = probe("--threads", "3", f"mode=exclusive", f"local_rank={rank}", f"ntasks={n}", f"topology={xml}")
        want = gpus[bus]
        home = mems_of_cpus(want)
        check(f"rank {rank}: status 0", kv.get("status") == "0", r.stdout + r.stderr)
        check(f"rank {rank}: 4 threads (3 started before bind) all on CPUs {sorted(want)} (hwloc-calc of GPU {bus})",
              len(threads) == 4 and all(c == want for _, c, _ in threads), threads)
        check(f"rank {rank}: every thread's own memory policy is prefer on node(s) {sorted(home)}",
              all(p == "prefer:" + ",".join(map(str, sorted(home))) for _, _, p in threads), threads)
        check(f"rank {rank}: result counts the threads", kv.get("result_threads") == "4", kv.get("result_threads"))

    r, kv, _ = probe("mode=cores")
    check("bad mode: usage status, the command's message",
          kv.get("status") == "2" and "invalid mode 'cores'" in kv.get("error", "") and "core-complex" in kv["error"], kv)
    cli = subprocess.run([BIN, "run", "--mode", "cores", "--", "true"], capture_output=True, text=True)
    check("same one-line message as `numabind run`", cli.stderr.strip() == "numabind: " + kv.get("error", ""), cli.stderr)
    r, kv, _ = probe("colour=red")
    check("unknown option key: usage status naming it", kv.get("status") == "2" and "colour" in kv.get("error", ""), kv)
    r, kv, _ = probe("local_rank=0", "ntasks=1", "topology=" + os.devnull + "x")
    check("missing topology: status 1, one line", kv.get("status") == "1" and "\n" not in kv.get("error", "x\n"), kv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "LOCAL_RANK", "OMPI_", "PMI"))}
    r, kv, _ = probe(f"topology={xml}", "fallback=warn", env=env)
    check("fallback=warn: status 0, unbound, reason kept",
          kv.get("status") == "0" and '"bound":false' in kv.get("result", "") and "local rank" in kv.get("result", ""), kv)

    so = os.environ["NUMABIND_SO"]
    syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout.split("\n")
    names = [s.split()[-1] for s in syms if s.strip()]
    check("libnumabind.so exports only numabind_* (and its version node)",
          names and all(s.startswith("numabind_") or s == "NUMABIND_1" for s in names), names)
    soname = subprocess.run(["objdump", "-p", so], capture_output=True, text=True).stdout
    check("SONAME libnumabind.so.0", "SONAME               libnumabind.so.0" in soname)
finish()
