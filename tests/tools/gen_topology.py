#!/usr/bin/env python3
"""gen_topology.py — hwloc XML of GPU nodes: named shapes, or fake GPUs added to an XML.

Usage:
  gen_topology.py --preset NAME -o OUT.xml [--facts OUT.json] [options below]
  gen_topology.py [-i IN.xml | --synthetic DESC] -o OUT.xml [--split-numa K]
                  [--gpu SPEC]... [--pci SPEC]... [--allowed-cpus SET] [--facts OUT.json]
                  [--model NAME] [--no-osdev] [--verify]
  gen_topology.py --list-presets | --describe-presets

  --preset NAME    a named GPU-node shape (see --describe-presets): an hwloc synthetic
                   description plus devices, GPU-memory NUMA nodes and an allowed CPU set.
                   Further --gpu/--pci/--allowed-cpus options add to or override it.
  -i IN.xml        hwloc 2.x XML (default: `lstopo --of xml` of this machine; "-" = stdin)
  --synthetic DESC start from `lstopo-no-graphics --input "DESC" --of xml` (hwloc synthetic)
  -o OUT.xml       output ("-" = stdout)
  --gpu SPEC       one fake GPU (repeat for more): LOC[=DDDD:BB:DD.F][,key=value]...
                   LOC is the object it hangs below:
                     machine            machine-level locality (like numa_node = -1)
                     package:N          N-th package (logical index)
                     numa:N             the normal parent of NUMA node N (the N-th by OS
                                        index; error if that parent's cpuset is wider)
                     TYPE:N             any other type: l3:N, group:N, core:N, l2:N ...
                   keys: kind=KIND (default a100; see below), partitions=K (OS devices per
                   backend below the function: MI300A TPX = 3), memnode=OS (the GPU's memory
                   as a CPU-less NUMA node with that OS index, subtype GPUMemory, attached
                   where the GPU is, as hwloc shows POWER9 and Grace Hopper GPU memory),
                   switch=NAME (GPUs with the same NAME share a PCIe switch), direct=1 (right
                   below its host bridge, no root port: POWER9, MI300A).
                   Without a bus id GPU i gets 0000:17:00.0, 0000:27:00.0, ... (bus 0x17 +
                   0x10*i, skipping used buses).
  --pci SPEC       a device that is not a GPU, same syntax; kind= one of the non-GPU kinds
  --split-numa K   rebuild the CPU tree as K packages, each with one NUMA node and its own
                   copy of the first L3, holding consecutive cores (same real PUs); memory is
                   divided evenly. Applied before --gpu, so --gpu numa:1 refers to the new nodes.
  --allowed-cpus SET  the allowed CPUs recorded in the XML (what a cgroup/cpuset leaves a
                   process): a PU list "0-7,16-23" or one location "numa:0", "package:1".
                   Tools that load the XML without disallowed objects (hwloc-calc without
                   --disallowed) see only these PUs.
  --facts OUT.json the generator's inputs as JSON (preset, synthetic description, every
                   device with bus id, kind, location, partitions and memory node, allowed
                   CPUs). Expected values come from hwloc-calc on OUT.xml, not from here.
  --model NAME     GPUModel string of the default kind's OS devices
  --no-osdev       do not add OS devices (cudaN/nvmlN, rsmiN, mlx5_N, ...) below devices
  --verify         after writing, print `hwloc-calc --input OUT pci=BUS -p -I pu` per GPU

Kinds (PCI vendor:device class, OS devices):
  GPUs:    a100 v100 h100 gh200 rtx-a6000 (NVIDIA; cudaN + nvmlN), mi300a mi210 (AMD; rsmiN)
  others:  cx6 (InfiniBand, mlx5_N), cassini (Slingshot NIC, hsnN), i350 (1 GbE management
           port, network OS device enoN, no RDMA), nvswitch (bridge class
           0680), aspeed (BMC VGA), nvme (nvmeNn1)
Each device sits below a host bridge (bridge_type 0-1) and a PCI-PCI bridge at bus BB-1
(bridge_type 1-1) unless direct=1 or switch= is given.
Remember: hwloc drops I/O objects unless the I/O filter is enabled (lstopo --whole-io,
hwloc_topology_set_io_types_filter); a loaded XML is not "this system" unless flagged.
Examples:
  gen_topology.py --preset dgx-a100 -o /tmp/dgx.xml --facts /tmp/dgx.json
  gen_topology.py -o /tmp/t.xml --gpu package:0 --gpu package:0
  gen_topology.py -o /tmp/t.xml --split-numa 2 --gpu numa:0 --gpu numa:1 --gpu machine --verify
  gen_topology.py --synthetic "pack:2 [numa] core:4 pu:2" -o /tmp/s.xml --gpu numa:1,kind=v100
  hwloc-calc --input /tmp/dgx.xml pci=0000:07:00.0 -p -I numa ; lstopo --input /tmp/dgx.xml --whole-io
Python 3 standard library only.
"""

import argparse
import copy
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

BRIDGE_VENDOR, BRIDGE_DEVICE = 0x8086, 0x347A  # an Intel PCIe root port
SWITCH_VENDOR, SWITCH_DEVICE = 0x1000, 0xC010  # a Broadcom PEX PCIe switch port

IO_TYPES = {"Bridge", "PCIDev", "OSDev"}
MEMORY_TYPES = {"NUMANode", "MemCache"}

TYPE_ALIASES = {
    "machine": "Machine", "package": "Package", "socket": "Package",
    "numa": "NUMANode", "numanode": "NUMANode", "node": "NUMANode",
    "group": "Group", "die": "Die", "core": "Core", "pu": "PU",
    "l1": "L1Cache", "l2": "L2Cache", "l3": "L3Cache", "l4": "L4Cache", "l5": "L5Cache",
    "l1i": "L1iCache", "l2i": "L2iCache", "l3i": "L3iCache",
}

GIB = 1 << 30

