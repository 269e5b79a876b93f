#!/usr/bin/env python3
"""The Python module as an ML engineer uses it, with real torch where torch matters:
plan() of a generated DGX A100-like node (expected values from hwloc-calc on the XML), show
and placement() after a bind from topology=, thread pools sized to the binding (torch's
intra-op pool, OMP_NUM_THREADS), cpu_count(), the forkserver worker warning (a real
DataLoader), a CPU-only node (bound False, one warning, whatever fallback), Python spelling
of errors and types, torch's AffinityMode, cuda_index() under CUDA_VISIBLE_DEVICES."""
import enum
import functools
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import tempfile
import warnings

from nbtest import BIN, GEN, check, ids, fake_gpu_topology, finish

import numabind

try:
    import torch
except ImportError:  # the torch parts are skipped with a note; the rest runs
    torch = None


def hwloc_calc(xml, *args):
    return subprocess.run(["hwloc-calc", "--input", xml, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def caught(fn):
    """(result, [warning messages of NumabindWarning], exception)."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        try:
            return fn(), [str(w.message) for w in ws if issubclass(w.category, numabind.NumabindWarning)], None
        except Exception as e:  # noqa: BLE001 - the test looks at it
            return None, [str(w.message) for w in ws if issubclass(w.category, numabind.NumabindWarning)], e


BINDING_VARS = {"NUMABIND_" + v for v in ("MODE", "CPUS", "MEMS", "MEM_POLICY", "DEVICE", "DEVICES", "DEVICE_PCI")}


def clean_env():
    for k in list(os.environ):
        if k in BINDING_VARS or k.startswith(("SLURM_", "OMPI_", "PMI", "LOCAL_RANK", "CUDA_VISIBLE")) or k == "OMP_NUM_THREADS":
            del os.environ[k]


class Log(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append((record.levelno, record.getMessage()))


def dataloader_worker_result(out_path, worker_id):
    """worker_init_fn of the forkserver DataLoader: numabind's answer, to a file."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        res = numabind.worker_init_fn(worker_id)
    out = {"res": res, "warnings": [str(w.message) for w in ws], "cpus": sorted(os.sched_getaffinity(0))}
    with open(out_path, "w") as f:
        json.dump(out, f)


def test_plan_dgx(work):
    xml = os.path.join(work, "dgx.xml")
    r = subprocess.run([sys.executable, GEN, "--preset", "dgx-a100", "-o", xml, "--verify"], check=True,
                       capture_output=True, text=True)
    gpu_pus = {}
    for line in (r.stdout + r.stderr).splitlines():
        if line.startswith("gpu "):
            bus, pus = line.split()[1], line.split()[-1]
            gpu_pus[bus] = ids(pus)
    buses = sorted(gpu_pus)  # numabind numbers accelerators in PCI order
    p = numabind.plan(topology=xml, ntasks=8, mode="node")
    cli = json.loads(subprocess.run([BIN, "plan", "--json", "--topology", xml, "--ntasks", "8", "--mode", "node"],
                                    check=True, capture_output=True, text=True).stdout)
    check("plan(): the same dict as `numabind plan --json`", p == cli, (p, cli))
    check("plan(): 8 tasks, task r on the r-th GPU in PCI order",
          [t["device"]["pci"] for t in p["tasks"]] == buses, [t["device"] for t in p["tasks"]])
    check("plan(mode=node): each task's CPUs are its GPU's local PUs (hwloc-calc)",
          all(set(t["cpus"]) == gpu_pus[t["device"]["pci"]] for t in p["tasks"]), p["tasks"])
    want_mems = [[int(hwloc_calc(xml, "pci=" + b, "-p", "-I", "numa"))] for b in buses]
    check("plan(): mems are each GPU's NUMA node (hwloc-calc -p -I numa)",
          [t["mems"] for t in p["tasks"]] == want_mems, ([t["mems"] for t in p["tasks"]], want_mems))
    before = (sorted(os.sched_getaffinity(0)), os.environ.get("NUMABIND_MODE"))
    p2 = numabind.plan(topology=xml, ntasks=8, mode="exclusive", local_rank=3)
    check("plan() applies nothing (affinity, NUMABIND_MODE unchanged)",
          (sorted(os.sched_getaffinity(0)), os.environ.get("NUMABIND_MODE")) == before)
    shared = [t for t in p2["tasks"] if t["device"]["pci"] in buses[2:4]]  # two GPUs on one NUMA node
    check("plan(mode=exclusive): the two tasks of one NUMA node split its PUs, disjoint",
          len(shared) == 2 and not set(shared[0]["cpus"]) & set(shared[1]["cpus"])
          and set(shared[0]["cpus"]) | set(shared[1]["cpus"]) == gpu_pus[buses[2]], shared)
    check("plan(local_rank=3) says which task this process is", p2.get("local_rank") == 3, p2.get("local_rank"))
    out = subprocess.run([sys.executable, "-m", "numabind", "plan", "--topology", xml, "--ntasks", "8", "--json"],
                         capture_output=True, text=True)
    check("python -m numabind plan --json prints plan()", out.returncode == 0 and json.loads(out.stdout) == p,
          out.stderr)
    _, _, e = caught(lambda: numabind.plan(topology=xml, mode="exclusive"))
    check("plan() without ntasks (no launcher variables): UsageError naming ntasks, not --ntasks",
          isinstance(e, numabind.UsageError) and "ntasks" in str(e) and "--ntasks" not in str(e), e)


def test_show_after_topology_bind(work, xml, gpus):
    bus = sorted(gpus)[0]
    r = numabind.bind(local_rank=0, ntasks=len(gpus), mode="exclusive", topology=xml, thread_pools=False)
    live = json.loads(subprocess.run([BIN, "topo", "--json"], capture_output=True, text=True).stdout or "{}")
    seen = [a["pci"] for a in live.get("accelerators", [])]
    if bus in seen:
        print("note: live discovery sees the fake GPU's bus; the plan fallback is not exercised")
        return
    p, _, e = caught(numabind.placement)
    check("placement() after bind(topology=...) does not raise although live discovery lacks the device", e is None, e)
    check("placement() reports the plan and a note", p is not None and p.get("plan", {}).get("cpus") ==
          r["env"]["NUMABIND_CPUS"] and "topology" in p.get("note", ""), p)
    s = subprocess.run([BIN, "show"], capture_output=True, text=True, env=dict(os.environ))
    check("`numabind show` after it: exit 0 with the plan and the note", s.returncode == 0 and "plan:" in s.stdout and
          "note:" in s.stdout, (s.returncode, s.stdout, s.stderr))
    m = subprocess.run([sys.executable, "-m", "numabind", "show"], capture_output=True, text=True, env=dict(os.environ))
    check("python -m numabind show after it: exit 0, note shown", m.returncode == 0 and "note:" in m.stdout,
          (m.stdout, m.stderr))


def test_thread_pools(xml, gpus):
    clean_env()
    log = Log()
    numabind.logger.addHandler(log)
    ncpu = len(gpus)
    bus = sorted(gpus)[0]
    want = gpus[bus]  # one core's PUs (hwloc-calc)
    if torch is not None:
        torch.set_num_threads(2)
    r = numabind.bind(local_rank=0, ntasks=ncpu, mode="exclusive", topology=xml)
    check("bind(): OMP_NUM_THREADS for children is the bound CPU count",
          os.environ.get("OMP_NUM_THREADS") == str(len(want)), os.environ.get("OMP_NUM_THREADS"))
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('OMP_NUM_THREADS'))"],
                           capture_output=True, text=True).stdout.strip()
    check("a child process gets OMP_NUM_THREADS", child == str(len(want)), child)
    check("cpu_count() is the bound CPU count (hwloc-calc), not os.cpu_count()", numabind.cpu_count() == len(want),
          (numabind.cpu_count(), want))
    if torch is None:
        print("note: torch not importable by", sys.executable, "- the intra-op pool part is skipped")
    else:
        check(f"torch.get_num_threads() 2 -> {len(want)} after bind to {len(want)} CPU(s)",
              torch.get_num_threads() == len(want) and r["thread_pools"].get("torch_num_threads") == [2, len(want)],
              (torch.get_num_threads(), r["thread_pools"]))
        said = [m for lvl, m in log.lines if lvl >= logging.WARNING and "set_num_threads" in m]
        check("the resize is said once (logger numabind, WARNING)", len(said) == 1, log.lines)
        torch.set_num_threads(2)
        numabind.bind(local_rank=0, ntasks=ncpu, mode="exclusive", topology=xml)
        said = [m for lvl, m in log.lines if lvl >= logging.WARNING and "set_num_threads" in m]
        check("a second resize is not said again at WARNING", len(said) == 1 and torch.get_num_threads() == len(want),
              log.lines)
        torch.set_num_threads(2)
        os.environ["OMP_NUM_THREADS"] = "7"
        r = numabind.bind(local_rank=0, ntasks=ncpu, mode="exclusive", topology=xml, thread_pools=False)
        check("thread_pools=False: torch's pool and OMP_NUM_THREADS untouched",
              torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "7" and r["thread_pools"] == {},
              (torch.get_num_threads(), r["thread_pools"]))
        r = numabind.bind(local_rank=0, ntasks=ncpu, mode="exclusive", topology=xml)
        check("a user's OMP_NUM_THREADS is kept", os.environ["OMP_NUM_THREADS"] == "7", os.environ["OMP_NUM_THREADS"])
        # Real work on the resized pool: a matmul runs and agrees with itself.
        a = torch.ones(64, 64)
        check("torch runs on the resized pool", float((a @ a).sum()) == 64.0 ** 3)
    numabind.logger.removeHandler(log)


