#!/usr/bin/env python3
"""train_resnet18.py — ResNet-18 data-parallel training on synthetic images, reporting where
every process and DataLoader worker runs (CPUs, memory policy, GPU) as numabind bound it.

Modelled on numabind's seed experiment: each sample is a synthetic 1024x1024 RGB image
(uint8, made on the CPU by the DataLoader workers), copied to the GPU and resized there to
224x224, so the host side (workers, pinned buffers, H2D copies) is what NUMA placement affects.

Launch, one process per GPU (--launcher says which started it; default: from the environment):
  srun -n8 --gpus-per-task=1 --numa-binding=exclusive python3 train_resnet18.py --launcher srun
  torchrun --nproc-per-node=8 --no-python numabind run --mode exclusive -- \
      python3 train_resnet18.py --launcher torchrun
  python3 train_resnet18.py --launcher spawn --nprocs 8     # torch.multiprocessing.spawn; each
      # worker calls numabind.bind(local_rank=rank, ntasks=world) itself (the Python module)
  numabind run --local-rank 0 --ntasks 1 -- python3 train_resnet18.py --placement-only
DataLoader workers run numabind.worker_init_fn (re-applies a binding a worker lost) when the
numabind module is importable.

Placement report (one line per process and per worker, key=value, on stdout):
  placement role=main|worker[N] rank=R local_rank=L pid=P mode=... device=... device_pci=...
            numabind_cpus=... cpus_allowed=... numabind_mems=... numabind_mem_policy=...
            mems_allowed=... numa_maps_policy=... match=yes|no|n/a
taken from the NUMABIND_* variables, /proc/self/status (Cpus_allowed_list, Mems_allowed_list)
and /proc/self/numa_maps (the memory policy the kernel applies). match says whether the CPUs
the process may run on are exactly NUMABIND_CPUS.

--placement-only (automatic when PyTorch is not installed): report the placement of the main
process and of --workers worker processes (forked like DataLoader workers), then exit. Needs
only the Python standard library.
"""

import argparse
import os
import sys
import time


# ---------------------------------------------------------------- placement (stdlib only)
def _status_field(name):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def _numa_maps_policy():
    """The memory policy the kernel applies to the process's heap (else its first anonymous
    mapping, else its most common policy), from /proc/self/numa_maps: default, prefer:N,
    bind:N, interleave:N-M, ..."""
    try:
        with open("/proc/self/numa_maps") as f:
            lines = [line.split() for line in f]
    except OSError:
        return "?"
    lines = [parts for parts in lines if len(parts) >= 2]
    for parts in lines:
        if "heap" in parts:
            return parts[1]
    for parts in lines:
        if any(p.startswith("anon=") for p in parts):
            return parts[1]
    if not lines:
        return "?"
    counts = {}
    for parts in lines:
        counts[parts[1]] = counts.get(parts[1], 0) + 1
    return max(counts.items(), key=lambda kv: kv[1])[0]


def _expand_cpulist(text):
    cpus = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "-" in item:
            lo, hi = item.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(item))
    return cpus


def placement(role):
    env = os.environ
    cpus_allowed = _status_field("Cpus_allowed_list")
    nb_cpus = env.get("NUMABIND_CPUS", "")
    match = "n/a"
    if nb_cpus and cpus_allowed != "?":
        try:
            match = "yes" if _expand_cpulist(nb_cpus) == _expand_cpulist(cpus_allowed) else "no"
        except ValueError:
            match = "?"
    fields = [
        ("role", role),
        ("rank", env.get("RANK", env.get("SLURM_PROCID", "0"))),
        ("local_rank", env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))),
        ("pid", str(os.getpid())),
        ("mode", env.get("NUMABIND_MODE", "-")),
        ("device", env.get("NUMABIND_DEVICE", "-") or "-"),
        ("device_pci", env.get("NUMABIND_DEVICE_PCI", "-") or "-"),
        ("numabind_cpus", nb_cpus or "-"),
        ("cpus_allowed", cpus_allowed),
        ("numabind_mems", env.get("NUMABIND_MEMS", "-") or "-"),
        ("numabind_mem_policy", env.get("NUMABIND_MEM_POLICY", "-") or "-"),
        ("mems_allowed", _status_field("Mems_allowed_list")),
        ("numa_maps_policy", _numa_maps_policy()),
        ("match", match),
    ]
    return "placement " + " ".join(f"{k}={v}" for k, v in fields)


