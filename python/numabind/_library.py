"""Finds and loads libnumabind.so.0 (the C API of include/numabind/numabind.h) with ctypes.

Order: $NUMABIND_LIBRARY (only it, when set); the path `cmake --install` recorded in
_install_paths.py; next to this file (the build tree's python/numabind/); the build
directories of the source checkout this file lies in (build*/); the system's loader path
(the .deb/.rpm put it in the libdir); PREFIX/lib*/ of the prefix this module is installed in.
"""
import ctypes
import glob
import os
import sys
from typing import Iterator, List, Tuple

SONAME = "libnumabind.so.0"
API_VERSION = 3  # 2: numabind_plan_json, numabind_cuda_index, "error_kind"; 3: smt, omp, ucx, "nics", "omp_kept"
INSTALL_HINT = ("install the numabind package (Debian/Ubuntu: apt install ./numabind_*.deb; RHEL/Fedora: "
                "dnf install numabind), build it (cmake --build build), or set NUMABIND_LIBRARY=/path/to/" + SONAME)


def _recorded() -> List[str]:
    try:
        from . import _install_paths  # written by cmake --install; absent in pip installs
    except ImportError:
        return []
    return [p for p in getattr(_install_paths, "LIBRARIES", []) if p]


def _prefix_dirs(here: str) -> List[str]:
    # .../PREFIX/lib/python3.X/site-packages/numabind -> PREFIX/lib, PREFIX/lib64, PREFIX/lib/<multiarch>
    parts = here.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].startswith(("lib", "lib64")) and i + 1 < len(parts) and parts[i + 1].startswith("python"):
            prefix = os.sep.join(parts[:i]) or os.sep
            multiarch = getattr(sys.implementation, "_multiarch", "")
            dirs = [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
            if multiarch:
                dirs.append(os.path.join(prefix, "lib", multiarch))
            return dirs
    return []


def candidates() -> Iterator[str]:
    env = os.environ.get("NUMABIND_LIBRARY")
    if env:
        yield env
        return
    yield from _recorded()
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, SONAME)
    root = os.path.dirname(os.path.dirname(here))  # python/numabind/ of a source checkout
    yield from sorted(glob.glob(os.path.join(root, "build*", SONAME)))
    yield SONAME  # the loader's path: /usr/lib/<multiarch> from the .deb, the libdir from the RPM
    for d in _prefix_dirs(here) + ["/usr/local/lib", "/usr/local/lib64"]:
        yield os.path.join(d, SONAME)


def load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        if not hasattr(lib, "numabind_api_version") or lib.numabind_api_version() < API_VERSION:
            tried.append(f"{path} (API version < {API_VERSION}: too old)")
            continue
        return lib, path
    raise ImportError(f"numabind: {SONAME} not found; {INSTALL_HINT} (tried: {', '.join(dict.fromkeys(tried))})")


def declare(lib: ctypes.CDLL) -> None:
    """The prototypes of numabind.h."""
    p, s, i, v = ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p
    pv = ctypes.POINTER(ctypes.c_void_p)
    lib.numabind_version.restype = p
    lib.numabind_api_version.restype = i
    lib.numabind_options_new.restype = v
    lib.numabind_options_set.argtypes = [v, p, p, p, s]
    lib.numabind_options_free.argtypes = [v]
    lib.numabind_bind.argtypes = [v, pv, p, s]
    lib.numabind_reapply.argtypes = [pv, p, s]
    lib.numabind_result_json.argtypes = [v]
    lib.numabind_result_json.restype = p
    lib.numabind_result_free.argtypes = [v]
    lib.numabind_plan_json.argtypes = [v, pv, p, s]
    lib.numabind_cuda_index.argtypes = [p, p, ctypes.POINTER(i), p, s]
    lib.numabind_placement_json.argtypes = [p, p, pv, p, s]
    lib.numabind_inspect_json.argtypes = [i, p, p, pv, p, s]
    lib.numabind_free.argtypes = [v]
