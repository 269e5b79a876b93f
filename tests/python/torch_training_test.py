#!/usr/bin/env python3
"""examples/train_resnet18.py under real PyTorch (Debian's python3-torch; CPU, gloo, a few
steps on small synthetic images), on a topology of this machine with one fake GPU local to
each core, so that exclusive mode gives task r the CPUs of GPU r (hwloc-calc says which).

  --launcher spawn     torch.multiprocessing.spawn; every worker calls numabind.bind itself,
                       after gloo and the intra-op pool have started their threads (--bind-late)
  --launcher torchrun  python3 -m torch.distributed.run --no_python numabind run --mode exclusive
  --launcher srun      srun --numa-binding=exclusive in a local Slurm cluster (tests/slurm/cluster.sh)
                       with the SPANK plugin and plugstack `topology=` (needs root and Slurm)

While the job waits at a barrier after its first step, this observer reads /proc for every
training process, every one of its threads and every DataLoader worker (and their threads):
Cpus_allowed_list must be the GPU's CPUs, each thread's memory policy (its numa_maps) prefer
on the CPUs' node, no anonymous page off that node; `numabind show --pid` must agree (no
mismatch). Exit 77 when torch is not importable by /usr/bin/python3."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from nbtest import BIN, anon_pages_by_node, check, fake_gpu_topology, finish, mems_of_cpus, process_threads

ap = argparse.ArgumentParser()
ap.add_argument("--launcher", choices=["spawn", "torchrun", "srun"], required=True)
args = ap.parse_args()
PY = "/usr/bin/python3"
if subprocess.run([PY, "-c", "import torch, torch.distributed"], capture_output=True).returncode != 0:
    print("skip: /usr/bin/python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)
EXAMPLE = os.environ["NUMABIND_EXAMPLE"]
NTASKS = 2
WORKERS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def observe(proc, report, expected, topology):
    """Waits for every rank and worker to report, then checks them all from /proc."""
    deadline = time.time() + 240
    want = [f"rank{r}.json" for r in range(NTASKS)] + [f"worker-{r}-{w}.json" for r in range(NTASKS) for w in range(WORKERS)]
    while time.time() < deadline and proc.poll() is None and \
            not all(os.path.exists(os.path.join(report, f)) for f in want):
        time.sleep(0.1)
    missing = [f for f in want if not os.path.exists(os.path.join(report, f))]
    check("every rank and DataLoader worker reached the barrier", not missing, missing)
    if missing:
        return
    for r in range(NTASKS):
        info = json.load(open(os.path.join(report, f"rank{r}.json")))
        lr = info["local_rank"]
        cpus = expected[lr]
        home = mems_of_cpus(cpus)
        policy = "prefer:" + ",".join(map(str, sorted(home)))
        pids = [("main", info["pid"])] + [(f"worker{w}", json.load(open(os.path.join(report, f"worker-{r}-{w}.json")))["pid"])
                                          for w in range(WORKERS)]
        for role, pid in pids:
            threads = process_threads(pid)
            bad = [(tid, name, sorted(c)) for tid, name, c, _ in threads if c != cpus]
            check(f"rank {r} {role} (pid {pid}): all {len(threads)} threads on CPUs {sorted(cpus)}", threads and not bad, bad)
            badpol = [(tid, name, p) for tid, name, _, p in threads if p != policy]
            check(f"rank {r} {role}: every thread's memory policy {policy} (numa_maps)", not badpol, badpol)
            pages = anon_pages_by_node(pid)
            off = {n: c for n, c in pages.items() if n not in home}
            check(f"rank {r} {role}: anonymous pages resident only on node(s) {sorted(home)}",
                  sum(pages.values()) > 0 and not off, pages)
            if role == "main":
                s = subprocess.run([BIN, "show", "--pid", str(pid), "--json", "--topology", topology],
                                   capture_output=True, text=True)
                j = json.loads(s.stdout) if s.returncode == 0 else {}
                check(f"rank {r} main: `numabind show --pid` sees its plan and no mismatch",
                      j.get("plan") and set(j["plan"]["cpus"]) == cpus and j.get("mismatches") == [], s.stdout + s.stderr)
        if args.launcher == "spawn":
            before = set(info["tids_before_bind"]) & {t for t, _, _, _ in process_threads(info["pid"])}
            check(f"rank {r}: threads that existed before bind() ({len(before)}) are among those checked", len(before) > 1,
                  info["tids_before_bind"])


with tempfile.TemporaryDirectory() as work:
    os.chmod(work, 0o755)
    xml, gpus = fake_gpu_topology(work)
    buses = sorted(gpus)[:NTASKS]
    if len(buses) < NTASKS:
        print("skip: needs 2 CPUs")
        sys.exit(77)
    expected = [gpus[b] for b in buses]
    report = os.path.join(work, "report")
    os.mkdir(report)
    os.chmod(report, 0o777)
    train = [PY, EXAMPLE, "--launcher", args.launcher, "--steps", "4", "--batch-size", "4", "--image-size", "64",
             "--resize", "32", "--workers", str(WORKERS), "--classes", "10", "--report-dir", report]
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("SLURM_", "NUMABIND_MODE", "NUMABIND_CPUS", "LOCAL_RANK", "OMPI_", "PMI")):
            del env[k]
    env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # the numabind module from the build tree
    cluster = None
    if args.launcher == "spawn":
        cmd = train + ["--nprocs", str(NTASKS), "--master-port", str(free_port()), "--numabind-mode", "exclusive",
                       "--numabind-topology", xml, "--numabind-fallback", "fail", "--bind-late"]
    elif args.launcher == "torchrun":
        cmd = [PY, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(NTASKS), "--master_addr",
               "127.0.0.1", "--master_port", str(free_port()), # torch 1.13 on Python 3.11: "0" (the default) parses to None and crashes (IntFlag no longer
               # iterates its zero member); 2 = stderr, teed to the console.
               "--redirects", "2", "--tee", "2", "--log_dir", os.path.join(work, "torchrun-logs"), "--no_python", BIN, "run", "--mode", "exclusive",
               "--topology", xml, "--"] + train
    else:
        if os.geteuid() != 0 or not shutil.which("slurmctld") or not os.environ.get("NUMABIND_PLUGIN"):
            print("skip: srun needs root, Slurm and the SPANK plugin")
            sys.exit(77)
        cluster = os.path.join(work, "cluster")
        plug = os.path.join(work, "plugstack.conf")
        with open(plug, "w") as f:
            f.write(f"optional {os.environ['NUMABIND_PLUGIN']} topology={xml}\n")
        subprocess.run([os.environ["NUMABIND_CLUSTER"], "start", cluster, "--plugstack", plug, "--gpus", "2"],
                       check=True, capture_output=True)
        env["SLURM_CONF"] = os.path.join(cluster, "slurm.conf")
        env["MASTER_PORT"] = str(free_port())
        cmd = ["srun", "-n", str(NTASKS), "--gpus-per-task=1", "--numa-binding=exclusive", "--export=ALL",
               "--chdir", work] + train
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        observe(proc, report, expected, xml)
    finally:
        open(os.path.join(report, "go"), "w").close()
        try:
            out, _ = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if cluster:
            subprocess.run([os.environ["NUMABIND_CLUSTER"], "stop", cluster], capture_output=True)
    check(f"training exits 0 ({time.time() - t0:.1f} s)", proc.returncode == 0, out[-3000:])
    check("every rank trained an epoch", all(f"rank {r} epoch 0" in out for r in range(NTASKS)), out[-3000:])
finish()
