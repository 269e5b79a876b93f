#!/usr/bin/env python3
"""Installing the Python module, offline, with Debian's python3-setuptools:
pip install --no-build-isolation from the source tree into a venv (--system-site-packages, so
Debian's torch is visible), with --target and with --user; the installed module binds with
torch imported and `python -m numabind` runs; a missing library is one line saying what to
install; `cmake --install` puts the module where /usr/bin/python3 imports from for the
prefixes /usr and /usr/local (checked against that interpreter's own sys.path) and records
the library's path. Expected CPUs from hwloc-calc (gen_topology --verify)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from nbtest import check, fake_gpu_topology, finish

SRC = os.environ["NUMABIND_SOURCE"]
SO = os.environ["NUMABIND_SO"]
BUILD = os.path.dirname(SO)
PY = "/usr/bin/python3"
BINDING_VARS = ("NUMABIND_MODE", "NUMABIND_CPUS", "NUMABIND_MEMS", "NUMABIND_MEM_POLICY", "NUMABIND_DEVICE",
                "NUMABIND_DEVICES", "NUMABIND_DEVICE_PCI", "NUMABIND_LIBRARY", "PYTHONPATH", "PYTHONUSERBASE",
                "OMP_NUM_THREADS", "LOCAL_RANK", "SLURM_LOCALID")


def env_with(**extra):
    env = {k: v for k, v in os.environ.items() if k not in BINDING_VARS}
    env.update(extra)
    return env


def run(cmd, **extra):
    return subprocess.run(cmd, capture_output=True, text=True, env=env_with(**extra), timeout=240)


def have(module):
    return subprocess.run([PY, "-c", "import " + module], capture_output=True).returncode == 0


if not have("pip") or not have("venv") or not have("setuptools"):
    print("skip: /usr/bin/python3 lacks pip, venv or setuptools (.ci/install-deps.sh installs python3-pip, "
          "python3-venv, python3-setuptools)")
    sys.exit(77)

# What the installed module runs: bind with torch imported (when there), report what it did.
PROBE = r"""
import json, os, sys
try:
    import torch
    torch.set_num_threads(2)
except ImportError:
    torch = None
import numabind
xml = sys.argv[1]
r = numabind.bind(local_rank=0, ntasks=int(sys.argv[2]), mode="exclusive", topology=xml)
print(json.dumps({"file": numabind.__file__, "library": numabind.library_path, "cpus": sorted(os.sched_getaffinity(0)),
                  "bound": r["bound"], "torch_threads": torch.get_num_threads() if torch else None,
                  "typed": os.path.exists(os.path.join(os.path.dirname(numabind.__file__), "py.typed"))}))
