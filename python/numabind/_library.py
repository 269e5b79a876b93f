"""Finds and loads libnumabind.so.0 (the C API of include/numabind/numabind.h) with ctypes.

Order: $NUMABIND_LIBRARY (only it, when set); the path `cmake --install` recorded in
_install_paths.py; next to this file (the build tree's python/numabind/); the build
directories of the source checkout this file lies in (build*/); the system's loader path
(the .deb/.rpm put it in the libdir); PREFIX/lib*/ of the prefix this module is installed in.

A file named by path is loaded only under the SPANK plugin's engine rule
(spank/front/engine_loader.cpp): a regular file owned by root or by this process's user,
closed to group/other writes, in directories up to / that are likewise owned and closed
(sticky ones allowed), checked on the descriptor that is then loaded. So a root process
never runs another user's library constructor (tests/python/loader_trust_test.py checks
that this mirror and the plugin decide alike).
"""
import ctypes
import glob
import os
import stat
import sys
from typing import Iterator, List, Optional, Tuple

SONAME = "libnumabind.so.0"
# 2: numabind_plan_json, numabind_cuda_index, "error_kind"; 3: smt, omp, ucx, "nics", "omp_kept";
# 4: threads, "device_rule", "omp_notice", torchrun's device rule
API_VERSION = 4
# A pip install does not see a build tree: the library must be installed or named.
INSTALL_HINT = ("install the numabind package (Debian/Ubuntu: apt install ./numabind_*.deb; RHEL/Fedora: "
                "dnf install numabind), or install your build (cmake --install build, or --prefix PREFIX), "
                "or set NUMABIND_LIBRARY=/path/to/build/" + SONAME)


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


# ---- the engine loader's trust rule (spank/front/engine_loader.cpp), mirrored ----

def _trusted_owner(st: os.stat_result) -> bool:
    # root's, or this process's own user's (who gains nothing by loading their own file)
    return st.st_uid == 0 or st.st_uid == os.geteuid()


def _trusted_directory(st: os.stat_result) -> bool:
    # nobody else may change what it lists: closed to group/other writes, or sticky (/tmp)
    return (stat.S_ISDIR(st.st_mode) and _trusted_owner(st) and
            (not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or bool(st.st_mode & stat.S_ISVTX)))


def _owner(uid: int) -> str:
    try:
        import pwd
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def open_trusted(path: str) -> Tuple[Optional[int], str]:
    """(descriptor, "") of the library's real file when the rule holds, else (None, why not)."""
    real = os.path.realpath(path)
    directory, name = os.path.split(real)
    flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open("/", flags)
    at = "/"
    try:
        for part in [p for p in directory.split("/") if p] + [None]:
            st = os.fstat(fd)
            if not _trusted_directory(st):
                why = (f"is owned by {_owner(st.st_uid)}" if stat.S_ISDIR(st.st_mode) and not _trusted_owner(st)
                       else "is writable by group or others")
                return None, (f"its directory {at} {why}; not loaded (every directory up to / must be root's "
                              "and closed to others' writes)")
            if part is None:
                break
            nxt = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
            at = os.path.join(at, part)
        try:
            lib_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError as e:
            return None, f"cannot open {real}: {e.strerror}"
    except OSError as e:
        return None, f"cannot open its directory {at}: {e.strerror}"
    finally:
        os.close(fd)
    st = os.fstat(lib_fd)
    why = ""
    if not stat.S_ISREG(st.st_mode):
        why = f"{real} is not a regular file"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = f"{real} is writable by group or others; not loaded"
    elif not _trusted_owner(st):
        why = f"{real} is owned by {_owner(st.st_uid)}, not root" + ("" if os.geteuid() == 0 else " or you") + \
              "; not loaded"
    if why:
        os.close(lib_fd)
        return None, why
    return lib_fd, ""


def _open(path: str) -> ctypes.CDLL:
    """A path is loaded through the descriptor the rule checked; a bare soname by the loader."""
    if os.sep not in path:
        return ctypes.CDLL(path)
    fd, why = open_trusted(path)
    if fd is None:
        raise PermissionError(why)
    try:
        return ctypes.CDLL(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    env = os.environ.get("NUMABIND_LIBRARY")
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (no such file)")
            continue
        try:
            lib = _open(path)
        except PermissionError as e:
            if env:
                raise ImportError(f"numabind: NUMABIND_LIBRARY={env} refused: {e}") from None
            tried.append(f"{path} (refused: {e})")
            continue
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        if not hasattr(lib, "numabind_api_version") or lib.numabind_api_version() < API_VERSION:
            tried.append(f"{path} (API version < {API_VERSION}: too old)")
            continue
        return lib, os.path.realpath(path) if os.sep in path else path
    raise ImportError(f"numabind: {SONAME} not found; {INSTALL_HINT} (looked in: {'; '.join(dict.fromkeys(tried))})")


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
