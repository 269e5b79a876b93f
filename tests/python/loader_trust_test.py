#!/usr/bin/env python3
"""The Python loader takes a library path only under the SPANK plugin's engine rule (root's or
the caller's own file, closed to group/other writes, in directories likewise): as root,
NUMABIND_LIBRARY naming a file of user nbtest is refused in one line saying what and why, and
its constructor never runs (a marker file). The same directory states are given to the
plugin's engine loader in the slurmstepd stand-in (when built): both must decide alike.
Root only (77)."""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

from nbtest import GEN, check, finish

SO = os.environ["NUMABIND_SO"]
STANDIN, PLUGIN = os.environ.get("NUMABIND_STANDIN", ""), os.environ.get("NUMABIND_PLUGIN", "")
if os.geteuid() != 0:
    print("skip: needs root")
    sys.exit(77)
if os.environ.get("NUMABIND_ASAN_PASS") == "1":  # python3 cannot load the ASan-instrumented library
    print("skip: the ASan pass (run in the normal pass)")
    sys.exit(77)
try:
    pwd.getpwnam("nbtest")
except KeyError:  # tests/slurm/cluster.sh creates it too
    if subprocess.run(["useradd", "-r", "nbtest"], capture_output=True).returncode != 0:
        print("skip: no user nbtest and useradd failed")
        sys.exit(77)
NBTEST = pwd.getpwnam("nbtest").pw_uid
PYPATH = os.environ["PYTHONPATH"]


def import_with(library):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMABIND_")}
    env.update(NUMABIND_LIBRARY=library, PYTHONPATH=PYPATH)
    r = subprocess.run([sys.executable, "-c", "import numabind; print(numabind.library_path)"], capture_output=True,
                       text=True, env=env, timeout=60)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1], r.stdout.strip()


def python_verdict(path):
    """The Python mirror's decision on a file: "" (trusted) or why not."""
    r = subprocess.run([sys.executable, "-c", "import sys; from numabind import _library as l; "
                        "fd, why = l.open_trusted(sys.argv[1]); print(why)", path], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PYPATH, NUMABIND_LIBRARY=SO))
    return r.stdout.strip() if r.returncode == 0 else "error: " + r.stderr


with tempfile.TemporaryDirectory() as work:
    os.chmod(work, 0o755)
    d = os.path.join(work, "lib")
    os.mkdir(d, 0o755)
    lib = os.path.join(d, "libnumabind.so.0")
    shutil.copy(SO, lib)
    os.chmod(lib, 0o755)
    rc, err, out = import_with(lib)
    check("root's library in root's directories: loaded", rc == 0 and out == lib, err)

    os.chown(lib, NBTEST, -1)
    rc, err, _ = import_with(lib)
    check("a library owned by nbtest: refused, one line naming the variable, the file, its owner",
          rc != 0 and err == f"ImportError: numabind: NUMABIND_LIBRARY={lib} refused: {lib} is owned by uid {NBTEST} "
          "(nbtest), not root; not loaded", err)
    os.chown(lib, 0, -1)
    os.chmod(lib, 0o775)
    rc, err, _ = import_with(lib)
    check("a group-writable library: refused", rc != 0 and "is writable by group or others; not loaded" in err, err)
    os.chmod(lib, 0o755)
    os.chown(d, NBTEST, -1)
    rc, err, _ = import_with(lib)
    check("a directory owned by nbtest: refused, naming the directory",
          rc != 0 and f"its directory {d} is owned by uid {NBTEST} (nbtest)" in err, err)
    os.chown(d, 0, -1)

    # The constructor of nbtest's library never runs as root.
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        marker = os.path.join(work, "constructor-ran")
        planted = os.path.join(work, "planted")
        os.mkdir(planted, 0o755)
        c = os.path.join(work, "planted.c")
        with open(c, "w") as f:
            f.write('#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void planted(void) '
                    '{ close(open("%s", O_CREAT | O_WRONLY, 0644)); }\n' % marker)
        so = os.path.join(planted, "libnumabind.so.0")
        subprocess.run([cc, "-shared", "-fPIC", "-o", so, c], check=True)
        os.chown(so, NBTEST, -1)
        rc, err, _ = import_with(so)
        check("nbtest's library: refused and its constructor did not run as root",
              rc != 0 and "refused" in err and not os.path.exists(marker), (err, os.path.exists(marker)))
    else:
        print("note: no C compiler: the constructor case is not run")

    # The same states, judged by the plugin's engine loader (the stand-in) and by the mirror.
    if STANDIN and PLUGIN and os.path.exists(STANDIN):
        xml = os.path.join(work, "topo.xml")
        subprocess.run([sys.executable, GEN, "-o", xml, "--gpu", "machine", "--gpu", "machine"], check=True,
                       capture_output=True)
        pair = os.path.join(work, "pair")
        engine = os.path.join(pair, "numabind_stepd.so")

        def plugin_loads():
            r = subprocess.run([STANDIN, os.path.join(pair, "spank_numabind.so"), "slurm", "--only", "0", "-v", "--",
                                "default=exclusive", "fallback=warn", "mem=bind", "devices=10de", "topology=" + xml],
                               capture_output=True, text=True, timeout=120)
            return "bound 2," in (r.stdout.splitlines() or [""])[0]

        os.mkdir(pair, 0o755)
        shutil.copy(PLUGIN, os.path.join(pair, "spank_numabind.so"))
        shutil.copy(os.path.join(os.path.dirname(PLUGIN), "numabind_stepd.so"), engine)
        os.chmod(os.path.join(pair, "spank_numabind.so"), 0o755)
        os.chmod(engine, 0o755)
        states = [("as installed", lambda: None), ("engine owned by nbtest", lambda: os.chown(engine, NBTEST, -1)),
                  ("engine group-writable", lambda: os.chmod(engine, 0o775)),
                  ("engine world-writable", lambda: os.chmod(engine, 0o757)),
                  ("directory owned by nbtest", lambda: os.chown(pair, NBTEST, -1)),
                  ("directory group-writable", lambda: os.chmod(pair, 0o775)),
                  ("directory world-writable, sticky", lambda: os.chmod(pair, 0o1777)),
                  ("parent world-writable", lambda: os.chmod(work, 0o757))]
        for what, change in states:
            change()
            loads, why = plugin_loads(), python_verdict(engine)
            check(f"{what}: plugin {'loads' if loads else 'refuses'}, the Python loader "
                  f"{'loads' if not why else 'refuses'} ({why or 'trusted'})", loads == (why == ""), why)
            os.chown(engine, 0, -1), os.chown(pair, 0, -1)
            os.chmod(engine, 0o755), os.chmod(pair, 0o755), os.chmod(work, 0o755)
    else:
        print("note: no slurmstepd stand-in built (Slurm headers): the agreement with the plugin is not checked")
finish()
