#!/usr/bin/env python3
"""gen_topology.py — add fake NVIDIA GPUs (and optionally fake NUMA nodes) to an hwloc XML.

Usage:
  gen_topology.py [-i IN.xml] -o OUT.xml [--split-numa K] [--gpu LOC[=BUSID]]...
                  [--model NAME] [--no-osdev] [--verify]

  -i IN.xml        hwloc 2.x XML (default: `lstopo --of xml` of this machine; "-" = stdin)
  -o OUT.xml       output ("-" = stdout)
  --gpu LOC        one fake GPU (repeat for more) below the object LOC:
                     machine            machine-level locality (like numa_node = -1)
                     package:N          N-th package (logical index)
                     numa:N             the normal parent of NUMA node N (error if that
                                        parent's cpuset is wider than the node's)
                     TYPE:N             any other type: l3:N, group:N, core:N, l2:N ...
                   Optional "=DDDD:BB:DD.F" sets its PCI bus id; otherwise GPU i gets
                   0000:17:00.0, 0000:27:00.0, ... (bus 0x17 + 0x10*i, skipping used buses).
  --split-numa K   rebuild the CPU tree as K packages, each with one NUMA node and its own
                   copy of the first L3, holding consecutive cores (same real PUs); memory is
                   divided evenly. Applied before --gpu, so --gpu numa:1 refers to the new nodes.
  --model NAME     GPU model string (default "NVIDIA A100-SXM4-40GB")
  --no-osdev       do not add the cudaN / nvmlN OS devices below each GPU
  --verify         after writing, print `hwloc-calc --input OUT pci=BUS -p -I pu` per GPU

Each GPU is PCI vendor 0x10de device 0x20b0 class 0x0302 (3D controller), placed below
a host bridge (bridge_type 0-1) and a PCI-PCI bridge at bus BB-1 (bridge_type 1-1), with
OS devices cudaN (CoProc, subtype CUDA) and nvmlN (GPU, subtype NVML) unless --no-osdev.
Remember: hwloc drops I/O objects unless the I/O filter is enabled (lstopo --whole-io,
hwloc_topology_set_io_types_filter); a loaded XML is not "this system" unless flagged.
Examples:
  gen_topology.py -o /tmp/t.xml --gpu package:0 --gpu package:0
  gen_topology.py -o /tmp/t.xml --split-numa 2 --gpu numa:0 --gpu numa:1 --gpu machine --verify
  hwloc-calc --input /tmp/t.xml pci=0000:17:00.0 -p -I pu ; lstopo --input /tmp/t.xml --whole-io
Python 3 standard library only.
"""

import argparse
import copy
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

NVIDIA_VENDOR = 0x10DE
GPU_DEVICE = 0x20B0
GPU_SUBDEVICE = 0x134F
GPU_CLASS = 0x0302
GPU_REV = 0xA1
BRIDGE_VENDOR, BRIDGE_DEVICE = 0x8086, 0x347A  # an Intel PCIe root port

IO_TYPES = {"Bridge", "PCIDev", "OSDev"}
MEMORY_TYPES = {"NUMANode", "MemCache"}

TYPE_ALIASES = {
    "machine": "Machine", "package": "Package", "socket": "Package",
    "numa": "NUMANode", "numanode": "NUMANode", "node": "NUMANode",
    "group": "Group", "die": "Die", "core": "Core", "pu": "PU",
    "l1": "L1Cache", "l2": "L2Cache", "l3": "L3Cache", "l4": "L4Cache", "l5": "L5Cache",
    "l1i": "L1iCache", "l2i": "L2iCache", "l3i": "L3iCache",
}


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
        if l3_tmpl is not None:
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