def report(role):
    # One write(2) per line: lines of the main process and its workers never interleave.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (placement(role) + "\n").encode())


def placement_only(workers):
    """Main process, then `workers` forked children, as a DataLoader would start them."""
    report("main")
    pids = []
    for w in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                # touch some memory so numa_maps has an anonymous mapping of the worker's own
                buf = bytearray(4 << 20)
                buf[::4096] = b"\1" * len(buf[::4096])
                report(f"worker{w}")
            finally:
                os._exit(0)
        pids.append(pid)
    rc = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            rc = 1
    return rc


# ---------------------------------------------------------------- training (PyTorch)
def build_resnet18(torch, num_classes):
    try:
        import torchvision  # noqa: F401

        return torchvision.models.resnet18(num_classes=num_classes)
    except ImportError:
        pass
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def logical_cuda_index(torch, local_rank):
    """The CUDA device this process should use, as torch numbers them."""
    count = torch.cuda.device_count()
    if count == 0:
        return None
    phys = os.environ.get("NUMABIND_DEVICE", "")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if phys and visible:
        entries = [v.strip() for v in visible.split(",") if v.strip()]
        if phys in entries:
            return entries.index(phys)
    if phys and not visible and int(phys) < count:
        return int(phys)
    return local_rank % count


def _write_json(path, obj):
    import json

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def hold_for_observer(report_dir, rank, local_rank):
    """--report-dir: say who we are (pid, threads) and wait until DIR/go exists, so that a
    separate observer can read every process and thread of the job from /proc meanwhile."""
    _write_json(os.path.join(report_dir, f"rank{rank}.json"),
                {"pid": os.getpid(), "rank": rank, "local_rank": local_rank,
                 "tids": sorted(int(t) for t in os.listdir("/proc/self/task")),
                 "tids_before_bind": BIND_INFO.get("tids_before_bind", []), "bind": BIND_INFO.get("result")})
    deadline = time.time() + 300
    while not os.path.exists(os.path.join(report_dir, "go")) and time.time() < deadline:
        time.sleep(0.05)


numabind = None
BIND_INFO = {}


def train(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    global numabind
    try:
        import numabind as _nb

        numabind = _nb
    except ImportError:
        pass
    env = os.environ
    rank = int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    world = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    local_rank = int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0")))
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    os.environ.setdefault("LOCAL_RANK", str(local_rank))
    report("main")

    dev_index = logical_cuda_index(torch, local_rank)
    device = torch.device("cuda", dev_index) if dev_index is not None else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        # Debian's torch 2.6 is built without libuv, which its TCPStore asks for by default.
        os.environ.setdefault("USE_LIBUV", "0")
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)

    size = args.image_size

    class Synthetic(torch.utils.data.Dataset):
        def __len__(self):
            return args.steps * args.batch_size

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            img = torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=g)
            return img, i % args.classes

    def worker_init(worker_id):
        if numabind is not None:
            numabind.worker_init_fn(worker_id)
        report(f"worker{worker_id}")
        if args.report_dir:
            _write_json(os.path.join(args.report_dir, f"worker-{rank}-{worker_id}.json"), {"pid": os.getpid()})

    loader = torch.utils.data.DataLoader(
        Synthetic(), batch_size=args.batch_size, num_workers=args.workers, pin_memory=device.type == "cuda",
        worker_init_fn=worker_init if args.workers > 0 else None, persistent_workers=args.workers > 0,
        # forked, as DataLoader workers are by default (a spawn-started process would spawn them)
        multiprocessing_context="fork" if args.workers > 0 else None, drop_last=True)
    model = build_resnet18(torch, args.classes).to(device).to(memory_format=torch.channels_last)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev_index] if dev_index is not None else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255

    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        n = 0
        for step, (img, label) in enumerate(loader):
            if args.report_dir and epoch == 0 and step == 1:
                hold_for_observer(args.report_dir, rank, local_rank)
            img = img.to(device, non_blocking=True).float()
            img = F.interpolate(img, size=(args.resize, args.resize), mode="bilinear", align_corners=False)
            img = ((img - mean) / std).contiguous(memory_format=torch.channels_last)
            label = label.to(device, non_blocking=True)
            loss = F.cross_entropy(model(img), label)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            n += img.shape[0]
            if step == 0 and epoch == 0 and device.type == "cuda":
                torch.cuda.synchronize()
                t0 = time.perf_counter()  # leave the warm-up step out of the rate
                n = 0
        if device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"rank {rank} epoch {epoch}: {n / dt if dt > 0 else 0:.1f} images/s, loss {loss.item():.3f}",
              flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


