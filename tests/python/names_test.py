#!/usr/bin/env python3
"""Names spelled once in C++ and copied where another language needs them: the version
(project() in CMakeLists.txt; pip needs python/pyproject.toml static, the RPM spec and the
man pages carry it too) and the NUMABIND_* variables (kExportedVariables in
src/core/binding_env.hpp; the Python module keeps its own _ENV_VARIABLES). Each copy must
equal the original; the built command and library must report the project's version.
The module's list is read from its source (ast), so that only numabind.version() loads the
library (not under tests/asan.sh, whose instrumented library an uninstrumented python3 refuses)."""
import ast
import os
import re
import subprocess

from nbtest import BIN, check, finish

SRC = os.environ["NUMABIND_SOURCE"]
VERSION = os.environ["NUMABIND_PROJECT_VERSION"]


def read(relative):
    with open(os.path.join(SRC, relative)) as f:
        return f.read()


# ---- the version ----
m = re.search(r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"', read("python/pyproject.toml"), re.M | re.S)
check(f"python/pyproject.toml's version is the project's ({VERSION})", m and m.group(1) == VERSION,
      m.group(1) if m else "no version in [project]")
m = re.search(r"^Version:\s*(\S+)", read("packaging/rpm/numabind.spec"), re.M)
check(f"packaging/rpm/numabind.spec's Version is the project's ({VERSION})", m and m.group(1) == VERSION,
      m.group(1) if m else "no Version:")
for page in ("man/numabind.1", "man/spank_numabind.8"):
    m = re.search(r'^\.TH .*"numabind ([^"]+)"', read(page), re.M)
    check(f"{page}'s .TH names the project's version", m and m.group(1) == VERSION, m.group(1) if m else "no .TH")
r = subprocess.run([BIN, "--version"], capture_output=True, text=True)
check(f"numabind --version says 'numabind {VERSION}'", r.returncode == 0 and r.stdout.strip() == "numabind " + VERSION,
      r.stdout + r.stderr)
if os.environ.get("NUMABIND_ASAN_PASS") != "1":
    import numabind
    check(f"numabind.version() (numabind_version()) is {VERSION}", numabind.version() == VERSION, numabind.version())

# ---- the NUMABIND_* variables ----
header = read("src/core/binding_env.hpp")
constants = dict(re.findall(r'inline constexpr const char\* (k\w+) = "(\w+)";', header))
m = re.search(r"kExportedVariables\[\] = \{([^}]*)\}", header)
listed = [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []
cpp = tuple(constants.get(n, "?" + n) for n in listed)
check("src/core/binding_env.hpp lists kExportedVariables, each a named constant",
      cpp and all(not v.startswith("?") for v in cpp), cpp)
python = None
for node in ast.parse(read("python/numabind/__init__.py")).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_ENV_VARIABLES" for t in node.targets):
        python = ast.literal_eval(node.value)
check("the Python module's _ENV_VARIABLES are kExportedVariables, in order", python == cpp,
      f"python {python}, C++ {cpp}")
finish()