def add_gpu(parent, index, busid, gp, model, osdev):
    dom, bus, dev, fn = busid
    if bus == 0:
        die("GPU bus id %04x:%02x:%02x.%x: bus 00 cannot sit behind a bridge" % busid)
    up = bus - 1
    host = ET.SubElement(parent, "object", {
        "type": "Bridge", "gp_index": gp(), "bridge_type": "0-1", "depth": "0",
        "bridge_pci": "%04x:[%02x-%02x]" % (dom, up, bus)})
    br = ET.SubElement(host, "object", {
        "type": "Bridge", "gp_index": gp(), "bridge_type": "1-1", "depth": "1",
        "bridge_pci": "%04x:[%02x-%02x]" % (dom, bus, bus),
        "pci_busid": "%04x:%02x:00.0" % (dom, up),
        "pci_type": "0604 [%04x:%04x] [0000:0000] 04" % (BRIDGE_VENDOR, BRIDGE_DEVICE),
        "pci_link_speed": "31.507692"})
    pci = ET.SubElement(br, "object", {
        "type": "PCIDev", "gp_index": gp(),
        "pci_busid": "%04x:%02x:%02x.%x" % busid,
        "pci_type": "%04x [%04x:%04x] [%04x:%04x] %02x" % (
            GPU_CLASS, NVIDIA_VENDOR, GPU_DEVICE, NVIDIA_VENDOR, GPU_SUBDEVICE, GPU_REV),
        "pci_link_speed": "31.507692"})
    ET.SubElement(pci, "info", {"name": "PCIVendor", "value": "NVIDIA Corporation"})
    ET.SubElement(pci, "info", {"name": "PCIDevice", "value": "GA100 [A100 SXM4 40GB]"})
    if osdev:
        uuid = "GPU-00000000-0000-0000-0000-%012x" % (0xFA4E0000 + index)
        cuda = ET.SubElement(pci, "object", {
            "type": "OSDev", "gp_index": gp(), "name": "cuda%d" % index,
            "subtype": "CUDA", "osdev_type": "5"})
        for n, v in (("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                     ("GPUModel", model), ("CUDAGlobalMemorySize", "41486144"),
                     ("CUDAL2CacheSize", "40960"), ("CUDAMultiProcessors", "108"),
                     ("CUDACoresPerMP", "64"), ("CUDASharedMemorySizePerMP", "48")):
            ET.SubElement(cuda, "info", {"name": n, "value": v})
        nvml = ET.SubElement(pci, "object", {
            "type": "OSDev", "gp_index": gp(), "name": "nvml%d" % index,
            "subtype": "NVML", "osdev_type": "1"})
        for n, v in (("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"),
                     ("GPUModel", model), ("NVIDIASerial", "%013d" % (1320000000000 + index)),
                     ("NVIDIAUUID", uuid)):
            ET.SubElement(nvml, "info", {"name": n, "value": v})
    return pci


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
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]))
    ap.add_argument("-i", "--input", default=None)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--gpu", action="append", default=[])
    ap.add_argument("--split-numa", type=int, default=0)
    ap.add_argument("--model", default="NVIDIA A100-SXM4-40GB")
    ap.add_argument("--no-osdev", action="store_true")
    ap.add_argument("--verify", action="store_true")
    a = ap.parse_args()

    if a.input is None:
        if not shutil.which("lstopo"):
            die("no -i given and lstopo not found")
        data = subprocess.run(["lstopo", "--of", "xml", "-"], check=True,
                              stdout=subprocess.PIPE).stdout
    elif a.input == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(a.input, "rb") as f:
            data = f.read()
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

    used = used_buses(topo)
    next_bus = 0x17
    added = []
    for i, spec in enumerate(a.gpu):
        loc, _, bid = spec.partition("=")
        parent = resolve_parent(topo, loc)
        if bid:
            busid = parse_busid(bid)
            if (busid[0], busid[1]) in used or (busid[0], busid[1] - 1) in used:
                die("--gpu %s: bus %02x (or its bridge bus) already in use" % (spec, busid[1]))
        else:
            while (0, next_bus) in used or (0, next_bus - 1) in used:
                next_bus += 0x10
            if next_bus > 0xFF:
                die("ran out of PCI bus numbers; give bus ids explicitly")
            busid = (0, next_bus, 0, 0)
            next_bus += 0x10
        used.update({(busid[0], busid[1]), (busid[0], busid[1] - 1)})
        add_gpu(parent, i, busid, gp, a.model, not a.no_osdev)
        added.append("%04x:%02x:%02x.%x" % busid)

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

    if a.verify:
        if a.output == "-":
            die("--verify needs -o FILE")
        calc = shutil.which("hwloc-calc")
        if not calc:
            die("--verify: hwloc-calc not found")
        for b in added:
            r = subprocess.run([calc, "--input", a.output, "pci=%s" % b, "-p", "-I", "pu"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0 or not r.stdout.strip():
                die("--verify: hwloc-calc failed for %s: %s" % (b, r.stderr.strip()))
            sys.stderr.write("gpu %s -> PUs %s\n" % (b, r.stdout.strip()))


if __name__ == "__main__":
    main()
