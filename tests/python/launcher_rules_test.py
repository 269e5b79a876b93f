#!/usr/bin/env python3
"""Rules a launcher's task meets, in fresh processes on this machine: under srun's variables
with fewer tasks than GPUs the block rule holds and local rank 0 says once per step what each
task was bound for; `numabind run --omp` under torchrun's variables says its OMP_NUM_THREADS=1
was kept, --threads replaces it; a huge ntasks is a one-line usage error (CLI, C API, Python);
cuda_index() after a bind from a topology file names the file to pass; torch's NumaOptions is
accepted as the mode. The node: this machine's XML split into two NUMA nodes with two fake
GPUs each (gen_topology --split-numa 2); expected CPUs from hwloc-calc on it."""
import ctypes
import dataclasses
import enum
import json
import os
import subprocess
import sys
import tempfile

from nbtest import BIN, GEN, check, ids, finish

SO = os.environ["NUMABIND_SO"]
CLEAN = ("NUMABIND_", "OMP_", "SLURM_", "OMPI_", "LOCAL_", "TORCHELASTIC_", "GROUP_RANK", "CUDA_VISIBLE")
SHOW = "echo device=$NUMABIND_DEVICE devices=$NUMABIND_DEVICES omp=$OMP_NUM_THREADS; grep Cpus_allowed_list /proc/self/status"


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN)}
    env.update(NUMABIND_TOPOLOGY_CACHE="off", **extra)
    return env


def run(cmd, **extra):
    return subprocess.run(cmd, capture_output=True, text=True, env=env_with(**extra), timeout=120)


def shown(out):
    fields = dict(item.split("=", 1) for item in out.split("\n")[0].split())
    fields["cpus"] = ids(out.split("Cpus_allowed_list:")[1].strip()) if "Cpus_allowed_list:" in out else set()
    return fields


def hwloc_pus(xml, bus):
    r = subprocess.run(["hwloc-calc", "--input", xml, "--po", "-I", "pu", "pci=" + bus], capture_output=True,
                       text=True, check=True)
    return ids(r.stdout)


def gen(work, name, args):
    xml = os.path.join(work, name)
    r = subprocess.run([sys.executable, GEN, "-o", xml, "--verify"] + args, check=True, capture_output=True, text=True)
    return xml, sorted(line.split()[1] for line in (r.stdout + r.stderr).splitlines() if line.startswith("gpu "))


def python(code, *args, **extra):
    return run([sys.executable, "-c", code] + list(args), **extra)


# Under the ASan pass the instrumented library cannot load into an uninstrumented python3:
# the cases that load it in-process are left to the normal pass (the CLI's are kept).
ASAN = os.environ.get("NUMABIND_ASAN_PASS") == "1"

if len(os.sched_getaffinity(0)) < 2:
    print("skip: needs 2 CPUs for two NUMA nodes")
    sys.exit(77)

