"""numabind — bind this process (every thread of it) to the CPUs and memory local to its
accelerator(s), from inside the program; a ctypes binding of libnumabind.so.0 (numabind.h).

    import numabind
    numabind.bind(local_rank=rank, ntasks=world)     # in each torch.multiprocessing.spawn worker
    loader = DataLoader(..., worker_init_fn=numabind.worker_init_fn)
    numabind.placement()                             # what `numabind show --json` shows

bind() plans the node exactly as `numabind run` does (same rank sources, device ownership,
device_match and topology), sets the CPU affinity of every thread of the process, the memory
policy of every thread (each thread sets its own, asked by a signal; see the README), the
NUMABIND_* variables (os.environ too), and with migrate=True moves the pages already resident
to the home node(s). Errors raise numabind.Error (numabind.UsageError for bad values) with the
command's one-line messages; fallback="warn" warns and runs unbound like `--fallback warn`.

The library is found through $NUMABIND_LIBRARY, next to this file, the build tree
(build*/ of the source checkout this file is in), then the system's loader path.
"""

import ctypes
import glob
import json
import os
import sys

__all__ = ["Error", "UsageError", "bind", "placement", "inspect", "worker_init_fn", "reapply", "version",
           "library_path"]

_SONAME = "libnumabind.so.0"
_OK, _ERROR, _USAGE, _NOMEM = 0, 1, 2, 3


class Error(Exception):
    """Binding is not possible or failed; the message is the command's one line."""


class UsageError(Error, ValueError):
    """A bad argument value (mode, mem, local_rank, ...); the message names the valid choices."""


def _candidates():
    env = os.environ.get("NUMABIND_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, _SONAME)
    # python/numabind/__init__.py of a source checkout: its build directories.
    root = os.path.dirname(os.path.dirname(here))
    for path in sorted(glob.glob(os.path.join(root, "build*", _SONAME))):
        yield path
    yield _SONAME


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: not found")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(str(e))
    raise ImportError("numabind: cannot load " + _SONAME + " (set NUMABIND_LIBRARY): " + "; ".join(errors))


_lib, library_path = _load()
_c_char_p, _size_t, _int = ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int
_lib.numabind_version.restype = _c_char_p
_lib.numabind_api_version.restype = _int
_lib.numabind_options_new.restype = ctypes.c_void_p
_lib.numabind_options_set.argtypes = [ctypes.c_void_p, _c_char_p, _c_char_p, ctypes.c_char_p, _size_t]
_lib.numabind_options_free.argtypes = [ctypes.c_void_p]
_lib.numabind_bind.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, _size_t]
_lib.numabind_reapply.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, _size_t]
_lib.numabind_result_json.argtypes = [ctypes.c_void_p]
_lib.numabind_result_json.restype = _c_char_p
_lib.numabind_result_free.argtypes = [ctypes.c_void_p]
_lib.numabind_placement_json.argtypes = [_c_char_p, _c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                         _size_t]
_lib.numabind_inspect_json.argtypes = [_int, _c_char_p, _c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.c_char_p, _size_t]
_lib.numabind_free.argtypes = [ctypes.c_void_p]

if _lib.numabind_api_version() < 1:
    raise ImportError(f"numabind: {library_path} implements API version {_lib.numabind_api_version()}, need 1")


def version():
    """The library's version, e.g. "0.1.0"."""
    return _lib.numabind_version().decode()


def _raise(status, buf):
    msg = buf.value.decode(errors="replace")
    if status == _USAGE:
        raise UsageError(msg)
    if status == _NOMEM:
        raise MemoryError(msg)
    raise Error(msg)


def _text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _take_result(ptr):
    try:
        return json.loads(_lib.numabind_result_json(ptr).decode())
    finally:
        _lib.numabind_result_free(ptr)


def _sync_environ(env):
    # The library setenv()s in C; os.environ is Python's own copy (what subprocess and
    # multiprocessing children get), so update it too.
    for k, v in (env or {}).items():
        os.environ[k] = v


def _warn(line):
    sys.stderr.write("numabind: warning: " + line + "\n")
    sys.stderr.flush()


def bind(local_rank=None, ntasks=None, mode="node", mem="prefer", devices=None, device_match=None, topology=None,
         migrate=False, fallback="fail", allowed_cpus=None, rank_source="auto"):
    """Binds every thread of this process to its task's share of the node, as `numabind run`
    would plan it. Returns a dict: bound, mode, local_rank, cpus, mems, mem_policy, device,
    devices, threads, threads_mem_policy, pages_moved (with migrate=True), warnings, env.
    Raises UsageError for bad values, Error when binding fails (unless fallback="warn")."""
    opts = _lib.numabind_options_new()
    if not opts:
        raise MemoryError("numabind: out of memory")
    err = ctypes.create_string_buffer(1024)
    try:
        values = {"mode": mode, "mem": mem, "local_rank": local_rank, "ntasks": ntasks, "devices": devices,
                  "device_match": device_match, "topology": topology, "migrate": bool(migrate),
                  "fallback": fallback, "allowed_cpus": allowed_cpus, "rank_source": rank_source}
        for key, value in values.items():
            if value is None:
                continue
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            st = _lib.numabind_options_set(opts, key.encode(), _text(value).encode(), err, len(err))
            if st != _OK:
                _raise(st, err)
        res = ctypes.c_void_p()
        st = _lib.numabind_bind(opts, ctypes.byref(res), err, len(err))
        if st != _OK:
            _raise(st, err)
        out = _take_result(res)
    finally:
        _lib.numabind_options_free(opts)
    _sync_environ(out.get("env"))
    for w in out.get("warnings", []):
        _warn(w)
    if not out.get("bound") and out.get("error"):
        _warn(out["error"] + "; running unbound (fallback=\"warn\")")
    return out


def reapply():
    """Checks every thread against the binding in NUMABIND_* and re-applies it where it was
    lost. Returns a dict: checked, lost (one line per thread that had lost it), reapplied."""
    err = ctypes.create_string_buffer(1024)
    res = ctypes.c_void_p()
    st = _lib.numabind_reapply(ctypes.byref(res), err, len(err))
    if st != _OK:
        _raise(st, err)
    out = _take_result(res)
    for w in out.get("warnings", []):
        _warn(w)
    return out


def worker_init_fn(worker_id):
    """For torch.utils.data.DataLoader(worker_init_fn=...): a forked worker inherits the
    binding of the thread that forked it; this checks every thread of the worker against
    NUMABIND_* and re-applies the binding where it was lost (worker_id is unused)."""
    return reapply()


def _json_call(fn, *args):
    err = ctypes.create_string_buffer(1024)
    out = ctypes.c_void_p()
    st = fn(*args, ctypes.byref(out), err, len(err))
    if st != _OK:
        _raise(st, err)
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        _lib.numabind_free(out)


def _opt(value):
    return None if value is None else os.fspath(value).encode()


def placement(topology=None, device_match=None):
    """This process's placement, as `numabind show --json` prints it: pid, cpus, cpu_numa_nodes,
    mem_policy, mem_nodes (the calling thread's), device, warnings."""
    return _json_call(_lib.numabind_placement_json, _opt(topology), _opt(device_match))


def inspect(pid, topology=None, device_match=None):
    """A running process, as `numabind show --pid PID --json` prints it (threads, memory,
    devices, mismatches). Only the process's owner or root may look."""
    return _json_call(_lib.numabind_inspect_json, int(pid), _opt(topology), _opt(device_match))