def test_forkserver(work, xml, gpus):
    if torch is None:
        print("note: torch not importable: the DataLoader forkserver part is skipped")
        return
    clean_env()
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver
    forkserver.ensure_running()  # the forkserver exists before bind(), as in the report
    numabind.bind(local_rank=0, ntasks=len(gpus), mode="exclusive", topology=xml, thread_pools=False)
    out = os.path.join(work, "worker.json")
    ds = torch.utils.data.TensorDataset(torch.arange(4))
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context=ctx,
                                         worker_init_fn=functools.partial(dataloader_worker_result, out))
    batches = [b[0].tolist() for b in loader]
    w = json.load(open(out))
    check("DataLoader from a forkserver started before bind() ran", batches == [[0, 1], [2, 3]], batches)
    check("its worker is unbound (all CPUs) and worker_init_fn says so: one NumabindWarning naming the parent",
          not w["res"]["checked"] and w["res"].get("unbound_parent_bound") == os.getpid()
          and len(w["warnings"]) == 1 and "runs unbound although its parent" in w["warnings"][0], w)


def test_cpu_only(work):
    clean_env()
    xml = os.path.join(work, "cpu-only.xml")
    subprocess.run([sys.executable, GEN, "--preset", "cpu-only", "-o", xml], check=True, capture_output=True)
    for fb in ("fail", "warn"):
        r, ws, e = caught(lambda: numabind.bind(local_rank=0, ntasks=1, topology=xml, fallback=fb))
        check(f"no accelerator, fallback={fb!r}: no exception, bound False, error_kind no_accelerator",
              e is None and r["bound"] is False and r["error_kind"] == "no_accelerator", (e, r))
        check(f"no accelerator, fallback={fb!r}: exactly one NumabindWarning", len(ws) == 1 and "no accelerator" in ws[0],
              ws)
        check("the warning names Python's device_match, not --device-match",
              "device_match" in ws[0] and "--device-match" not in ws[0], ws)
    check("NUMABIND_MODE=none after the unbound bind", os.environ.get("NUMABIND_MODE") == "none")
    missing = os.path.join(work, "missing.xml")
    _, ws, e = caught(lambda: numabind.bind(local_rank=0, ntasks=1, topology=missing))
    check("other failures follow fallback='fail': Error naming the file", isinstance(e, numabind.Error) and
          not isinstance(e, numabind.UsageError) and "missing.xml" in str(e), e)
    check("... and NUMABIND_MODE is as before the call", os.environ.get("NUMABIND_MODE") == "none")
    r, ws, e = caught(lambda: numabind.bind(local_rank=0, ntasks=1, topology=missing, fallback="warn"))
    check("fallback='warn': bound False and a NumabindWarning", e is None and not r["bound"] and len(ws) == 1
          and "running unbound" in ws[0], (e, r, ws))
    if torch is not None:
        check("torch still trains on the CPU-only path", float(torch.ones(3).sum()) == 3.0)