# PCI identity and OS devices of each kind. "osdev": (backend prefix, hwloc osdev_type,
# subtype) per OS device below the function; NVIDIA GPUs carry a CUDA and an NVML one.
KINDS = {
    "a100": dict(gpu=True, vendor=0x10DE, device=0x20B0, sub=0x134F, cls=0x0302, rev=0xA1,
                 vendor_name="NVIDIA Corporation", device_name="GA100 [A100 SXM4 40GB]",
                 model="NVIDIA A100-SXM4-40GB", memory=40 * GIB, backends=("cuda", "nvml")),
    "v100": dict(gpu=True, vendor=0x10DE, device=0x1DB5, sub=0x1249, cls=0x0302, rev=0xA1,
                 vendor_name="NVIDIA Corporation", device_name="GV100GL [Tesla V100 SXM2 32GB]",
                 model="Tesla V100-SXM2-32GB", memory=32 * GIB, backends=("cuda", "nvml")),
    "h100": dict(gpu=True, vendor=0x10DE, device=0x2330, sub=0x16C1, cls=0x0302, rev=0xA1,
                 vendor_name="NVIDIA Corporation", device_name="GH100 [H100 SXM5 80GB]",
                 model="NVIDIA H100 80GB HBM3", memory=80 * GIB, backends=("cuda", "nvml")),
    "gh200": dict(gpu=True, vendor=0x10DE, device=0x2342, sub=0x16EB, cls=0x0302, rev=0xA1,
                  vendor_name="NVIDIA Corporation", device_name="GH100 [GH200 120GB / 480GB]",
                  model="NVIDIA GH200 480GB", memory=96 * GIB, backends=("cuda", "nvml")),
    "rtx-a6000": dict(gpu=True, vendor=0x10DE, device=0x2230, sub=0x1459, cls=0x0300, rev=0xA1,
                      vendor_name="NVIDIA Corporation", device_name="GA102GL [RTX A6000]",
                      model="NVIDIA RTX A6000", memory=48 * GIB, backends=("cuda", "nvml")),
    "mi300a": dict(gpu=True, vendor=0x1002, device=0x74A0, sub=0x74A0, cls=0x1200, rev=0x00,
                   vendor_name="Advanced Micro Devices, Inc. [AMD/ATI]",
                   device_name="Aqua Vanjaram [Instinct MI300A]", model="AMD Instinct MI300A",
                   memory=128 * GIB, backends=("rsmi",)),
    "mi210": dict(gpu=True, vendor=0x1002, device=0x740F, sub=0x0C34, cls=0x0380, rev=0x02,
                  vendor_name="Advanced Micro Devices, Inc. [AMD/ATI]",
                  device_name="Aldebaran/MI200 [Instinct MI210]", model="AMD Instinct MI210",
                  memory=64 * GIB, backends=("rsmi",)),
    "cx6": dict(gpu=False, vendor=0x15B3, device=0x101B, sub=0x0007, cls=0x0207, rev=0x00,
                vendor_name="Mellanox Technologies", device_name="MT28908 Family [ConnectX-6]",
                backends=("mlx5_",)),
    "cassini": dict(gpu=False, vendor=0x17DB, device=0x0501, sub=0x0000, cls=0x0200, rev=0x02,
                    vendor_name="Cray Inc", device_name="Cassini 1 [Slingshot 200Gb]",
                    backends=("hsn",)),
    "i350": dict(gpu=False, vendor=0x8086, device=0x1521, sub=0x1521, cls=0x0200, rev=0x01,
                 vendor_name="Intel Corporation", device_name="I350 Gigabit Network Connection",
                 backends=("eno",)),
    "nvswitch": dict(gpu=False, vendor=0x10DE, device=0x1AF1, sub=0x1636, cls=0x0680, rev=0xA1,
                     vendor_name="NVIDIA Corporation", device_name="GA100 [A100 NVSwitch]",
                     backends=()),
    "aspeed": dict(gpu=False, vendor=0x1A03, device=0x2000, sub=0x2000, cls=0x0300, rev=0x41,
                   vendor_name="ASPEED Technology, Inc.", device_name="ASPEED Graphics Family",
                   backends=()),
    "nvme": dict(gpu=False, vendor=0x144D, device=0xA824, sub=0xA809, cls=0x0108, rev=0x00,
                 vendor_name="Samsung Electronics Co Ltd", device_name="NVMe SSD Controller PM173X",
                 backends=("nvme",)),
}
# hwloc osdev_type values: 0 block, 1 GPU, 2 network, 3 OpenFabrics, 4 DMA, 5 CoProc
OSDEV = {"cuda": ("5", "CUDA"), "nvml": ("1", "NVML"), "rsmi": ("1", "RSMI"),
         "mlx5_": ("3", None), "hsn": ("2", "Slingshot"), "nvme": ("0", "Disk"), "eno": ("2", None)}



def die(msg):
    sys.stderr.write("gen_topology: %s\n" % msg)
    sys.exit(1)


# ---------------------------------------------------------------- hwloc bitmaps
def parse_bitmap(s):
    """hwloc bitmap string ("0x00000003" or "0x00000001,0xffffffff") -> int."""
    if s is None or s == "":
        return 0
    if "f...f" in s:
        die("infinite bitmaps are not supported: %r" % s)
    val = 0
    for part in s.split(","):
        part = part.strip()
        if part.startswith("0x"):
            part = part[2:]
        val = (val << 32) | int(part or "0", 16)
    return val


def format_bitmap(v):
    if v == 0:
        return "0x0"
    groups = []
    while v:
        groups.append(v & 0xFFFFFFFF)
        v >>= 32
    return ",".join("0x%08x" % g for g in reversed(groups))


def bits(v):
    i = 0
    while v:
        if v & 1:
            yield i
        v >>= 1
        i += 1


# ---------------------------------------------------------------- tree helpers
def objects(elem):
    return [c for c in elem if c.tag == "object"]


def walk(elem, parent=None):
    """Depth-first (document order) over object elements, yielding (elem, parent)."""
    for c in objects(elem):
        yield c, elem
        yield from walk(c, elem)


class GpIndex:
    def __init__(self, root):
        m = 0
        for e in root.iter("object"):
            try:
                m = max(m, int(e.get("gp_index", "0")))
            except ValueError:
                pass
        self.next = m + 1

    def __call__(self):
        v = self.next
        self.next += 1
        return str(v)


def root_machine(topo):
    objs = objects(topo)
    if len(objs) != 1 or objs[0].get("type") != "Machine":
        die("input is not an hwloc 2.x XML with one Machine root object")
    return objs[0]