def spawn_worker(rank, args, world):
    """One torch.multiprocessing.spawn worker: bind itself with the numabind module, then train."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.master_port))
    import numabind as nb

    if args.bind_late:
        # Threads first (gloo's, the intra-op pool's), binding after: bind() must reach them all.
        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.ones(256, 256) @ torch.ones(256, 256)
    BIND_INFO["tids_before_bind"] = sorted(int(t) for t in os.listdir("/proc/self/task"))
    BIND_INFO["result"] = nb.bind(local_rank=rank, ntasks=world, mode=args.numabind_mode, mem=args.numabind_mem,
                                  topology=args.numabind_topology, device_match=args.numabind_device_match,
                                  fallback=args.numabind_fallback)
    train(args)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--placement-only", action="store_true",
                   help="only report placement (automatic when torch is missing)")
    p.add_argument("--workers", type=int, default=4, help="DataLoader workers per process (default 4)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=50, help="batches per epoch (default 50)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=1024, help="synthetic image side (default 1024)")
    p.add_argument("--resize", type=int, default=224, help="side after resizing on the GPU (default 224)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--launcher", choices=["spawn", "torchrun", "srun"], default=None,
                   help="who starts the processes: spawn (this script, torch.multiprocessing.spawn, each worker "
                        "binds itself with numabind.bind), torchrun or srun (already started and bound by "
                        "`numabind run` or the SPANK plugin); default: whatever the environment says")
    p.add_argument("--nprocs", type=int, default=0, help="--launcher spawn: processes (default: GPUs, else 1)")
    p.add_argument("--master-port", type=int, default=29500, help="--launcher spawn: rendezvous port")
    p.add_argument("--numabind-mode", default="exclusive", help="--launcher spawn: numabind.bind(mode=...)")
    p.add_argument("--numabind-mem", default="prefer", help="--launcher spawn: numabind.bind(mem=...)")
    p.add_argument("--numabind-topology", default=None, help="--launcher spawn: numabind.bind(topology=...)")
    p.add_argument("--numabind-device-match", default=None, help="--launcher spawn: numabind.bind(device_match=...)")
    p.add_argument("--numabind-fallback", default="warn", help="--launcher spawn: numabind.bind(fallback=...)")
    p.add_argument("--bind-late", action="store_true",
                   help="--launcher spawn: start the process group and the intra-op threads before binding")
    p.add_argument("--report-dir", default=None,
                   help="write DIR/rank<R>.json and DIR/worker-<R>-<W>.json after the first step, then wait "
                        "for DIR/go (lets an observer check every process and thread from /proc)")
    args = p.parse_args(argv)

    if not args.placement_only:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("train_resnet18.py: PyTorch not installed; reporting placement only", file=sys.stderr)
            args.placement_only = True
    if args.placement_only:
        return placement_only(args.workers)
    if args.launcher == "spawn":
        import torch
        import torch.multiprocessing as mp

        world = args.nprocs or max(torch.cuda.device_count(), 1)
        mp.spawn(spawn_worker, args=(args, world), nprocs=world, join=True)
        return 0
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