"""

with tempfile.TemporaryDirectory() as work:
    xml, gpus = fake_gpu_topology(work)
    want = sorted(gpus[sorted(gpus)[0]])
    ntasks = len(gpus)
    # pip builds in the tree it is given: a copy keeps the checkout clean.
    src = os.path.join(work, "python")
    shutil.copytree(os.path.join(SRC, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    probe = os.path.join(work, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)

    def probe_ok(what, python, **extra):
        r = run([python, probe, xml, str(ntasks)], **extra)
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        check(f"{what}: the installed module binds to the GPU's CPUs {want} (hwloc-calc)",
              out.get("bound") and out.get("cpus") == want, r.stdout + r.stderr)
        check(f"{what}: py.typed installed", out.get("typed"), out)
        if out.get("torch_threads") is not None:
            check(f"{what}: torch imported, its pool sized to the binding", out["torch_threads"] == len(want), out)
        return out

    # 1. A venv that sees Debian's torch.
    venv = os.path.join(work, "venv")
    r = run([PY, "-m", "venv", "--system-site-packages", venv])
    check("python3 -m venv --system-site-packages", r.returncode == 0, r.stderr)
    vpy = os.path.join(venv, "bin", "python")
    r = run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", src])
    check("pip install --no-build-isolation --no-index ./python into the venv (offline)", r.returncode == 0,
          r.stdout[-2000:] + r.stderr[-2000:])
    out = probe_ok("venv", vpy, NUMABIND_LIBRARY=SO)
    check("venv: the module imported is the venv's", str(out.get("file", "")).startswith(venv), out)
    r = run([vpy, "-m", "numabind", "plan", "--topology", xml, "--ntasks", str(ntasks), "--mode", "exclusive", "--json"],
            NUMABIND_LIBRARY=SO)
    plan = json.loads(r.stdout) if r.returncode == 0 else {}
    check("venv: python -m numabind plan --json", r.returncode == 0 and
          sorted(plan["tasks"][0]["cpus"]) == sorted(gpus[sorted(gpus)[0]]), r.stdout + r.stderr)
    r = run([vpy, "-m", "numabind", "show"], NUMABIND_LIBRARY=SO)
    check("venv: python -m numabind show", r.returncode == 0 and "cpus:" in r.stdout, r.stdout + r.stderr)
    bad = os.path.join(work, "nowhere", "libnumabind.so.0")
    r = run([vpy, "-c", "import numabind"], NUMABIND_LIBRARY=bad)
    err = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check("no library: ImportError, one line saying what to install and what was tried",
          r.returncode != 0 and err.startswith("ImportError: numabind: libnumabind.so.0 not found")
          and "install the numabind package" in err and bad in err, r.stderr)

    # 2. --target DIR and 3. --user (PEP 668: Debian's python3 wants --break-system-packages for it).
    target = os.path.join(work, "target")
    r = run([PY, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--target", target, src])
    check("pip install --target DIR", r.returncode == 0, r.stderr[-2000:])
    probe_ok("--target", PY, PYTHONPATH=target, NUMABIND_LIBRARY=SO)
    userbase = os.path.join(work, "userbase")
    r = run([PY, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--user", "--break-system-packages",
             src], PYTHONUSERBASE=userbase)
    check("pip install --user --break-system-packages (PYTHONUSERBASE)", r.returncode == 0, r.stderr[-2000:])
    probe_ok("--user", PY, PYTHONUSERBASE=userbase, NUMABIND_LIBRARY=SO)

    # 4. cmake --install: where the interpreter looks, for /usr and /usr/local.
    sys_path = json.loads(run([PY, "-c", "import sys, json; print(json.dumps(sys.path))"]).stdout)
    for prefix in ("/usr", "/usr/local"):
        stage = os.path.join(work, "stage" + prefix.replace("/", "-"))
        r = run(["cmake", "--install", BUILD, "--prefix", prefix, "--component", "runtime"], DESTDIR=stage)
        check(f"cmake --install --prefix {prefix} --component runtime (DESTDIR)", r.returncode == 0, r.stdout + r.stderr)
        found = [d for d in sys_path if d and os.path.isfile(os.path.join(stage + d, "numabind", "__init__.py"))]
        check(f"prefix {prefix}: the module lands in a directory /usr/bin/python3 imports from", len(found) == 1,
              (found, r.stdout[-1500:]))
        if prefix == "/usr":
            check("prefix /usr: Debian's /usr/lib/python3/dist-packages", found == ["/usr/lib/python3/dist-packages"],
                  found)
        if not found:
            continue
        moddir = os.path.join(stage + found[0], "numabind")
        recorded = {}
        exec(open(os.path.join(moddir, "_install_paths.py")).read(), recorded)
        libs = [os.path.join(dp, f) for dp, _, fs in os.walk(stage) for f in fs if f == "libnumabind.so.0"]
        check(f"prefix {prefix}: _install_paths.py records the installed library's path",
              [stage + p for p in recorded.get("LIBRARIES", [])] == libs, (recorded.get("LIBRARIES"), libs))
        if prefix == "/usr/local":
            probe_ok("cmake --install", PY, PYTHONPATH=stage + found[0], NUMABIND_LIBRARY=libs[0] if libs else "")
    r = run(["cmake", "--install", BUILD, "--prefix", "/opt/nb", "--component", "runtime"],
            DESTDIR=os.path.join(work, "stage-opt"))
    check("a prefix python3 does not search (/opt/nb): the install says which PYTHONPATH to set",
          r.returncode == 0 and "export PYTHONPATH=/opt/nb/" in r.stdout, r.stdout[-1500:])
finish()