# ---------------------------------------------------------------- --split-numa
def split_numa(topo, k, gp):
    machine = root_machine(topo)
    parents = {}
    for e, p in walk(topo):
        parents[e] = p

    cores = [e for e in parents if e.get("type") == "Core"]
    if not cores:
        die("--split-numa: no Core objects in the input")
    if len(cores) < k:
        die("--split-numa %d: only %d cores" % (k, len(cores)))

    # per-core unit = the core plus its private caches (ancestors with the same cpuset)
    units = []
    for c in cores:
        u = c
        cs = c.get("cpuset")
        while parents[u] is not machine and parents[u].get("cpuset") == cs \
                and parents[u].get("type") not in ("Package", "Group", "Die", "NUMANode"):
            u = parents[u]
        units.append(u)
    units.sort(key=lambda u: min(bits(parse_bitmap(u.get("cpuset")))))

    total_mem = 0
    page_types = {}
    for e in parents:
        if e.get("type") == "NUMANode":
            total_mem += int(e.get("local_memory", "0"))
            for pt in e.findall("page_type"):
                page_types[pt.get("size")] = page_types.get(pt.get("size"), 0) + int(pt.get("count", "0"))

    pkg_tmpl = next((e for e in parents if e.get("type") == "Package"), None)
    l3_tmpl = next((e for e in parents if e.get("type") == "L3Cache"), None)

    # chunks of consecutive cores, as even as possible
    chunks = []
    base, extra = divmod(len(units), k)
    pos = 0
    for i in range(k):
        n = base + (1 if i < extra else 0)
        chunks.append(units[pos:pos + n])
        pos += n

    # strip the machine's CPU/memory children (keep info, I/O and Misc objects)
    kept_io = []
    for c in list(machine):
        if c.tag == "object":
            machine.remove(c)
            if c.get("type") in IO_TYPES or c.get("type") == "Misc":
                kept_io.append(c)
    # I/O objects that hung below removed objects: move them to machine level
    for e, p in list(parents.items()):
        if e.get("type") in IO_TYPES and p is not machine and p.get("type") not in IO_TYPES:
            sys.stderr.write("gen_topology: note: I/O object %s moved to machine level\n"
                             % (e.get("pci_busid") or e.get("name") or e.get("type")))
            kept_io.append(e)

    def set_nodeset(e, ns):
        for a in ("nodeset", "complete_nodeset"):
            if e.get(a) is not None or a == "nodeset":
                e.set(a, ns)

    for i, chunk in enumerate(chunks):
        cpus = 0
        ccpus = 0
        for u in chunk:
            cpus |= parse_bitmap(u.get("cpuset"))
            ccpus |= parse_bitmap(u.get("complete_cpuset") or u.get("cpuset"))
        cs, ccs, ns = format_bitmap(cpus), format_bitmap(ccpus), format_bitmap(1 << i)

        pkg = ET.Element("object", {"type": "Package", "os_index": str(i)})
        pkg.set("cpuset", cs)
        pkg.set("complete_cpuset", ccs)
        pkg.set("nodeset", ns)
        pkg.set("complete_nodeset", ns)
        pkg.set("gp_index", gp())
        if pkg_tmpl is not None:
            for inf in pkg_tmpl.findall("info"):
                pkg.append(copy.deepcopy(inf))

        numa = ET.SubElement(pkg, "object", {"type": "NUMANode", "os_index": str(i)})
        numa.set("cpuset", cs)
        numa.set("complete_cpuset", ccs)
        numa.set("nodeset", ns)
        numa.set("complete_nodeset", ns)
        numa.set("gp_index", gp())
        numa.set("local_memory", str(total_mem // k))
        for size, count in sorted(page_types.items(), key=lambda kv: int(kv[0])):
            ET.SubElement(numa, "page_type", {"size": size, "count": str(count // k)})

        holder = pkg
        # A machine whose L3s are per core already carries them inside the units: adding a
        # package-wide one would make two L3 levels (hwloc-calc -I l3 then refuses).
        units_have_l3 = any(d.get("type") == "L3Cache" for u in chunk for d in u.iter("object"))
        if l3_tmpl is not None and not units_have_l3:
            l3 = ET.SubElement(pkg, "object", {a: v for a, v in l3_tmpl.attrib.items()})
            l3.set("os_index", str(i))
            l3.set("cpuset", cs)
            l3.set("complete_cpuset", ccs)
            l3.set("nodeset", ns)
            l3.set("complete_nodeset", ns)
            l3.set("gp_index", gp())
            for inf in l3_tmpl.findall("info"):
                l3.append(copy.deepcopy(inf))
            holder = l3
        for u in chunk:
            for e in [u] + [x for x, _ in walk(u)]:
                if e.get("type") not in IO_TYPES and e.get("type") != "Misc":
                    set_nodeset(e, ns)
            holder.append(u)
        machine.append(pkg)

    for c in kept_io:
        machine.append(c)

    allns = format_bitmap((1 << k) - 1)
    machine.set("nodeset", allns)
    machine.set("complete_nodeset", allns)
    if machine.get("allowed_nodeset") is not None:
        machine.set("allowed_nodeset", allns)
    # memory attributes and distances refer to the old NUMA nodes: drop them
    for tag in ("memattr", "distances2", "distances2hetero", "distances"):
        for e in topo.findall(tag):
            topo.remove(e)
    # keep element order: object first, then the rest (support, cpukind, ...)
    return machine


# ---------------------------------------------------------------- --gpu
def resolve_parent(topo, loc):
    machine = root_machine(topo)
    loc = loc.strip()
    if loc.lower() == "machine":
        return machine
    m = re.fullmatch(r"([A-Za-z0-9]+):(\d+)", loc)
    if not m:
        die("bad --gpu location %r (machine, package:N, numa:N, l3:N, ...)" % loc)
    tname, idx = m.group(1), int(m.group(2))
    t = TYPE_ALIASES.get(tname.lower())
    if t is None:
        # accept hwloc's own spelling (L3Cache, NUMANode, ...)
        t = next((v for v in set(TYPE_ALIASES.values()) if v.lower() == tname.lower()), None)
    if t is None:
        die("unknown object type %r in --gpu %s" % (tname, loc))
    found = [(e, p) for e, p in walk(topo) if e.get("type") == t]
    if t == "NUMANode":
        found.sort(key=lambda ep: int(ep[0].get("os_index", "0")))
    if idx >= len(found):
        die("--gpu %s: only %d %s object(s)" % (loc, len(found), t))
    e, p = found[idx]
    if t in MEMORY_TYPES:
        # I/O children cannot hang below memory objects: use the normal parent
        while p.get("type") in MEMORY_TYPES:
            p = next(pp for ee, pp in walk(topo) if ee is p)
        if parse_bitmap(p.get("cpuset")) != parse_bitmap(e.get("cpuset")):
            die("--gpu %s: the parent %s of that NUMA node spans more CPUs (%s) than the node "
                "(%s); use a parent object explicitly" % (loc, p.get("type"), p.get("cpuset"),
                                                           e.get("cpuset")))
        return p
    if t == "PU":
        die("--gpu: a PU cannot have I/O children")
    return e


def used_buses(topo):
    used = set()
    for e in topo.iter("object"):
        b = e.get("pci_busid")
        if b:
            m = re.fullmatch(r"([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):", b[:8])
            if m:
                used.add((int(m.group(1), 16), int(m.group(2), 16)))
        r = e.get("bridge_pci")
        if r:
            m = re.fullmatch(r"([0-9a-fA-F]{4}):\[([0-9a-fA-F]{2})-([0-9a-fA-F]{2})\]", r)
            if m:
                d = int(m.group(1), 16)
                for bus in range(int(m.group(2), 16), int(m.group(3), 16) + 1):
                    used.add((d, bus))
    return used


def parse_busid(s):
    m = re.fullmatch(r"([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", s)
    if not m:
        die("bad PCI bus id %r (want DDDD:BB:DD.F)" % s)
    return tuple(int(x, 16) for x in m.groups())




# ---------------------------------------------------------------- devices
class DeviceSpec:
    """One --gpu/--pci SPEC: LOC[=DDDD:BB:DD.F][,key=value]..."""

    KEYS = ("kind", "partitions", "memnode", "switch", "direct")

    def __init__(self, text, default_kind, gpu_option):
        self.text = text
        head, *pairs = text.split(",")
        loc, _, bid = head.partition("=")
        self.loc = loc.strip()
        self.busid = parse_busid(bid) if bid else None
        opts = {}
        for p in pairs:
            k, eq, v = p.partition("=")
            if not eq or k not in self.KEYS:
                die("bad key %r in %r (keys: %s)" % (p, text, ", ".join(self.KEYS)))
            opts[k] = v
        self.kind = opts.get("kind", default_kind)
        if self.kind not in KINDS:
            die("unknown kind %r in %r (kinds: %s)" % (self.kind, text, ", ".join(KINDS)))
        if gpu_option and not KINDS[self.kind]["gpu"]:
            die("--gpu %s: %s is not a GPU kind; use --pci" % (text, self.kind))
        try:
            self.partitions = int(opts.get("partitions", "1"))
            self.memnode = int(opts["memnode"]) if "memnode" in opts else None
        except ValueError:
            die("bad number in %r" % text)
        if self.partitions < 1:
            die("partitions must be >= 1 in %r" % text)
        self.switch = opts.get("switch")
        self.direct = opts.get("direct", "0") == "1"
        self.gpu = KINDS[self.kind]["gpu"]

    def busid_text(self):
        return "%04x:%02x:%02x.%x" % self.busid


def fmt_type(kind):
    k = KINDS[kind]
    return "%04x [%04x:%04x] [%04x:%04x] %02x" % (k["cls"], k["vendor"], k["device"], k["vendor"], k["sub"],
                                                  k["rev"])


def assign_buses(topo, specs):
    """Bus ids for devices without one; refuse buses (or bridge buses) already taken."""
    used = used_buses(topo)

    def needed(s):
        bus = s.busid[1]
        return {(s.busid[0], bus)} if s.direct or s.switch else {(s.busid[0], bus), (s.busid[0], bus - 1)}

    for s in specs:
        if s.busid is not None:
            if s.busid[1] == 0 and not s.direct:
                die("%s: bus 00 cannot sit behind a bridge (use direct=1)" % s.text)
            if needed(s) & used:
                die("%s: bus %02x (or its bridge bus) already in use" % (s.text, s.busid[1]))
            used |= needed(s)
    next_bus = 0x17
    for s in specs:
        if s.busid is None:
            while (0, next_bus) in used or (0, next_bus - 1) in used:
                next_bus += 0x10
            if next_bus > 0xFF:
                die("ran out of PCI bus numbers; give bus ids explicitly")
            s.busid = (0, next_bus, 0, 0)
            next_bus += 0x10
            used |= needed(s)
    # a switch needs two buses of its own below its host bridge: upstream link and internal bus
    switches = {}
    for s in specs:
        if s.switch:
            switches.setdefault(s.switch, []).append(s)
    for name, members in switches.items():
        doms = {m.busid[0] for m in members}
        if len(doms) != 1:
            die("switch %s: devices in different PCI domains" % name)
        up = min(m.busid[1] for m in members) - 2
        if up < 0 or {(members[0].busid[0], up), (members[0].busid[0], up + 1)} & used:
            die("switch %s: buses %02x-%02x below the lowest device bus are not free" % (name, max(up, 0), up + 1))
        used |= {(members[0].busid[0], up), (members[0].busid[0], up + 1)}
    seen = {}
    for s in specs:
        if s.busid in seen:
            die("%s and %s: same bus id" % (seen[s.busid].text, s.text))
        seen[s.busid] = s
    return switches


def os_device_names(specs):
    """Per backend, indexes in PCI order over all devices (as nvidia-smi and rocm-smi count)."""
    counters = {}
    names = {}
    for s in sorted(specs, key=lambda s: s.busid):
        names[s] = []
        for b in KINDS[s.kind]["backends"]:
            for _ in range(s.partitions if s.gpu else 1):
                i = counters.get(b, 0)
                counters[b] = i + 1
                names[s].append((b, i))
    return names


def add_os_device(pci, backend, index, kind, gp, model):
    k = KINDS[kind]
    osdev_type, subtype = OSDEV[backend]
    name = ("nvme%dn1" % index) if backend == "nvme" else "%s%d" % (backend, index)
    attrs = {"type": "OSDev", "gp_index": gp(), "name": name, "osdev_type": osdev_type}
    if subtype:
        attrs["subtype"] = subtype
    o = ET.SubElement(pci, "object", attrs)
    info = []
    if backend == "cuda":
        info = [("Backend", "CUDA"), ("GPUVendor", k["vendor_name"]), ("GPUModel", model),
                ("CUDAGlobalMemorySize", str(k["memory"] // 1024)), ("CUDAL2CacheSize", "40960"),
                ("CUDAMultiProcessors", "108"), ("CUDACoresPerMP", "64"), ("CUDASharedMemorySizePerMP", "48")]
    elif backend == "nvml":
        info = [("Backend", "NVML"), ("GPUVendor", k["vendor_name"]), ("GPUModel", model),
                ("NVIDIASerial", "%013d" % (1320000000000 + index)),
                ("NVIDIAUUID", "GPU-00000000-0000-0000-0000-%012x" % (0xFA4E0000 + index))]
    elif backend == "rsmi":
        info = [("Backend", "RSMI"), ("GPUVendor", "AMD"), ("GPUModel", model),
                ("AMDUUID", "%016x" % (0x0A3D000000000000 + index)), ("AMDSerial", "%016x" % (0x5E000 + index))]
    elif backend == "mlx5_":
        info = [("Backend", "Linux"), ("NodeGUID", "b83f:d203:00%02x:0000" % index), ("Port1State", "4"),
                ("Port1LID", "0x%x" % (0x100 + index))]
    elif backend == "eno":
        info = [("Backend", "Linux"), ("Address", "3c:ec:ef:00:00:%02x" % index)]
    elif backend == "hsn":
        info = [("Backend", "Linux"), ("Address", "02:00:00:00:00:%02x" % index)]
    elif backend == "nvme":
        info = [("Backend", "Linux"), ("Size", "3750738264"), ("Vendor", "Samsung")]
    for n, v in info:
        ET.SubElement(o, "info", {"name": n, "value": v})


def bridge(parent, gp, kind, depth, secondary, subordinate, busid=None, ids=(BRIDGE_VENDOR, BRIDGE_DEVICE)):
    dom = secondary[0]
    attrs = {"type": "Bridge", "gp_index": gp(), "bridge_type": kind, "depth": str(depth),
             "bridge_pci": "%04x:[%02x-%02x]" % (dom, secondary[1], subordinate)}
    if busid is not None:
        attrs["pci_busid"] = "%04x:%02x:%02x.%x" % busid
        attrs["pci_type"] = "0604 [%04x:%04x] [0000:0000] 00" % ids
        attrs["pci_link_speed"] = "31.507692"
    return ET.SubElement(parent, "object", attrs)


def add_pci_function(parent, s, gp, os_names, model, osdev):
    k = KINDS[s.kind]
    pci = ET.SubElement(parent, "object", {"type": "PCIDev", "gp_index": gp(), "pci_busid": s.busid_text(),
                                           "pci_type": fmt_type(s.kind), "pci_link_speed": "31.507692"})
    ET.SubElement(pci, "info", {"name": "PCIVendor", "value": k["vendor_name"]})
    ET.SubElement(pci, "info", {"name": "PCIDevice", "value": k["device_name"]})
    if osdev:
        for backend, index in os_names:
            add_os_device(pci, backend, index, s.kind, gp, model or k.get("model", ""))
    return pci


def place_devices(topo, specs, gp, model, osdev):
    switches = assign_buses(topo, specs)
    names = os_device_names(specs)
    built_switch = {}
    for s in specs:
        parent = resolve_parent(topo, s.loc)
        dom, bus = s.busid[0], s.busid[1]
        mdl = model if (model and s.kind == "a100") else None
        if s.switch:
            members = switches[s.switch]
            if s.switch not in built_switch:
                up = min(m.busid[1] for m in members) - 2
                top = max(m.busid[1] for m in members)
                host = bridge(parent, gp, "0-1", 0, (dom, up), top)
                upstream = bridge(host, gp, "1-1", 1, (dom, up + 1), top, (dom, up, 0, 0),
                                  (SWITCH_VENDOR, SWITCH_DEVICE))
                built_switch[s.switch] = (parent, upstream, up)
            sw_parent, upstream, up = built_switch[s.switch]
            if sw_parent is not parent:
                die("switch %s: %s is below another object than the switch's other devices" % (s.switch, s.text))
            port = bridge(upstream, gp, "1-1", 2, (dom, bus), bus, (dom, up + 1, members.index(s), 0),
                          (SWITCH_VENDOR, SWITCH_DEVICE))
            add_pci_function(port, s, gp, names[s], mdl, osdev)
        elif s.direct:
            host = bridge(parent, gp, "0-1", 0, (dom, bus), bus)
            add_pci_function(host, s, gp, names[s], mdl, osdev)
        else:
            host = bridge(parent, gp, "0-1", 0, (dom, bus - 1), bus)
            port = bridge(host, gp, "1-1", 1, (dom, bus), bus, (dom, bus - 1, 0, 0))
            add_pci_function(port, s, gp, names[s], mdl, osdev)
        if s.memnode is not None:
            add_gpu_memory_node(topo, parent, s, gp)


def parents_of(topo):
    return {e: p for e, p in walk(topo)}


def add_gpu_memory_node(topo, parent, s, gp):
    """The GPU's memory as a CPU-less NUMA node attached where the GPU is (cpuset of that
    object, no PU of its own), as hwloc shows NVLink-attached GPU memory."""
    for e in topo.iter("object"):
        if e.get("type") == "NUMANode" and e.get("os_index") == str(s.memnode):
            die("%s: NUMA node %d exists already" % (s.text, s.memnode))
    bit = 1 << s.memnode
    node = ET.SubElement(parent, "object", {
        "type": "NUMANode", "os_index": str(s.memnode), "cpuset": parent.get("cpuset"),
        "complete_cpuset": parent.get("complete_cpuset") or parent.get("cpuset"),
        "nodeset": format_bitmap(bit), "complete_nodeset": format_bitmap(bit), "gp_index": gp(),
        "subtype": "GPUMemory", "local_memory": str(KINDS[s.kind]["memory"])})
    ET.SubElement(node, "page_type", {"size": "65536", "count": str(KINDS[s.kind]["memory"] // 65536)})
    ET.SubElement(node, "info", {"name": "PCIBusID", "value": s.busid_text()})
    # The node is local to its parent, every ancestor and every CPU-side descendant.
    par = parents_of(topo)
    touched = [parent]
    e = parent
    while e in par and par[e].tag == "object":
        e = par[e]
        touched.append(e)
    touched += [d for d, _ in walk(parent) if d.get("type") not in IO_TYPES and d is not node
                and d.get("type") != "Misc"]
    for e in touched:
        for a in ("nodeset", "complete_nodeset", "allowed_nodeset"):
            if e.get(a) is not None:
                e.set(a, format_bitmap(parse_bitmap(e.get(a)) | bit))


def set_allowed_cpus(topo, spec):
    machine = root_machine(topo)
    if re.fullmatch(r"[0-9][0-9,\-]*", spec):
        cpus = 0
        for part in spec.split(","):
            a, _, b = part.partition("-")
            for c in range(int(a), int(b or a) + 1):
                cpus |= 1 << c
    else:
        cpus = parse_bitmap(resolve_parent(topo, spec).get("cpuset"))
    if cpus & ~parse_bitmap(machine.get("cpuset")) or not cpus:
        die("--allowed-cpus %s: not a non-empty subset of the machine's CPUs" % spec)
    machine.set("allowed_cpuset", format_bitmap(cpus))
    return ",".join(str(b) for b in bits(cpus))




# ---------------------------------------------------------------- presets
def smt(cores, threads):
    """PU OS indexes in logical order when hardware thread t of core c is c + cores*t
    (x86 Linux numbering: all first threads, then all second threads)."""
    return ",".join(str(c + cores * t) for c in range(cores) for t in range(threads))


def gib(n):
    return str(n * GIB)


# Each preset: doc (one line), synthetic (an hwloc synthetic description), gpus / pci
# (SPECs as for --gpu / --pci), allowed (optional --allowed-cpus). The shapes are modelled on
# real GPU servers; every CPU set a test expects is taken from hwloc-calc on the output.
PRESETS = {
    "nps4": dict(
        doc="2-socket EPYC 7402-like in NPS4 (8 NUMA nodes of 6 cores, SMT2, L3 per 3-core CCX), "
            "4 A100 on NUMA 1,3,5,7 in PCI order 3,1,7,5, one ConnectX-6 next to each",
        synthetic="pack:2 group:4 [numa(memory=%s)] l3:2(size=16MB) core:3 pu:2(indexes=%s)" % (gib(64), smt(48, 2)),
        gpus=["numa:3=0000:03:00.0", "numa:1=0000:44:00.0", "numa:7=0000:84:00.0", "numa:5=0000:c4:00.0"],
        pci=["numa:3=0000:06:00.0,kind=cx6", "numa:1=0000:47:00.0,kind=cx6", "numa:7=0000:87:00.0,kind=cx6",
             "numa:5=0000:c7:00.0,kind=cx6", "package:0=0000:62:00.0,kind=aspeed,direct=1"]),
    "dgx-a100": dict(
        doc="DGX A100-like: 2 EPYC 7742 (64 cores, SMT2: siblings c and c+128) in NPS4, 4 cores per "
            "L3 (CCX), 8 A100, two on each of NUMA 3,1,7,5 (PCI order), 8 ConnectX-6, 6 NVSwitches",
        synthetic="pack:2 group:4 [numa(memory=%s)] l3:4(size=16MB) core:4 pu:2(indexes=%s)" % (gib(128), smt(128, 2)),
        gpus=["numa:3=0000:07:00.0", "numa:3=0000:0f:00.0", "numa:1=0000:47:00.0", "numa:1=0000:4e:00.0",
              "numa:7=0000:87:00.0", "numa:7=0000:90:00.0", "numa:5=0000:b7:00.0", "numa:5=0000:bd:00.0"],
        pci=["numa:3=0000:0c:00.0,kind=cx6", "numa:3=0000:12:00.0,kind=cx6", "numa:1=0000:54:00.0,kind=cx6",
             "numa:1=0000:58:00.0,kind=cx6", "numa:7=0000:8d:00.0,kind=cx6", "numa:7=0000:94:00.0,kind=cx6",
             "numa:5=0000:ba:00.0,kind=cx6", "numa:5=0000:cc:00.0,kind=cx6"]
            + ["numa:6=0000:%02x:00.0,kind=nvswitch" % b for b in (0xd0, 0xd2, 0xd4, 0xd6, 0xd8, 0xda)]),
    "power9": dict(
        doc="IBM AC922-like: 2 POWER9 (20 cores, SMT4, L3 per core pair), NUMA 0 and 8, 4 V100 (2 per "
            "socket) whose memory is a CPU-less GPUMemory NUMA node each (255,254 | 253,252)",
        synthetic="pack:2 [numa(memory=%s indexes=0,8)] l3:10(size=10MB) core:2 pu:4" % gib(256),
        gpus=["package:0=0004:04:00.0,kind=v100,direct=1,memnode=255",
              "package:0=0004:05:00.0,kind=v100,direct=1,memnode=254",
              "package:1=0035:03:00.0,kind=v100,direct=1,memnode=253",
              "package:1=0035:04:00.0,kind=v100,direct=1,memnode=252"],
        pci=["package:0=0000:01:00.0,kind=cx6", "package:1=0033:01:00.0,kind=cx6"]),
    "gh200": dict(
        doc="Grace Hopper-like: one 72-core Grace (no SMT, one L3) on NUMA 0, the Hopper GPU's memory "
            "as CPU-less GPUMemory NUMA node 1",
        synthetic="pack:1 [numa(memory=%s)] l3:1(size=114MB) core:72 pu:1" % gib(480),
        gpus=["package:0=0009:01:00.0,kind=gh200,direct=1,memnode=1"],
        pci=["package:0=0000:01:00.0,kind=cx6,direct=1"]),
    "mi300a-tpx": dict(
        doc="MI300A node-like: 4 APUs (24 cores, SMT2: siblings c and c+96, 3 L3 of 8 cores), one NUMA "
            "node each, each APU's GPU one PCI function in TPX mode (3 rsmi OS devices), a NIC per APU",
        synthetic="pack:4 [numa(memory=%s)] l3:3(size=32MB) core:8 pu:2(indexes=%s)" % (gib(128), smt(96, 2)),
        gpus=["package:%d=%04x:02:00.0,kind=mi300a,partitions=3,direct=1" % (p, p) for p in range(4)],
        pci=["package:%d=%04x:01:00.0,kind=cassini,direct=1" % (p, p) for p in range(4)]),
    "mi300a-spx": dict(
        doc="the mi300a-tpx node in SPX mode: one logical GPU per APU",
        synthetic="pack:4 [numa(memory=%s)] l3:3(size=32MB) core:8 pu:2(indexes=%s)" % (gib(128), smt(96, 2)),
        gpus=["package:%d=%04x:02:00.0,kind=mi300a,direct=1" % (p, p) for p in range(4)],
        pci=["package:%d=%04x:01:00.0,kind=cassini,direct=1" % (p, p) for p in range(4)]),
    "16gpu": dict(
        doc="DGX-2-like: 2 Xeon sockets (24 cores, SMT2: siblings c and c+48, one L3 each), one NUMA "
            "node per socket, 16 V100 behind PCIe switches (2 per switch, 8 per socket)",
        synthetic="pack:2 [numa(memory=%s)] l3:1(size=33MB) core:24 pu:2(indexes=%s)" % (gib(768), smt(48, 2)),
        gpus=["package:%d=0000:%02x:00.0,kind=v100,switch=%s" % (pkg, bus, sw)
              for pkg, sw, buses in ((0, "a", (0x34, 0x36)), (0, "b", (0x39, 0x3b)), (0, "c", (0x57, 0x59)),
                                     (0, "d", (0x5c, 0x5e)), (1, "e", (0xb7, 0xb9)), (1, "f", (0xbc, 0xbe)),
                                     (1, "g", (0xe0, 0xe2)), (1, "h", (0xe5, 0xe7)))
              for bus in buses]),
    "snc": dict(
        doc="Xeon SNC2-like: 2 sockets x 2 sub-NUMA clusters of 16 cores (SMT2: siblings c and c+64), one "
            "L3 per socket spanning both of its NUMA nodes, one H100 per NUMA node",
        synthetic="pack:2 l3:1(size=105MB) group:2 [numa(memory=%s)] core:16 pu:2(indexes=%s)" % (gib(128), smt(64, 2)),
        gpus=["numa:0=0000:19:00.0,kind=h100", "numa:1=0000:3b:00.0,kind=h100",
              "numa:2=0000:9b:00.0,kind=h100", "numa:3=0000:bb:00.0,kind=h100"]),
    "machine-gpu": dict(
        doc="2-socket node (12 cores, SMT2: siblings c and c+24, one L3 and NUMA node per socket) with "
            "2 GPUs attached at machine level (no NUMA affinity)",
        synthetic="pack:2 [numa(memory=%s)] l3:1(size=30MB) core:12 pu:2(indexes=%s)" % (gib(96), smt(24, 2)),
        gpus=["machine=0000:03:00.0,kind=v100", "machine=0000:82:00.0,kind=v100"]),
    "workstation": dict(
        doc="single-socket workstation: 16 cores (SMT2: siblings c and c+16), one L3, one NUMA node, "
            "2 RTX A6000 (VGA class) and an NVMe drive",
        synthetic="pack:1 [numa(memory=%s)] l3:1(size=64MB) core:16 pu:2(indexes=%s)" % (gib(128), smt(16, 2)),
        gpus=["package:0=0000:01:00.0,kind=rtx-a6000", "package:0=0000:21:00.0,kind=rtx-a6000"],
        pci=["package:0=0000:41:00.0,kind=nvme"]),
    "no-allowed-cpu": dict(
        doc="2-socket node (8 cores, SMT2: siblings c and c+16, one L3 and NUMA node per socket), GPU 0 "
            "on NUMA 0, GPU 1 on NUMA 1; allowed CPUs (a cpuset) only those of NUMA 0, so GPU 1's node "
            "has no allowed CPU",
        synthetic="pack:2 [numa(memory=%s)] l3:1(size=20MB) core:8 pu:2(indexes=%s)" % (gib(64), smt(16, 2)),
        gpus=["numa:0=0000:17:00.0", "numa:1=0000:b1:00.0"],
        allowed="numa:0"),
    "mixed-vendors": dict(
        doc="2-socket node with sparse NUMA ids 0 and 2 (8 cores, SMT2 each): an NVIDIA A100 on NUMA 0 "
            "(08:00.0) and an AMD MI210 on NUMA 2 (44:00.0)",
        synthetic="pack:2 [numa(memory=%s indexes=0,2)] l3:1(size=32MB) core:8 pu:2(indexes=%s)" % (gib(64), smt(16, 2)),
        gpus=["numa:0=0000:08:00.0,kind=a100", "numa:1=0000:44:00.0,kind=mi210"]),
    "dgx-h100": dict(
        doc="DGX H100-like NICs: 2 Xeon sockets (28 cores, SMT2: siblings c and c+56, one L3 and NUMA "
            "node each), 8 H100 (4 per socket), each behind its own PCIe switch with one ConnectX "
            "(mlx5_N); a 1 GbE management port (i350) behind GPU 0's switch, which is not a fabric NIC",
        synthetic="pack:2 [numa(memory=%s)] l3:1(size=105MB) core:28 pu:2(indexes=%s)" % (gib(1024), smt(56, 2)),
        gpus=["package:%d=0000:%02x:00.0,kind=h100,switch=s%d" % (i // 4, bus, i)
              for i, bus in enumerate((0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf))],
        pci=["package:%d=0000:%02x:00.0,kind=cx6,switch=s%d" % (i // 4, bus, i)
             for i, bus in enumerate((0x1c, 0x44, 0x53, 0x62, 0x9e, 0xc4, 0xd2, 0xe0))]
            + ["package:0=0000:1d:00.0,kind=i350,switch=s0"]),
    "nic-far-socket": dict(
        doc="2 sockets of 2 NUMA nodes (4 cores, SMT2: siblings c and c+16), one A100 per NUMA node, "
            "both ConnectX at package level of socket 1 (no GPU shares a bridge or node with them)",
        synthetic="pack:2 group:2 [numa(memory=%s)] l3:1(size=16MB) core:4 pu:2(indexes=%s)" % (gib(64), smt(16, 2)),
        gpus=["numa:0=0000:17:00.0", "numa:1=0000:27:00.0", "numa:2=0000:97:00.0", "numa:3=0000:a7:00.0"],
        pci=["package:1=0000:b7:00.0,kind=cx6", "package:1=0000:c7:00.0,kind=cx6"]),
    "no-fabric": dict(
        doc="2-socket node (8 cores, SMT2: siblings c and c+16), an A100 per socket and only 1 GbE "
            "management ports (i350), one on each GPU's root port: no fabric NIC",
        synthetic="pack:2 [numa(memory=%s)] l3:1(size=32MB) core:8 pu:2(indexes=%s)" % (gib(64), smt(16, 2)),
        gpus=["numa:0=0000:19:00.0,switch=a", "numa:1=0000:99:00.0,switch=b"],
        pci=["numa:0=0000:1a:00.0,kind=i350,switch=a", "numa:1=0000:9a:00.0,kind=i350,switch=b"]),
    "cpu-only": dict(
        doc="2-socket node without accelerators (8 cores, SMT2 each), only a NIC and a BMC VGA chip",
        synthetic="pack:2 [numa(memory=%s)] l3:1(size=32MB) core:8 pu:2(indexes=%s)" % (gib(64), smt(16, 2)),
        gpus=[],
        pci=["numa:0=0000:17:00.0,kind=cx6", "machine=0000:03:00.0,kind=aspeed"]),
}


def reorder_children(elem):
    """hwloc exports info, then memory, normal, I/O, Misc children; keep that order."""
    def rank(c):
        if c.tag != "object":
            return 0
        t = c.get("type")
        if t in MEMORY_TYPES:
            return 1
        if t in IO_TYPES:
            return 3
        if t == "Misc":
            return 4
        return 2
    kids = list(elem)
    kids_sorted = sorted(kids, key=rank)  # stable
    if kids_sorted != kids:
        for c in kids:
            elem.remove(c)
        for c in kids_sorted:
            elem.append(c)
    for c in objects(elem):
        reorder_children(c)




# ---------------------------------------------------------------- main
def lstopo_program():
    for name in ("lstopo-no-graphics", "lstopo"):
        p = shutil.which(name)
        if p:
            return p
    die("lstopo-no-graphics (hwloc) not found")


def read_input(a):
    if a.synthetic:
        r = subprocess.run([lstopo_program(), "--input", a.synthetic, "--of", "xml", "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            die("hwloc refused the synthetic description %r: %s" % (a.synthetic, "; ".join(r.stderr.decode().split("\n")).strip("; ")))
        return r.stdout
    if a.input is None:
        return subprocess.run([lstopo_program(), "--of", "xml", "-"], check=True, stdout=subprocess.PIPE).stdout
    if a.input == "-":
        return sys.stdin.buffer.read()
    with open(a.input, "rb") as f:
        return f.read()


def check_loads(path):
    """hwloc itself must accept the output, I/O included (a broken generator fails here)."""
    r = subprocess.run([lstopo_program(), "--input", path, "--whole-io", "--disallowed", "--of", "xml", "-"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        die("hwloc cannot load the generated %s: %s" % (path, r.stderr.decode().strip()))


def describe_presets():
    for name, p in PRESETS.items():
        print("%-15s %s" % (name, p["doc"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]))
    ap.add_argument("--preset", metavar="NAME")
    ap.add_argument("--list-presets", action="store_true")
    ap.add_argument("--describe-presets", action="store_true")
    ap.add_argument("-i", "--input", default=None)
    ap.add_argument("--synthetic", default=None)
    ap.add_argument("-o", "--output")
    ap.add_argument("--gpu", action="append", default=[])
    ap.add_argument("--pci", action="append", default=[])
    ap.add_argument("--split-numa", type=int, default=0)
    ap.add_argument("--allowed-cpus", default=None)
    ap.add_argument("--facts", default=None)
    ap.add_argument("--model", default=None)
    ap.add_argument("--no-osdev", action="store_true")
    ap.add_argument("--verify", action="store_true")
    a = ap.parse_args()

    if a.list_presets:
        print("\n".join(PRESETS))
        return
    if a.describe_presets:
        describe_presets()
        return
    if not a.output:
        die("-o OUT.xml is required (or --list-presets / --describe-presets)")
    if a.preset is not None and a.preset not in PRESETS:
        die("unknown preset %r (presets: %s)" % (a.preset, ", ".join(PRESETS)))
    preset = PRESETS.get(a.preset)
    if preset:
        if a.input or a.synthetic or a.split_numa:
            die("--preset %s brings its own CPUs: no -i, --synthetic or --split-numa" % a.preset)
        a.synthetic = preset["synthetic"]
        a.gpu = preset.get("gpus", []) + a.gpu
        a.pci = preset.get("pci", []) + a.pci
        if a.allowed_cpus is None:
            a.allowed_cpus = preset.get("allowed")
    if a.input and a.synthetic:
        die("-i and --synthetic exclude each other")

    data = read_input(a)
    try:
        topo = ET.fromstring(data)
    except ET.ParseError as e:
        die("cannot parse XML: %s" % e)
    if topo.tag != "topology":
        die("root element is <%s>, not <topology>" % topo.tag)
    ver = topo.get("version", "2.0")
    if not ver.startswith("2."):
        die("topology version %s: only hwloc 2.x XML is supported (hwloc 2.9 refuses 3.x)" % ver)

    gp = GpIndex(topo)
    if a.split_numa:
        if a.split_numa < 1:
            die("--split-numa must be >= 1")
        split_numa(topo, a.split_numa, gp)

    specs = [DeviceSpec(s, "a100", True) for s in a.gpu] + [DeviceSpec(s, "cx6", False) for s in a.pci]
    place_devices(topo, specs, gp, a.model, not a.no_osdev)
    allowed = set_allowed_cpus(topo, a.allowed_cpus) if a.allowed_cpus else None

    machine = root_machine(topo)
    if a.preset:
        info = ET.Element("info", {"name": "NumabindGenerator", "value": "gen_topology.py --preset " + a.preset})
        machine.insert(0, info)
    for c in objects(topo):
        reorder_children(c)
    ET.indent(topo, space="  ")
    body = ET.tostring(topo, encoding="unicode")
    text = '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n' \
        + body + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
        if a.preset or a.synthetic:
            check_loads(a.output)

    if a.facts:
        facts = {
            "preset": a.preset, "doc": preset["doc"] if preset else None, "synthetic": a.synthetic,
            "devices": [{"busid": s.busid_text(), "kind": s.kind, "gpu": s.gpu, "location": s.loc,
                         "vendor": "%04x" % KINDS[s.kind]["vendor"], "class": "%04x" % KINDS[s.kind]["cls"],
                         "partitions": s.partitions if s.gpu else 1, "memnode": s.memnode}
                        for s in sorted(specs, key=lambda s: s.busid)],
            "allowed_cpus": allowed,
        }
        with open(a.facts, "w", encoding="utf-8") as f:
            json.dump(facts, f, indent=1)
            f.write("\n")

    if a.verify:
        if a.output == "-":
            die("--verify needs -o FILE")
        calc = shutil.which("hwloc-calc")
        if not calc:
            die("--verify: hwloc-calc not found")
        for s in specs:
            if not s.gpu:
                continue
            r = subprocess.run([calc, "--input", a.output, "pci=%s" % s.busid_text(), "-p", "-I", "pu"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0 or not r.stdout.strip():
                die("--verify: hwloc-calc failed for %s: %s" % (s.busid_text(), r.stderr.strip()))
            sys.stderr.write("gpu %s -> PUs %s\n" % (s.busid_text(), r.stdout.strip()))


if __name__ == "__main__":
    main()
