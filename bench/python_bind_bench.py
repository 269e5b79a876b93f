#!/usr/bin/env python3
"""python_bind_bench.py — what numabind.bind() costs a Python process (docs/PERFORMANCE.md,
"Python bind() costs").

    PYTHONPATH=build/python python3 bench/python_bind_bench.py [--rounds 15] [--threads 1,10,100,500]
        [--gib 1,4] [--device-match VVVV:DDDD] [--json OUT]     (--threads "" or --gib "": skip that part)

Every sample is a fresh process (what a spawned DDP worker pays):
- bind: N threads started and blocked first, then the wall time of bind(mode="node") on this
  machine from the per-boot topology cache (written to a private directory with
  `numabind topo --export-cache`; NUMABIND_BIN names the command), paired in the same process
  with torch.numa.binding's way (os.sched_setaffinity of every /proc/self/task entry).
  One extra row: 1 thread with NUMABIND_TOPOLOGY_CACHE=off (live discovery).
- migrate: G GiB of anonymous memory touched, then, in the same process, the bare
  migrate_pages(2) call numabind makes (every allowed node but the home to the home),
  bind(migrate=False) and bind(migrate=True), in alternating order; the migrate cost is their
  difference. One read
  of /proc/self/numa_maps is timed as well: that walk is what bind(migrate=True) may repeat.
This machine needs an "accelerator": a PCI device named with --device-match (default: the
first network controller, which is enough to plan and bind for real).
Medians and quartiles (ms) are printed; --json writes every sample.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD_BIND = r"""
import os, sys, threading, time, json
n, dm = int(sys.argv[1]), sys.argv[2]
import numabind
stop = threading.Event()
ts = [threading.Thread(target=stop.wait, daemon=True) for _ in range(n - 1)]
for t in ts: t.start()
t0 = time.perf_counter()
r = numabind.bind(local_rank=0, ntasks=1, mode="node", device_match=dm, thread_pools=False)
t1 = time.perf_counter()
assert r["bound"] and r["threads"] == n, r
cpus = set(r["cpus"])
t2 = time.perf_counter()
for tid in os.listdir("/proc/self/task"):   # torch.numa.binding's loop
    try: os.sched_setaffinity(int(tid), cpus)
    except OSError: pass
t3 = time.perf_counter()
print(json.dumps({"bind_ms": (t1 - t0) * 1e3, "loop_ms": (t3 - t2) * 1e3}))
stop.set()
"""

CHILD_MIGRATE = r"""
import ctypes, json, mmap, os, sys, time
gib, dm = float(sys.argv[1]), sys.argv[2]
import numabind
size = int(gib * (1 << 30))
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
page = mmap.PAGESIZE
for off in range(0, size, page):
    m[off] = 1
plan = numabind.plan(local_rank=0, ntasks=1, mode="node", device_match=dm)
home = plan["tasks"][0]["mems"]
allowed = [int(x) for part in open("/proc/self/status").read().split("Mems_allowed_list:")[1].split()[0].split(",")
           for x in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))]
words = 1024 // 64
src, dst = (ctypes.c_ulong * words)(), (ctypes.c_ulong * words)()
for n in allowed:
    if n not in home: src[n // 64] |= 1 << (n % 64)
for n in home: dst[n // 64] |= 1 << (n % 64)
libc = ctypes.CDLL(None, use_errno=True)
t0 = time.perf_counter()
libc.syscall(256, 0, 1024, src, dst)           # SYS_migrate_pages on x86_64, as numabind calls it
t1 = time.perf_counter()
with open("/proc/self/numa_maps") as f: f.read()
t2 = time.perf_counter()
def timed(migrate):
    a = time.perf_counter()
    res = numabind.bind(local_rank=0, ntasks=1, mode="node", device_match=dm, thread_pools=False, migrate=migrate)
    return time.perf_counter() - a, res
# Which call comes first alternates between samples (the second one finds warm caches).
if sys.argv[3] == "0":
    plain, _ = timed(False)
    with_migrate, r = timed(True)
else:
    with_migrate, r = timed(True)
    plain, _ = timed(False)
print(json.dumps({"bare_ms": (t1 - t0) * 1e3, "walk_ms": (t2 - t1) * 1e3, "bind_ms": plain * 1e3,
                  "bind_migrate_ms": with_migrate * 1e3, "migrate_cost_ms": (with_migrate - plain) * 1e3,
                  "other_nodes": int(any(src)), "pages_off_home_before": r["pages_off_home_before"],
                  "pages_moved": r["pages_moved"]}))
"""


def first_network_controller():
    base = "/sys/bus/pci/devices"
    for d in sorted(os.listdir(base)):
        try:
            cls = open(os.path.join(base, d, "class")).read().strip()
            if cls.startswith("0x02"):
                ven = open(os.path.join(base, d, "vendor")).read().strip()[2:]
                dev = open(os.path.join(base, d, "device")).read().strip()[2:]
                return f"{ven}:{dev}"
        except OSError:
            continue
    raise SystemExit("no network controller to stand in for an accelerator: pass --device-match")


def quartiles(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


def child(code, args, env):
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"child failed: {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", default="1,10,100,500")
    ap.add_argument("--gib", default="1,4")
    ap.add_argument("--device-match", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    dm = a.device_match or first_network_controller()
    out = {"device_match": dm, "bind": {}, "migrate": {}}
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o755)
        env = dict(os.environ, NUMABIND_TOPOLOGY_CACHE=cache)
        for k in [k for k in env if k.startswith(("NUMABIND_MODE", "NUMABIND_CPUS", "OMP_NUM_THREADS"))]:
            del env[k]
        subprocess.run([os.environ.get("NUMABIND_BIN", "numabind"), "topo", "--export-cache"], check=True, env=env,
                       capture_output=True)
        rows = [(int(n), env) for n in a.threads.split(",") if n] + [(1, dict(env, NUMABIND_TOPOLOGY_CACHE="off"))]
        print(f"bind(mode='node', device_match={dm!r}), {a.rounds} fresh processes each; ms: q1 / median / q3")
        for n, e in (rows if a.threads else []):
            key = f"{n}" + ("" if e is env else " (no cache)")
            samples = [child(CHILD_BIND, [str(n), dm], e) for _ in range(a.rounds)]
            out["bind"][key] = samples
            b = quartiles([s["bind_ms"] for s in samples])
            loop = quartiles([s["loop_ms"] for s in samples])
            print(f"  {key:>14} threads: bind {b[0]:7.2f} / {b[1]:7.2f} / {b[2]:7.2f}   "
                  f"setaffinity loop {loop[0]:6.2f} / {loop[1]:6.2f} / {loop[2]:6.2f}")
        print("migrate=True against the bare migrate_pages call (same process); ms: median")
        for g in [g for g in a.gib.split(",") if g]:
            samples = [child(CHILD_MIGRATE, [g, dm, str(i % 2)], env) for i in range(max(4, a.rounds // 3))]
            out["migrate"][g] = samples
            med = {k: statistics.median(s[k] for s in samples) for k in
                   ("bare_ms", "walk_ms", "bind_ms", "bind_migrate_ms", "migrate_cost_ms")}
            print(f"  {g:>4} GiB: bare migrate_pages {med['bare_ms']:7.2f}, one numa_maps walk {med['walk_ms']:7.2f}, "
                  f"bind {med['bind_ms']:6.2f}, bind(migrate=True) {med['bind_migrate_ms']:7.2f} "
                  f"(+{med['migrate_cost_ms']:.2f}); other allowed nodes: {samples[0]['other_nodes']}, "
                  f"pages off home before: {samples[0]['pages_off_home_before']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
