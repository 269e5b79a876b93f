#!/usr/bin/env python3
"""Seeds for fuzz_model_text and fuzz_proc_parsers, generated (never copied from a machine):
node-model texts in model_text.hpp's format with a correct end line (line count + FNV-1a 64),
of several shapes (1-8 NUMA nodes, SMT, GPUs below nodes or the machine, distances), and
numa_maps / environ / plan-marker texts in the kernel's formats.
    gen_seeds.py OUTDIR     (writes OUTDIR/fuzz_model_text/* and OUTDIR/fuzz_proc_parsers/*)"""
import os
import sys


def fnv1a64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def with_end(body: str) -> str:
    return body + "end %d %016x\n" % (body.count("\n"), fnv1a64(body.encode()))


def span(a, b):
    return str(a) if a == b else "%d-%d" % (a, b)


def model(nodes, cores_per_node, smt, gpus_per_node, machine_gpu=False, distances=True):
    lines = ["numabind-model 2", "cache_level L3"]
    ncores = nodes * cores_per_node
    for c in range(ncores):
        pus = ",".join(str(c + k * ncores) for k in range(smt))
        lines.append("core %s %d %d" % (pus, c // cores_per_node, 0 if nodes < 2 else (c // cores_per_node) // 2))
    for n in range(nodes):
        lines.append("l3 %s" % span(n * cores_per_node, (n + 1) * cores_per_node - 1))
    npkg = 1 if nodes < 2 else (nodes + 1) // 2
    for p in range(npkg):
        lines.append("package %d %s" % (p, span(p * 2 * cores_per_node, min(ncores, (p + 1) * 2 * cores_per_node) - 1)))
    for n in range(nodes):
        pus = span(n * cores_per_node, (n + 1) * cores_per_node - 1)
        lines.append("numa %d %s %s %s" % (n, pus, pus, "" if n % 2 == 0 else "HBM"))
    bus = 0x17
    for n in range(nodes):
        for g in range(gpus_per_node):
            pus = span(n * cores_per_node, (n + 1) * cores_per_node - 1)
            i = n * gpus_per_node + g
            lines.append("pci 0000:%02x:00.0 4318 8322 770 0 %d %s nvidia%d %d,%d NVIDIA A100" % (bus, n, pus, i, 2 * i, 2 * i + 1))
            # its HCA behind the same switch (bridges 2i, 2i+1), with an RDMA device and an IB port
            lines.append("pci 0000:%02x:00.0 5555 4123 519 0 %d %s ib%d,mlx5_%d %d,%d ConnectX-6" % (bus + 1, n, pus, i, i, 2 * i, 2 * i + 1))
            lines.append("net 0 - - ib%d" % i)
            lines.append("net 1 1=4,2=1 - mlx5_%d" % i)
            bus += 4
    if machine_gpu:
        lines.append("pci 0000:c1:00.0 4098 29631 896 1 -1 - card0,renderD128 - AMD MI250")
        lines.append("pci 0000:c2:00.0 6107 1281 512 1 -1 - hsi0 - Cassini")
        lines.append("net 0 - Slingshot hsi0")
    if distances:
        for a in range(nodes):
            for b in range(nodes):
                lines.append("distance %d %d %d" % (a, b, 10 if a == b else 21 + 11 * ((a ^ b) > 1)))
    return with_end("\n".join(lines) + "\n")


NUMA_MAPS = """55d0c0000000 default file=/usr/bin/prog mapped=3 N0=3 kernelpagesize_kB=4
55d0c2000000 default heap anon=20 dirty=20 N0=12 N1=8 kernelpagesize_kB=4
7f0000000000 bind:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=4
7f0100000000 prefer (many):0-1 anon=4 dirty=4 N0=4 kernelpagesize_kB=2048
7f0200000000 interleave:0-3 file=/lib/x86_64-linux-gnu/libc.so.6 mapped=40 mapmax=9 N0=10 N1=10 N2=10 N3=10 kernelpagesize_kB=4
7ffd00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
"""

MAPS = """55d0c0000000-55d0c0001000 r--p 00000000 08:01 1234 /usr/bin/prog
7f5a00000000-7f5a00001000 r--s 00000000 00:01 99 /memfd:numabind-plan:mode=exclusive;cpus=0-3,64-67;mems=0;mem=prefer;devices=0,1 (deleted)
"""

ENVIRON = ("NUMABIND_MODE=exclusive\0NUMABIND_CPUS=0-3,8\0NUMABIND_MEMS=0,1\0NUMABIND_MEM_POLICY=bind\0"
           "CUDA_VISIBLE_DEVICES=0\0NUMABIND_DEVICES=0\0PATH=/usr/bin\0")


def main():
    out = sys.argv[1]
    shapes = {
        "one-node": model(1, 4, 1, 1),
        "two-nodes-smt": model(2, 4, 2, 2),
        "four-nodes-hbm": model(4, 2, 1, 1, machine_gpu=True),
        "eight-nodes": model(8, 2, 2, 1),
        "no-distances": model(2, 2, 1, 0, distances=False),
    }
    d = os.path.join(out, "fuzz_model_text")
    os.makedirs(d, exist_ok=True)
    for name, text in shapes.items():
        with open(os.path.join(d, name + ".txt"), "w") as f:
            f.write(text)
    d = os.path.join(out, "fuzz_proc_parsers")
    os.makedirs(d, exist_ok=True)
    seeds = {"numa_maps-and-maps": NUMA_MAPS + "\x01" + MAPS, "numa_maps-and-environ": NUMA_MAPS + "\x01" + ENVIRON,
             "environ-only": "\x01" + ENVIRON.replace("\0", "\n"), "numa_maps-only": NUMA_MAPS}
    for name, text in seeds.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