class FakeAffinityMode(str, enum.Enum):  # torch.numa.binding.AffinityMode's shape (torch >= 2.9)
    NODE = "node"
    SOCKET = "socket"
    EXCLUSIVE = "exclusive"
    CORE_COMPLEX = "core-complex"


class NamedOnly(enum.Enum):
    CORE_COMPLEX = 4


def test_spelling(xml, gpus):
    clean_env()
    modes = [FakeAffinityMode.EXCLUSIVE]
    try:
        from torch.numa.binding import AffinityMode  # torch >= 2.9; 1.13 has none
        modes.append(AffinityMode.EXCLUSIVE)
    except ImportError:
        print("note: this torch has no torch.numa.binding.AffinityMode; a same-shaped enum stands in")
    for m in modes:
        r = numabind.bind(local_rank=0, ntasks=len(gpus), mode=m, topology=xml, thread_pools=False)
        check(f"mode={type(m).__module__}.{m!s} accepted", r["mode"] == "exclusive", r["mode"])
    p = numabind.plan(topology=xml, ntasks=len(gpus), mode=NamedOnly.CORE_COMPLEX)
    check("an enum whose name spells the mode (CORE_COMPLEX) is core-complex", p["mode"] == "core-complex", p["mode"])
    bad = [(dict(local_rank=True, ntasks=1), TypeError, "local_rank"),
           (dict(local_rank=0, ntasks=1.0), TypeError, "ntasks"),
           (dict(local_rank=0, ntasks=1, migrate="no"), TypeError, "migrate"),
           (dict(local_rank=0, ntasks=1, mode=3), TypeError, "mode"),
           (dict(local_rank=0, ntasks=1, mode="cores"), numabind.UsageError, "invalid mode 'cores'"),
           (dict(local_rank=0, ntasks=1, fallback="ignore"), numabind.UsageError, "fallback"),
           (dict(local_rank=-1, ntasks=1), numabind.UsageError, "local_rank"),
           (dict(local_rank=5, ntasks=2, topology=xml), numabind.UsageError, "local_rank"),
           (dict(mode="exclusive", topology=xml), numabind.Error, "local_rank=N ntasks=M")]
    for kwargs, kind, word in bad:
        _, _, e = caught(lambda: numabind.bind(**kwargs))
        check(f"bind({kwargs}) raises {kind.__name__} naming {word!r}, no CLI flag",
              isinstance(e, kind) and word in str(e) and " --" not in str(e), repr(e))
    check("the refused calls left the earlier binding's NUMABIND_MODE as it was",
          os.environ.get("NUMABIND_MODE") == "exclusive")


