#!/usr/bin/env python3
"""torchrun with fewer workers than GPUs, under real torch: worker r is bound for GPU r (torch's
rule: the GPU it computes on with cuda:LOCAL_RANK), through `numabind run` and through bind();
NUMABIND_DEVICE and cuda_index() name it; torchrun's OMP_NUM_THREADS=1 is said once per process
and threads= replaces it. The node: this machine's XML split into two NUMA nodes (one per
package here) with two fake GPUs on each (gen_topology --split-numa 2); expected CPUs from
hwloc-calc on that XML for the PCI address of GPU LOCAL_RANK, the CPUs applied from
/proc/self/status. Skipped (77) without torch or with fewer than 2 CPUs."""
import json
import os
import socket
import subprocess
import sys
import tempfile

from nbtest import BIN, GEN, check, ids, finish

PY = "/usr/bin/python3"
if subprocess.run([PY, "-c", "import torch.distributed.run"], capture_output=True).returncode != 0:
    print("skip: /usr/bin/python3 cannot import torch.distributed.run (python3-torch)")
    sys.exit(77)
if len(os.sched_getaffinity(0)) < 2:
    print("skip: needs 2 CPUs for two NUMA nodes")
    sys.exit(77)

# Each worker prints one JSON line: what it was bound for and what the kernel applied.
PROBE = r"""
import json, os, sys, warnings
mode = sys.argv[1]
out = {"local_rank": int(os.environ["LOCAL_RANK"]), "omp_before": os.environ.get("OMP_NUM_THREADS")}
if mode != "run":
    import torch, numabind
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kw = {"threads": 2} if mode == "bind-threads" else {}
        r = numabind.bind(topology=sys.argv[2], **kw)
        numabind.bind(topology=sys.argv[2], **kw)  # a second bind: the OMP line is said once per process
    out.update(device_rule=r.get("device_rule"), torch_threads=torch.get_num_threads(),
               cuda_index=numabind.cuda_index(topology=sys.argv[2]),
               omp_lines=[str(w.message) for w in caught if "torchrun's default" in str(w.message)])
with open("/proc/self/status") as f:
    out["cpus"] = [l.split(":", 1)[1].strip() for l in f if l.startswith("Cpus_allowed_list")][0]
out.update(device=os.environ.get("NUMABIND_DEVICE"), omp=os.environ.get("OMP_NUM_THREADS"))
print("PROBE " + json.dumps(out), flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hwloc_pus(xml, bus):
    r = subprocess.run(["hwloc-calc", "--input", xml, "--po", "-I", "pu", "pci=" + bus],
                       capture_output=True, text=True, check=True)
    return ids(r.stdout)


def torchrun(work, tail, tag):
    # torch 1.13 on Python 3.11 crashes with its default --redirects/--tee 0: 2 = stderr, teed.
    cmd = [PY, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "--redirects", "2", "--tee", "2",
           "--log_dir", os.path.join(work, "logs-" + tag)] + tail
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMABIND_", "OMP_", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=os.environ["PYTHONPATH"], NUMABIND_TOPOLOGY_CACHE="off")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    # Two workers' lines may share a console line: decode each object where it starts.
    text, decoder, workers = r.stdout + r.stderr, json.JSONDecoder(), {}
    for at in [i for i in range(len(text)) if text.startswith("PROBE {", i)]:
        w = decoder.raw_decode(text, at + len("PROBE "))[0]
        workers[w["local_rank"]] = w
    return r, workers


def gen(work, name, args):
    """An XML of this machine with fake GPUs; {bus: PUs} in PCI order (gen_topology --verify:
    hwloc-calc's answer for each GPU)."""
    xml = os.path.join(work, name)
    r = subprocess.run([sys.executable, GEN, "-o", xml, "--verify"] + args, check=True, capture_output=True, text=True)
    buses = sorted(line.split()[1] for line in (r.stdout + r.stderr).splitlines() if line.startswith("gpu "))
    return xml, buses


with tempfile.TemporaryDirectory() as work:
    xml, buses = gen(work, "two-numa.xml", ["--split-numa", "2", "--gpu", "numa:0", "--gpu", "numa:0",
                                            "--gpu", "numa:1", "--gpu", "numa:1"])
    probe = os.path.join(work, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    want = {r: hwloc_pus(xml, buses[r]) for r in range(len(buses))}
    check("the node: GPUs 0,1 on one NUMA node, 2,3 on the other (hwloc-calc)",
          len(buses) == 4 and want[0] == want[1] and want[2] == want[3] and want[1] != want[2], (buses, want))
    # For the thread counts: both workers on one NUMA node of every CPU (several CPUs each).
    flat, flat_buses = gen(work, "one-numa.xml", ["--gpu", "numa:0", "--gpu", "numa:0", "--gpu", "numa:0"])
    flat_pus = hwloc_pus(flat, flat_buses[0])

    for how, tail in (("numabind run", ["--no_python", BIN, "run", "--topology", xml, "--", PY, probe, "run"]),
                      ("bind()", [probe, "bind", xml])):
        r, workers = torchrun(work, tail, how.split("(")[0].replace(" ", "-"))
        check(f"torchrun --nproc_per_node 2, {how}: both workers ran", r.returncode == 0 and sorted(workers) == [0, 1],
              (r.stdout + r.stderr)[-3000:])
        for rank, w in sorted(workers.items()):
            check(f"{how}: worker {rank} NUMABIND_DEVICE={rank} (GPU LOCAL_RANK)", w["device"] == str(rank), w)
            check(f"{how}: worker {rank} on GPU {rank}'s CPUs {sorted(want[rank])} (hwloc-calc pci={buses[rank]}), "
                  f"not GPU {2 * rank}'s block", ids(w["cpus"]) == want[rank], w)
            if how != "numabind run":
                check(f"{how}: worker {rank} cuda_index() = {rank}, device_rule local-rank",
                      w["cuda_index"] == rank and w["device_rule"] == "local-rank", w)

    for how, mode in (("bind()", "bind"), ("bind(threads=2)", "bind-threads")):
        r, workers = torchrun(work, [probe, mode, flat], "omp-" + mode)
        check(f"torchrun, {how} on {sorted(flat_pus)}: both workers ran", r.returncode == 0 and sorted(workers) == [0, 1],
              (r.stdout + r.stderr)[-3000:])
        for rank, w in sorted(workers.items()):
            check(f"{how}: worker {rank} on the GPUs' CPUs {sorted(flat_pus)} (hwloc-calc)",
                  ids(w["cpus"]) == flat_pus, w)
            check(f"{how}: torchrun set OMP_NUM_THREADS=1 for worker {rank}", w["omp_before"] == "1", w)
            if mode == "bind":
                check(f"{how}: worker {rank}: torchrun's OMP_NUM_THREADS=1 kept and said once (two binds), "
                      "naming threads=N", len(w["omp_lines"]) == 1 and "threads=N" in w["omp_lines"][0]
                      and w["omp"] == "1" and w["torch_threads"] == 1, w)
            else:
                check(f"{how}: worker {rank}: OMP_NUM_THREADS=2, torch's pool 2, nothing said",
                      w["omp"] == "2" and w["torch_threads"] == 2 and not w["omp_lines"], w)
finish()
