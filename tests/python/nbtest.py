"""Shared helpers of the Python tests: a topology of this machine with one fake GPU local
to each PU, expected values from hwloc-calc (not numabind), and /proc readers. CPU lists
("0-2,5") are read with ids() of tests/lib/cpulist.py, the one parser of the script tiers."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cpulist import ids  # noqa: E402  (re-exported: from nbtest import ids)

BIN = os.environ.get("NUMABIND_BIN", "numabind")
PROBE = os.environ.get("NUMABIND_PROBE", "")
GEN = os.environ["NUMABIND_GEN_TOPOLOGY"]
failures = []


def check(name, ok, detail=""):
    print(("ok   - " if ok else "FAIL - ") + name + ("" if ok or not detail else ": " + str(detail)), flush=True)
    if not ok:
        failures.append(name)


def finish():
    print(f"{len(failures)} failure(s)" if failures else "all passed")
    sys.exit(1 if failures else 0)


def fake_gpu_topology(workdir):
    """One fake GPU per core of this machine (GPU i local to core i): returns (xml, {bus: cpus})
    with each GPU's CPUs as hwloc-calc computes them from the XML (gen_topology --verify)."""
    ncores = len(ids(open("/sys/devices/system/cpu/online").read()))
    xml = os.path.join(workdir, "fake-gpus.xml")
    args = [sys.executable, GEN, "-o", xml, "--verify"]
    for i in range(min(ncores, 8)):
        args += ["--gpu", f"core:{i}"]
    r = subprocess.run(args, check=True, capture_output=True, text=True)
    out = r.stdout + r.stderr
    gpus = {}
    for line in out.splitlines():
        m = re.match(r"gpu (\S+) -> PUs (\S+)", line)
        if m:
            gpus[m.group(1)] = ids(m.group(2))
    if not gpus:
        raise SystemExit("gen_topology --verify gave no GPU: " + out)
    return xml, gpus


def status_field(path, name):
    with open(path) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return None


def thread_policy(pid, tid):
    """The thread's task memory policy: the policy column of its first file mapping in
    /proc/PID/task/TID/numa_maps (a mapping without an mbind policy shows the task's)."""
    with open(f"/proc/{pid}/task/{tid}/numa_maps") as f:
        for line in f:
            if " file=" in line:
                return line.split(" file=")[0].split(" ", 1)[1]
    return None


def process_threads(pid):
    """[(tid, name, cpus, policy)] for every thread, from the kernel."""
    out = []
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            cpus = ids(status_field(f"/proc/{pid}/task/{tid}/status", "Cpus_allowed_list"))
            name = status_field(f"/proc/{pid}/task/{tid}/status", "Name")
            out.append((int(tid), name, cpus, thread_policy(pid, tid)))
        except (OSError, TypeError):
            pass  # exited meanwhile
    return out


def anon_pages_by_node(pid):
    """Resident pages per node of the process's anonymous mappings (numa_maps)."""
    nodes = {}
    with open(f"/proc/{pid}/numa_maps") as f:
        for line in f:
            if " file=" in line:
                continue
            for tok in line.split():
                m = re.match(r"N(\d+)=(\d+)$", tok)
                if m:
                    nodes[int(m.group(1))] = nodes.get(int(m.group(1)), 0) + int(m.group(2))
    return nodes


def mems_of_cpus(cpus):
    """NUMA nodes holding these CPUs, from sysfs."""
    nodes = set()
    base = "/sys/devices/system/node"
    for d in os.listdir(base):
        if re.match(r"node\d+$", d):
            with open(os.path.join(base, d, "cpulist")) as f:
                if ids(f.read()) & cpus:
                    nodes.add(int(d[4:]))
    return nodes
