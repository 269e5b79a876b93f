"""The build backend of the numabind Python module (PEP 517, PEP 660), standard library only.

The module is three pure-Python files, so pip needs nothing to build it: no setuptools, no
wheel, no index (`requires = []` in pyproject.toml). Works in a plain venv, offline, with or
without build isolation. Metadata comes from pyproject.toml's [project] table.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PACKAGE = "numabind"
PACKAGE_FILES = ("__init__.py", "__main__.py", "_library.py", "py.typed")
TAG = "py3-none-any"
# Reproducible archives: a fixed timestamp unless SOURCE_DATE_EPOCH says otherwise.
_EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))


# ---- pyproject.toml ----

def _parse_project_table(text):
    """[project] of pyproject.toml: the string, string-list and inline {text = ...} values this
    file uses. Python < 3.11 has no tomllib; tests check this agrees with tomllib."""
    project, current, pending = {}, None, None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.strip().startswith("#") else ""
        if pending is not None:
            key, items = pending
            items.extend(re.findall(r'"((?:[^"\\]|\\.)*)"', line))
            if line.endswith("]"):
                project[key] = items
                pending = None
            continue
        if not line:
            continue
        if line.startswith("["):
            current = line.strip("[] ")
            continue
        if current != "project" or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if value.startswith("["):
            items = re.findall(r'"((?:[^"\\]|\\.)*)"', value)
            if value.endswith("]"):
                project[key] = items
            else:
                pending = (key, items)
        elif value.startswith("{"):
            project[key] = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', value))
        elif value.startswith('"'):
            project[key] = value[1:-1]
    return project


def project_metadata(root=HERE):
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib
    except ImportError:
        return _parse_project_table(text)
    return tomllib.loads(text)["project"]


def _metadata_text(root=HERE):
    p = project_metadata(root)
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if isinstance(p.get("license"), dict) and p["license"].get("text"):
        lines.append(f"License: {p['license']['text']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    body = ""
    if p.get("readme"):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(root, p["readme"]), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _names(root=HERE):
    p = project_metadata(root)
    return p["name"], p["version"]


# ---- wheels ----

def _dist_info(root=HERE):
    name, version = _names(root)
    return f"{name}-{version}.dist-info"


def _wheel_text():
    return f"Wheel-Version: 1.0\nGenerator: numabind_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(directory, files):
    """files: [(archive path, bytes)]; adds the dist-info files and RECORD."""
    name, version = _names()
    dist_info = _dist_info()
    files = list(files) + [(f"{dist_info}/METADATA", _metadata_text().encode()),
                           (f"{dist_info}/WHEEL", _wheel_text().encode()),
                           (f"{dist_info}/top_level.txt", (PACKAGE + "\n").encode())]
    record = [_record_line(p, d) for p, d in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    wheel_name = f"{name}-{version}-{TAG}.whl"
    stamp = time.gmtime(max(_EPOCH, 315532800))[:6]
    with zipfile.ZipFile(os.path.join(directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


def _package_files():
    out = []
    for f in PACKAGE_FILES:
        with open(os.path.join(HERE, PACKAGE, f), "rb") as fh:
            out.append((f"{PACKAGE}/{f}", fh.read()))
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = _dist_info()
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    for name, text in (("METADATA", _metadata_text()), ("WHEEL", _wheel_text())):
        with open(os.path.join(metadata_directory, dist_info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # pip install -e: a .pth puts this source tree's python/ on sys.path, so the module found
    # is the checkout's (which also finds the checkout's build*/ library).
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version = _names()
    base = f"{name}-{version}"
    members = [("pyproject.toml", None), ("README.md", None), ("build_backend/numabind_build.py", None)]
    members += [(f"{PACKAGE}/{f}", None) for f in PACKAGE_FILES]
    out = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, out), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        def add(path, data):
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size, info.mtime, info.mode = len(data), _EPOCH, 0o644
            tar.addfile(info, io.BytesIO(data))
        for path, _ in members:
            with open(os.path.join(HERE, path), "rb") as f:
                add(path, f.read())
        add("PKG-INFO", _metadata_text().encode())
    return out
