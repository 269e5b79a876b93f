#!/usr/bin/env python3
"""fake_node_tree.py — a fake /sys, /proc, /etc/slurm and /dev tree for `numabind check`
(NUMABIND_CHECK_ROOT), made from an hwloc XML with hwloc's own tools.

Every value written comes from the XML's own contents (PCI ids from its pci_type
attributes) or from hwloc-calc on it (each device's NUMA node and local CPUs, each NUMA
node's CPUs), never from numabind, so that check's comparisons meet independent facts.

Usage: fake_node_tree.py XML ROOT [--minors 0,1,...] [--no-info I,J] [--numa GPU=NODE]...
           [--gres-order I,J,...] [--autodetect] [--constrain-devices] [--task-plugin P]
           [--kernel RELEASE] [--nvidia-smi FILE] [--facts FILE.json]
  --minors      NVIDIA Device Minor of each GPU in PCI order (default 0..n-1)
  --no-info     GPUs (PCI order index) without /proc/driver/nvidia information
  --numa        write this NUMA node into GPU's numa_node instead of hwloc's (-1: none)
  --gres-order  gres.conf File= lines in this order of the GPUs (default PCI order)
  --nvidia-smi  also write an `nvidia-smi` script printing `topo -m` for these GPUs
  --facts       JSON: gpus [{pci, minor, numa, cpus}], nodes {os: cpus}
  --calc-cache  keep hwloc-calc's answers in this JSON and reuse them (same XML only)
Device files ROOT/dev/nvidiaN are character devices 195:N when mknod is allowed (root),
else empty regular files (facts: "char_devices").
"""
import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


CALC_CACHE = {}


def calc(xml, *args):
    key = " ".join(args)
    if key in CALC_CACHE:
        return CALC_CACHE[key]
    out = subprocess.run(["hwloc-calc", "--input", xml, *args], check=True, capture_output=True, text=True).stdout
    CALC_CACHE[key] = [int(x) for x in out.strip().split(",") if x != ""]
    return CALC_CACHE[key]