def test_cuda_index(xml, gpus):
    if len(gpus) < 2:
        print("note: one CPU: cuda_index() reordering needs 2 fake GPUs")
        return
    clean_env()
    _, _, e = caught(numabind.cuda_index)
    check("cuda_index() unbound: Error", isinstance(e, numabind.Error), e)
    # CUDA_VISIBLE_DEVICES=1,0: local rank 0 owns physical device 1, which CUDA numbers 0.
    os.environ["CUDA_VISIBLE_DEVICES"] = "1,0"
    r = numabind.bind(local_rank=0, ntasks=2, topology=xml, thread_pools=False)
    check("CUDA_VISIBLE_DEVICES=1,0: rank 0 owns physical device 1", r["device"] == 1, r["device"])
    check("... and cuda_index() is 0 (its position in CUDA_VISIBLE_DEVICES)", numabind.cuda_index(topology=xml) == 0)
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
    check("CUDA_VISIBLE_DEVICES changed to 0,1 afterwards: cuda_index() is 1", numabind.cuda_index(topology=xml) == 1)
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    _, _, e = caught(lambda: numabind.cuda_index(topology=xml))
    check("CUDA_VISIBLE_DEVICES=0 hides device 1: Error saying so", isinstance(e, numabind.Error) and
          "not visible" in str(e), e)
    del os.environ["CUDA_VISIBLE_DEVICES"]
    check("CUDA_VISIBLE_DEVICES unset: cuda_index() is the physical index", numabind.cuda_index(topology=xml) == 1)


def test_within_affinity(xml, gpus):
    clean_env()
    if len(gpus) < 2:
        return
    keep = os.sched_getaffinity(0)
    first = sorted(gpus)[0]
    os.sched_setaffinity(0, gpus[first])  # as taskset or a launcher's pinning would
    p_wide = numabind.plan(topology=xml, ntasks=1, mode="socket")
    p_in = numabind.plan(topology=xml, ntasks=1, mode="socket", within_affinity=True)
    check("within_affinity=True: the plan stays inside the current affinity",
          set(p_in["tasks"][0]["cpus"]) <= gpus[first] and set(p_wide["tasks"][0]["cpus"]) > gpus[first],
          (p_in["tasks"][0]["cpus"], p_wide["tasks"][0]["cpus"]))
    os.sched_setaffinity(0, keep)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        clean_env()
        xml, gpus = fake_gpu_topology(work)
        test_plan_dgx(work)
        test_show_after_topology_bind(work, xml, gpus)
        test_thread_pools(xml, gpus)
        test_forkserver(work, xml, gpus)
        test_cpu_only(work)
        test_spelling(xml, gpus)
        test_cuda_index(xml, gpus)
        test_within_affinity(xml, gpus)
    finish()