with tempfile.TemporaryDirectory() as work:
    xml, buses = gen(work, "two-numa.xml", ["--split-numa", "2"] + ["--gpu", "numa:0"] * 2 + ["--gpu", "numa:1"] * 2)
    pus = [hwloc_pus(xml, b) for b in buses]
    check("the node: GPUs 0,1 on one NUMA node, 2,3 on the other (hwloc-calc)",
          len(pus) == 4 and pus[0] == pus[1] and pus[2] == pus[3] and pus[0] != pus[2], pus)

    # 1. srun's variables, 2 tasks, 4 GPUs: blocks 0,1 and 2,3; rank 0 says it once.
    for rank in (0, 1):
        r = run([BIN, "run", "--topology", xml, "--", "sh", "-c", SHOW], SLURM_LOCALID=str(rank),
                SLURM_STEP_TASKS_PER_NODE="2")
        got = shown(r.stdout)
        check(f"srun task {rank}: bound for its block {2 * rank},{2 * rank + 1}, NUMABIND_DEVICE={2 * rank}",
              r.returncode == 0 and got.get("devices") == f"{2 * rank},{2 * rank + 1}" and got.get("device") == str(2 * rank),
              r.stdout + r.stderr)
        check(f"srun task {rank}: on GPU {2 * rank}'s CPUs (hwloc-calc)", got["cpus"] == pus[2 * rank], got)
        notice = [l for l in r.stderr.splitlines() if "share the devices in blocks" in l]
        if rank == 0:
            check("srun task 0 says once which GPUs each task was bound for and how to agree",
                  len(notice) == 1 and "task 0: 0,1, task 1: 2,3" in notice[0] and "cuda_index()" in notice[0]
                  and "--gpus-per-task" in notice[0], r.stderr)
        else:
            check("srun task 1 says nothing (task 0 speaks for the step)", not notice, r.stderr)
    if not ASAN:  # the library inside python3 needs ASan's runtime first
        r = python("import numabind, sys; numabind.bind(topology=sys.argv[1]); print(numabind.cuda_index(topology=sys.argv[1]))",
                   xml, SLURM_LOCALID="1", SLURM_STEP_TASKS_PER_NODE="2")
        check("bind() as srun task 1: cuda_index() names the GPU it was bound for (2)", r.stdout.strip() == "2",
              r.stdout + r.stderr)

    # 2. torchrun's variables: worker 1 on GPU 1 (torch's rule), no block notice.
    r = run([BIN, "run", "--topology", xml, "--", "sh", "-c", SHOW], LOCAL_RANK="1", LOCAL_WORLD_SIZE="2",
            TORCHELASTIC_RUN_ID="t", GROUP_RANK="0")
    got = shown(r.stdout)
    check("torchrun worker 1: NUMABIND_DEVICE=1 on GPU 1's CPUs (hwloc-calc), nothing said",
          got.get("devices") == "1" and got["cpus"] == pus[1] and "blocks" not in r.stderr, r.stdout + r.stderr)

    # 3. OMP_NUM_THREADS=1 from torchrun with --omp, on a task of several CPUs; --threads.
    flat, flat_buses = gen(work, "one-numa.xml", ["--gpu", "numa:0"] * 3)
    torchrun = dict(LOCAL_RANK="0", LOCAL_WORLD_SIZE="2", TORCHELASTIC_RUN_ID="t", OMP_NUM_THREADS="1")
    r = run([BIN, "run", "--topology", flat, "--omp", "--", "sh", "-c", SHOW], **torchrun)
    said = [l for l in r.stderr.splitlines() if "torchrun's default" in l]
    check("run --omp under torchrun's OMP_NUM_THREADS=1: kept, said once, naming --threads",
          shown(r.stdout).get("omp") == "1" and len(said) == 1 and "--threads N" in said[0], r.stdout + r.stderr)
    r = run([BIN, "run", "--topology", flat, "--omp", "--threads", "2", "--", "sh", "-c", SHOW], **torchrun)
    check("run --threads 2: OMP_NUM_THREADS=2, nothing said",
          shown(r.stdout).get("omp") == "2" and "torchrun's default" not in r.stderr, r.stdout + r.stderr)
    r = run([BIN, "run", "--topology", flat, "--omp", "--", "sh", "-c", SHOW], **dict(torchrun, OMP_NUM_THREADS="3"))
    check("a user's OMP_NUM_THREADS=3 under torchrun: kept, nothing said",
          shown(r.stdout).get("omp") == "3" and "torchrun's default" not in r.stderr, r.stdout + r.stderr)
    r = run([BIN, "run", "--threads", "0", "--", "true"])
    check("run --threads 0: exit 2, one line naming the value and the range",
          r.returncode == 2 and r.stderr.strip() == "numabind: invalid --threads '0' (a whole number from 1 to 65536)",
          r.stderr)

    # 4. A huge task count: one line naming the value and its limit (not std::bad_alloc).
    r = run([BIN, "run", "--local-rank", "0", "--ntasks", "1000000000", "--topology", xml, "--", "true"])
    check("run --ntasks 1000000000: exit 2, one line with the limit",
          r.returncode == 2 and r.stderr.strip() == "numabind: invalid --ntasks '1000000000' (at most 65536 local tasks)",
          r.stderr)
    if not ASAN:  # the library inside python3 needs ASan's runtime first
        lib = ctypes.CDLL(SO)
        lib.numabind_options_new.restype = ctypes.c_void_p
        lib.numabind_options_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.numabind_bind.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.numabind_options_free.argtypes = [ctypes.c_void_p]
        opts, err = lib.numabind_options_new(), ctypes.create_string_buffer(512)
        for k, v in (("local_rank", "0"), ("ntasks", "1000000000"), ("topology", xml)):
            lib.numabind_options_set(opts, k.encode(), v.encode(), err, len(err))
        st = lib.numabind_bind(opts, None, err, len(err))
        lib.numabind_options_free(opts)
        check("C API numabind_bind(ntasks=1000000000): NUMABIND_USAGE, the value and the limit",
              st == 2 and err.value.decode() == "invalid --ntasks '1000000000' (at most 65536 local tasks)", (st, err.value))
        r = python("import numabind, sys\ntry:\n    numabind.bind(local_rank=0, ntasks=10**9, topology=sys.argv[1])\n"
                   "except numabind.UsageError as e:\n    print('UsageError:', e)", xml)
        check("bind(ntasks=10**9): UsageError naming ntasks, the value and the limit",
              r.stdout.strip() == "UsageError: invalid ntasks '1000000000' (at most 65536 local tasks)", r.stdout + r.stderr)

        # 5. cuda_index() after a bind from a topology file this machine's discovery lacks.
        r = python("import numabind, sys\nnumabind.bind(local_rank=1, ntasks=2, topology=sys.argv[1])\n"
                   "try:\n    numabind.cuda_index()\nexcept numabind.Error as e:\n"
                   "    print(type(e).__name__, '|', e)\nprint(numabind.cuda_index(topology=sys.argv[1]))", xml)
        lines = r.stdout.strip().splitlines()
        check("cuda_index() without the topology: Error (not UsageError) saying to pass the topology",
              len(lines) == 2 and lines[0].startswith("Error |") and "pass the same topology" in lines[0], r.stdout + r.stderr)
        check("cuda_index(topology=the same file): the block's first GPU, 2", lines[-1:] == ["2"], r.stdout)

        # 6. torch.numa.binding's NumaOptions (affinity_mode, should_fall_back_if_binding_fails) as the mode.
        r = python(r"""
import dataclasses, enum, json, sys, warnings, numabind
class AffinityMode(str, enum.Enum):
    NODE = "node"
    EXCLUSIVE = "exclusive"
@dataclasses.dataclass(frozen=True)
class NumaOptions:
    affinity_mode: AffinityMode
    should_fall_back_if_binding_fails: bool = False
r = numabind.bind(local_rank=0, ntasks=2, mode=NumaOptions(AffinityMode.EXCLUSIVE), topology=sys.argv[1])
out = {"mode": r["mode"]}
try:
    numabind.bind(local_rank=0, ntasks=2, mode=NumaOptions(AffinityMode.NODE), topology="/nonexistent.xml")
except numabind.Error as e:
    out["strict"] = "Error"
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = numabind.bind(local_rank=0, ntasks=2, mode=NumaOptions(AffinityMode.NODE, True), topology="/nonexistent.xml")
out["fall_back"] = [r["bound"], len(w)]
print(json.dumps(out))
""", xml)
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        check("NumaOptions(EXCLUSIVE) is mode exclusive", out.get("mode") == "exclusive", r.stdout + r.stderr)
        check("NumaOptions without fall-back: a failure raises Error", out.get("strict") == "Error", out)
        check("NumaOptions(should_fall_back_if_binding_fails=True): unbound with one warning",
              out.get("fall_back") == [False, 1], out)
finish()
