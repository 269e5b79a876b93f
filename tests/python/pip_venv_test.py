#!/usr/bin/env python3
"""pip installs the module with nothing but pip and the standard library (the in-tree backend
of python/pyproject.toml), offline (PIP_NO_INDEX=1): into a fresh plain venv (no wheel
package: setuptools failed there with 'invalid command bdist_wheel'), with and without build isolation
and -e, and into one with --system-site-packages; the installed module binds (CPUs against
hwloc-calc) and, with no library where it looks, the ImportError names NUMABIND_LIBRARY,
cmake --install and where it looked. The backend's own pyproject reader agrees with tomllib."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from nbtest import check, fake_gpu_topology, finish

SRC = os.environ["NUMABIND_SOURCE"]
SO = os.environ["NUMABIND_SO"]
PY = "/usr/bin/python3"
if subprocess.run([PY, "-c", "import ensurepip, venv"], capture_output=True).returncode != 0:
    print("skip: /usr/bin/python3 has no venv/ensurepip (python3-venv)")
    sys.exit(77)

PROBE = r"""
import json, os, sys
import numabind
r = numabind.bind(local_rank=0, ntasks=int(sys.argv[2]), mode="exclusive", topology=sys.argv[1])
print(json.dumps({"file": numabind.__file__, "cpus": sorted(os.sched_getaffinity(0)), "bound": r["bound"]}))
"""


def run(cmd, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMABIND_", "PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    r.seconds = time.monotonic() - start
    return r


with tempfile.TemporaryDirectory() as work:
    xml, gpus = fake_gpu_topology(work)
    want = sorted(gpus[sorted(gpus)[0]])
    src = os.path.join(work, "python")  # pip builds in the tree it is given: a copy keeps the checkout clean
    shutil.copytree(os.path.join(SRC, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    probe = os.path.join(work, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)

    sys.path.insert(0, os.path.join(src, "build_backend"))
    import numabind_build
    import tomllib
    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        toml = tomllib.load(f)["project"]
    with open(os.path.join(src, "pyproject.toml")) as f:
        check("the backend's reader (Python < 3.11) agrees with tomllib on [project]",
              numabind_build._parse_project_table(f.read()) == toml, toml)

    cases = [("plain venv", [], []), ("plain venv, --no-build-isolation", [], ["--no-build-isolation"]),
             ("plain venv, -e", [], ["-e"]), ("--system-site-packages venv", ["--system-site-packages"], [])]
    for i, (what, venv_args, pip_args) in enumerate(cases):
        venv = os.path.join(work, f"venv{i}")
        r = run([PY, "-m", "venv"] + venv_args + [venv])
        check(f"{what}: python3 -m venv", r.returncode == 0, r.stderr)
        vpy = os.path.join(venv, "bin", "python")
        if not venv_args:
            r = run([vpy, "-c", "import wheel"])
            check(f"{what}: the venv has no wheel (setuptools could not build one: bdist_wheel)", r.returncode != 0,
                  r.stdout)
        r = run([vpy, "-m", "pip", "install"] + pip_args + [src])
        check(f"{what}: pip install {' '.join(pip_args + ['./python'])} offline (PIP_NO_INDEX=1), "
              f"{r.seconds:.1f} s", r.returncode == 0 and r.seconds < 60, r.stdout[-1500:] + r.stderr[-1500:])
        r = run([vpy, probe, xml, str(len(gpus))], NUMABIND_LIBRARY=SO)
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        check(f"{what}: the installed module binds to the GPU's CPUs {want} (hwloc-calc)",
              out.get("bound") and out.get("cpus") == want, r.stdout + r.stderr)
        where = src if "-e" in pip_args else venv
        check(f"{what}: the module imported is the one installed ({'the source tree' if '-e' in pip_args else 'the venv'})",
              str(out.get("file", "")).startswith(where), out)
        if i == 0:
            r = run([vpy, "-c", "import numabind"])
            err = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            site = os.path.dirname(os.path.dirname(out.get("file", "x/x")))
            if r.returncode == 0:
                print("note: the system's loader finds an installed libnumabind.so.0; the import-error case is not run")
            else:
                check("no library where a pip install looks: one line naming NUMABIND_LIBRARY, cmake --install and "
                      "where it looked (the venv's site-packages)",
                      err.startswith("ImportError: numabind: libnumabind.so.0 not found") and "NUMABIND_LIBRARY=" in err
                      and "cmake --install" in err and "looked in: " + os.path.join(site, "numabind") in err, r.stderr)
finish()