def id_list(ids):
    ids = sorted(set(ids))
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else "%d-%d" % (ids[i], ids[j]))
        i = j + 1
    return ",".join(parts)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def pci_devices(xml):
    out = []
    for obj in ET.parse(xml).iter("object"):
        if obj.get("type") != "PCIDev":
            continue
        t = obj.get("pci_type").split()  # "0302 [10de:20b0] [10de:134f] a1"
        vendor, device = t[1].strip("[]").split(":")
        out.append(dict(pci=obj.get("pci_busid"), cls=t[0], vendor=vendor, device=device))
    return sorted(out, key=lambda d: d["pci"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xml")
    ap.add_argument("root")
    ap.add_argument("--minors")
    ap.add_argument("--no-info", default="")
    ap.add_argument("--numa", action="append", default=[])
    ap.add_argument("--gres-order")
    ap.add_argument("--autodetect", action="store_true")
    ap.add_argument("--constrain-devices", action="store_true")
    ap.add_argument("--task-plugin", default="task/cgroup,task/affinity")
    ap.add_argument("--kernel", default="6.1.0-fake-amd64")
    ap.add_argument("--nvidia-smi")
    ap.add_argument("--facts")
    ap.add_argument("--calc-cache", help="hwloc-calc answers for this XML, kept between runs (JSON)")
    a = ap.parse_args()
    xml, root = a.xml, a.root
    if a.calc_cache and os.path.exists(a.calc_cache):
        CALC_CACHE.update(json.load(open(a.calc_cache)))

    devices = pci_devices(xml)
    gpus = [d for d in devices if d["vendor"] == "10de" and d["cls"] == "0302"]
    minors = [int(x) for x in a.minors.split(",")] if a.minors else list(range(len(gpus)))
    no_info = {int(x) for x in a.no_info.split(",") if x}
    numa_override = {int(k): int(v) for k, v in (s.split("=") for s in a.numa)}
    facts = dict(gpus=[], nodes={}, char_devices=True)

    for d in devices:
        base = "%s/sys/bus/pci/devices/%s" % (root, d["pci"])
        write(base + "/vendor", "0x%s\n" % d["vendor"])
        write(base + "/device", "0x%s\n" % d["device"])
        write(base + "/class", "0x%s00\n" % d["cls"])
        nodes = calc(xml, "pci=" + d["pci"], "-p", "-I", "numa")
        cpus = calc(xml, "pci=" + d["pci"], "-p", "-I", "pu")
        numa = nodes[0] if len(nodes) == 1 else -1
        if d in gpus:
            i = gpus.index(d)
            numa = numa_override.get(i, numa)
            facts["gpus"].append(dict(pci=d["pci"], minor=minors[i], numa=numa, hwloc_numa=nodes, cpus=id_list(cpus),
                                      info=i not in no_info))
            if i not in no_info:
                write("%s/proc/driver/nvidia/gpus/%s/information" % (root, d["pci"]),
                      "Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 100\nGPU UUID: \t GPU-fake-%d\n"
                      "Video BIOS: \t 92.00.19.00.01\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
                      "Bus Location: \t %s\nDevice Minor: \t %d\n" % (i, d["pci"], minors[i]))
        write(base + "/numa_node", "%d\n" % numa)
        write(base + "/local_cpulist", id_list(cpus) + "\n")

    for n in calc(xml, "all", "-p", "-I", "numa"):
        cpus = calc(xml, "-p", "numa:%d" % n, "-I", "pu")
        facts["nodes"][str(n)] = id_list(cpus)
        write("%s/sys/devices/system/node/node%d/cpulist" % (root, n), id_list(cpus) + "\n")
    write(root + "/proc/sys/kernel/osrelease", a.kernel + "\n")
    write(root + "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")

    os.makedirs(root + "/dev", exist_ok=True)
    for g in facts["gpus"]:
        path = "%s/dev/nvidia%d" % (root, g["minor"])
        try:
            os.mknod(path, 0o666 | 0o020000, os.makedev(195, g["minor"]))
        except (PermissionError, OSError):
            facts["char_devices"] = False
            write(path, "")

    order = [int(x) for x in a.gres_order.split(",")] if a.gres_order else list(range(len(gpus)))
    etc = root + "/etc/slurm"
    write(etc + "/slurm.conf", "ClusterName=fake\nSlurmctldHost=localhost\nTaskPlugin=%s\n"
          "GresTypes=gpu\nNodeName=fake1 CPUs=256 Gres=gpu:%d\n" % (a.task_plugin, len(gpus)))
    write(etc + "/cgroup.conf", "ConstrainCores=yes\nConstrainDevices=%s\n" % ("yes" if a.constrain_devices else "no"))
    gres = "AutoDetect=nvml\n" if a.autodetect else "AutoDetect=off\n" + "".join(
        "NodeName=fake1 Name=gpu File=/dev/nvidia%d\n" % minors[i] for i in order)
    write(etc + "/gres.conf", gres)
    facts["gres_files"] = [] if a.autodetect else ["/dev/nvidia%d" % minors[i] for i in order]

    if a.nvidia_smi:
        header = "\t" + "\t".join("GPU%d" % i for i in range(len(gpus))) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        rows = ""
        for i, g in enumerate(facts["gpus"]):
            cells = ["X" if j == i else "NV12" for j in range(len(gpus))]
            rows += "GPU%d\t%s\t%s\t%s\t\tN/A\n" % (i, "\t".join(cells), g["cpus"],
                                                   g["numa"] if g["numa"] >= 0 else "N/A")
        write(a.nvidia_smi, "#!/bin/sh\n[ \"$1 $2\" = 'topo -m' ] || exit 1\ncat <<'EOF'\n" + header + rows +
              "\nLegend:\n\n  X    = Self\nEOF\n", 0o755)
    if a.facts:
        write(a.facts, json.dumps(facts, indent=1))
    if a.calc_cache:
        write(a.calc_cache, json.dumps(CALC_CACHE))


if __name__ == "__main__":
    sys.exit(main())
