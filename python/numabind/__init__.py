"""numabind: bind this process (every thread of it) to the CPUs and memory local to its
accelerator(s), from inside the program; a ctypes binding of libnumabind.so.0 (numabind.h).

    import numabind
    numabind.bind(local_rank=rank, ntasks=world)     # in each torch.multiprocessing.spawn worker
    loader = DataLoader(..., num_workers=numabind.cpu_count() - 1,
                        worker_init_fn=numabind.worker_init_fn)
    torch.cuda.set_device(numabind.cuda_index())
    numabind.plan(topology="dgx.xml", ntasks=8, mode="exclusive")   # a preview, nothing applied

bind() plans the node exactly as `numabind run` does (same rank sources, device ownership,
device_match and topology), sets the CPU affinity and memory policy of every thread of the
process, the NUMABIND_* variables (os.environ too), OMP_NUM_THREADS for children (unless
set) and shrinks torch's intra-op pool to the bound CPUs (thread_pools=False: neither).
With migrate=True it moves the pages already resident to the home node(s).

Errors raise numabind.Error (numabind.UsageError for bad values, TypeError for bad types).
A machine without an accelerator is not an error: bind() warns once (NumabindWarning) and
returns {"bound": False, ...}; other failures follow fallback ("fail" raises, "warn" warns
and runs unbound). Details go to the logger "numabind". See docs/PYTHON.md.
"""
import ctypes
import enum
import json
import logging
import multiprocessing
import os
import re
import sys
import warnings
from typing import Any, Dict, Iterable, Optional, Sequence, Union

from . import _library

__all__ = ["Error", "UsageError", "NumabindWarning", "bind", "plan", "placement", "inspect", "worker_init_fn",
           "reapply", "cpu_count", "cuda_index", "version", "library_path", "MODES", "MEM_POLICIES"]

MODES = ("none", "node", "socket", "exclusive", "core-complex")
MEM_POLICIES = ("prefer", "bind", "interleave", "none")
_OK, _ERROR, _USAGE, _NOMEM = 0, 1, 2, 3
_PLAN_MARKER = "numabind-plan:"  # the memfd name a bound process maps (process_binding.cpp)
# The variables the library exports into a bound process: kExportedVariables of
# src/core/binding_env.hpp, in its order (tests/python/names_test.py checks they agree).
_ENV_VARIABLES = ("NUMABIND_MODE", "NUMABIND_CPUS", "NUMABIND_MEMS", "NUMABIND_MEM_POLICY", "NUMABIND_DEVICE",
                  "NUMABIND_DEVICES", "NUMABIND_DEVICE_PCI", "NUMABIND_NICS", "NUMABIND_UCX_NET_DEVICES")
_ENV_MODE, _ENV_CPUS = _ENV_VARIABLES[:2]

logger = logging.getLogger("numabind")
_lib, library_path = _library.load()
_library.declare(_lib)

PathLike = Union[str, "os.PathLike[str]"]
Mode = Union[str, enum.Enum]
IntList = Union[int, str, Iterable[int]]


class Error(Exception):
    """Binding is not possible or failed; the message is one line."""


class UsageError(Error, ValueError):
    """A bad argument value (mode, mem, local_rank, ...); the message names the valid choices."""


class NumabindWarning(UserWarning):
    """The process runs unbound, or its binding needs attention."""


# ---- argument checks: Python spelling, strict types ----

# The engine's messages name the command's options; Python callers pass parameters.
_CLI_FLAGS = {"--local-rank": "local_rank", "--ntasks": "ntasks", "--device-match": "device_match",
              "--devices": "devices", "--topology": "topology", "--mode": "mode", "--mem": "mem",
              "--fallback": "fallback", "--allowed-cpus": "allowed_cpus", "--rank-source": "rank_source",
              "--migrate": "migrate", "--smt": "smt", "--threads": "threads"}
_CLI_FLAG_RE = re.compile("(" + "|".join(sorted(map(re.escape, _CLI_FLAGS), key=len, reverse=True)) +
                          r")(?![\w-])( [A-Z]+\b)?")


def _python_spelling(message: str) -> str:
    """"pass --local-rank N" -> "pass local_rank=N", "--device-match" -> "device_match"."""
    return _CLI_FLAG_RE.sub(lambda m: _CLI_FLAGS[m.group(1)] + ("=" + m.group(2)[1:] if m.group(2) else ""), message)


def _raise(status: int, buf: Any) -> None:
    msg = _python_spelling(buf.value.decode(errors="replace"))
    if status == _USAGE:
        raise UsageError(msg)
    if status == _NOMEM:
        raise MemoryError(msg)
    raise Error(msg)


def _type_error(name: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"numabind: {name} must be {expected}, not {type(value).__name__} ({value!r})")


def _int(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, "an int", value)
    if value < 0:
        raise UsageError(f"invalid {name} {value} (must be 0 or more)")
    return str(value)


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """A string, or an enum whose value or name is one (torch.numa.binding.AffinityMode)."""
    text = value
    if name == "mode" and hasattr(value, "affinity_mode"):  # torch.numa.binding.NumaOptions
        return _choice(name, value.affinity_mode, choices)
    if isinstance(value, enum.Enum):
        text = value.value if isinstance(value.value, str) else value.name.lower().replace("_", "-")
    elif not isinstance(value, str):
        raise _type_error(name, "a string or an enum of " + ", ".join(choices), value)
    if text not in choices:
        raise UsageError(f"invalid {name} {text!r} (valid: {', '.join(choices)})")
    return text


def _int_list(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise _type_error(name, "an int, a list of ints or a string like '0,2'", value)
    if isinstance(value, int):
        return str(value)
    try:
        items = list(value)
    except TypeError:
        raise _type_error(name, "an int, a list of ints or a string like '0,2'", value) from None
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _type_error(name + " items", "ints", v)
    if isinstance(value, (set, frozenset)):
        items.sort()  # os.sched_getaffinity() gives a set
    return ",".join(str(v) for v in items)


def _str(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise _type_error(name, "a string", value)
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _type_error(name, "True or False", value)
    return value


def _smt(value: Any) -> str:
    """smt=1 (one hardware thread per core) or "all" (every sibling, the default)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _type_error("smt", "1 or 'all'", value)
    if value in (1, "1", "all"):
        return str(value)
    raise UsageError(f"invalid smt {value!r} (valid: 1, 'all')")


def _options(local_rank: Any, ntasks: Any, mode: Any, mem: Any, devices: Any, device_match: Any, topology: Any,
             allowed_cpus: Any, rank_source: Any, within_affinity: Any) -> Dict[str, Optional[str]]:
    """The C options from Python arguments, every type and choice checked first."""
    if _bool("within_affinity", within_affinity) and allowed_cpus is None:
        allowed_cpus = sorted(os.sched_getaffinity(0))  # stay inside taskset/the launcher's pinning
    return {"mode": _choice("mode", mode, MODES), "mem": _choice("mem", mem, MEM_POLICIES),
            "local_rank": _int("local_rank", local_rank), "ntasks": _int("ntasks", ntasks),
            "devices": _int_list("devices", devices), "device_match": _str("device_match", device_match),
            "topology": _str("topology", topology), "allowed_cpus": _int_list("allowed_cpus", allowed_cpus),
            "rank_source": _choice("rank_source", rank_source, ("auto", "env"))}


class _COptions:
    def __init__(self, values: Dict[str, Optional[str]]) -> None:
        self.ptr = _lib.numabind_options_new()
        if not self.ptr:
            raise MemoryError("numabind: out of memory")
        self.err = ctypes.create_string_buffer(1024)
        try:
            for key, value in values.items():
                if value is not None:
                    st = _lib.numabind_options_set(self.ptr, key.encode(), value.encode(), self.err, len(self.err))
                    if st != _OK:
                        _raise(st, self.err)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.ptr:
            _lib.numabind_options_free(self.ptr)
            self.ptr = None

    def __enter__(self) -> "_COptions":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _take_result(ptr: Any) -> Dict[str, Any]:
    try:
        return json.loads(_lib.numabind_result_json(ptr).decode())
    finally:
        _lib.numabind_result_free(ptr)


def _json_call(fn: Any, *args: Any) -> Dict[str, Any]:
    err = ctypes.create_string_buffer(1024)
    out = ctypes.c_void_p()
    st = fn(*args, ctypes.byref(out), err, len(err))
    if st != _OK:
        _raise(st, err)
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        _lib.numabind_free(out)


def _warn(line: str, stacklevel: int = 3) -> None:
    warnings.warn("numabind: " + line, NumabindWarning, stacklevel=stacklevel)


def _sync_environ(env: Optional[Dict[str, str]]) -> None:
    # The library setenv()s in C; os.environ is Python's own copy (what subprocess and
    # multiprocessing children get), so update it too.
    for k, v in (env or {}).items():
        if v is None:  # removed by the library (NUMABIND_NICS when the task has no NIC)
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# ---- thread pools ----

_pool_resize_said = False
_omp_notice_said = False


def _fallback_of(mode: Any, fallback: Optional[str]) -> str:
    """fallback as given; unset: "warn" when torch's NumaOptions asks to fall back, else "fail"."""
    if fallback is not None:
        return _choice("fallback", fallback, ("fail", "warn"))
    return "warn" if getattr(mode, "should_fall_back_if_binding_fails", False) is True else "fail"


def _threads(value: Any) -> Optional[str]:
    """threads=N: the library checks the range (1-65536) and names it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error("threads", "an int", value)
    return str(value)


def _say_omp_notice(line: Optional[str]) -> None:
    """torchrun's OMP_NUM_THREADS=1 was kept: once per process, as torchrun itself says once."""
    global _omp_notice_said
    if line and not _omp_notice_said:
        _omp_notice_said = True
        _warn(_python_spelling(line), stacklevel=4)


def _size_thread_pools(ncpus: int, threads: Optional[int] = None) -> Dict[str, Any]:
    """OMP_NUM_THREADS for children (unless set) and torch's intra-op pool (when larger);
    threads=N: both exactly N (the library has set OMP_NUM_THREADS)."""
    global _pool_resize_said
    done: Dict[str, Any] = {}
    if ncpus < 1:
        return done
    if threads is not None:
        done["OMP_NUM_THREADS"] = str(threads)
    elif "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(ncpus)
        done["OMP_NUM_THREADS"] = str(ncpus)
    torch = sys.modules.get("torch")
    get, set_ = getattr(torch, "get_num_threads", None), getattr(torch, "set_num_threads", None)
    if callable(get) and callable(set_) and threads is not None:
        before = get()
        if before != threads:
            set_(threads)
            done["torch_num_threads"] = [before, threads]
    elif callable(get) and callable(set_):
        before = get()
        if before > ncpus:
            set_(ncpus)
            done["torch_num_threads"] = [before, ncpus]
            line = (f"torch.set_num_threads({ncpus}): the intra-op pool had {before} threads for {ncpus} bound CPU(s) "
                    "(bind(thread_pools=False) keeps it)")
            if not _pool_resize_said:
                _pool_resize_said = True
                logger.warning("numabind: %s", line)
            else:
                logger.info("numabind: %s", line)
    return done


def _cpulist(text: str) -> set:
    out: set = set()
    for item in text.split(","):
        item = item.strip()
        if item:
            lo, _, hi = item.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def cpu_count() -> int:
    """The CPUs this process is bound to (NUMABIND_CPUS when numabind bound it, else the
    calling thread's affinity): what to size DataLoader workers and thread pools with,
    where os.cpu_count() counts the whole machine."""
    cpus, mode = os.environ.get(_ENV_CPUS), os.environ.get(_ENV_MODE)
    if cpus and mode and mode != "none":
        try:
            return len(_cpulist(cpus))
        except ValueError:
            pass
    return len(os.sched_getaffinity(0))


# ---- the API ----

def version() -> str:
    """The library's version, e.g. "0.1.0"."""
    return _lib.numabind_version().decode()


def bind(local_rank: Optional[int] = None, ntasks: Optional[int] = None, mode: Mode = "node", mem: str = "prefer",
         devices: Optional[IntList] = None, device_match: Optional[str] = None, topology: Optional[PathLike] = None,
         migrate: bool = False, fallback: Optional[str] = None, allowed_cpus: Optional[IntList] = None,
         rank_source: str = "auto", *, within_affinity: bool = False, thread_pools: bool = True,
         smt: Optional[Union[int, str]] = None, omp: bool = False, ucx: bool = False,
         threads: Optional[int] = None) -> Dict[str, Any]:
    """Binds every thread of this process to its task's share of the node, as `numabind run`
    would plan it. Returns a dict: bound, mode, local_rank, cpus, mems, mem_policy, device,
    devices, threads, threads_mem_policy, pages_moved (with migrate=True), warnings, env,
    thread_pools (what was resized). No accelerator: bound False and one NumabindWarning,
    whatever fallback says. Raises UsageError for bad values, TypeError for bad types, Error
    when binding fails (fallback="warn": a warning, and the process runs unbound).

    mode: none, node, socket, exclusive, core-complex (or torch's AffinityMode, or its NumaOptions,
    whose should_fall_back_if_binding_fails=True means fallback="warn" unless fallback is given);
    fallback: "fail" (the default) or "warn";
    within_affinity=True: stay inside this thread's current affinity (taskset, a launcher's
    pinning) instead of the whole cpuset; thread_pools=False: leave OMP_NUM_THREADS and
    torch's intra-op pool alone; smt=1: one hardware thread per core (the first sibling), "all":
    every sibling, None: 1 under Slurm's --hint=nomultithread, else all;
    omp=True: also OMP_NUM_THREADS (one per core), OMP_PLACES (one place per core) and
    OMP_PROC_BIND=close for the process's children, each only where not set already (the
    result's "omp_kept" names those left alone); ucx=True: also UCX_NET_DEVICES from the
    task's nearest fabric NICs ("nics"; NUMABIND_NICS is always set), unless already set;
    threads=N: OMP_NUM_THREADS=N for children and torch's intra-op pool of N threads, replacing
    any value (torchrun's OMP_NUM_THREADS=1, which bind() otherwise keeps and says so once).

    The device: a local rank from torchrun (LOCAL_RANK) owns the visible device of its index
    (worker r on cuda:r, r mod n), as torch.numa.binding; other launchers' ranks and local_rank=
    get blocks of devices when the devices outnumber the tasks (cuda_index() names the first)."""
    values = _options(local_rank, ntasks, mode, mem, devices, device_match, topology, allowed_cpus, rank_source,
                      within_affinity)
    values["migrate"] = "1" if _bool("migrate", migrate) else "0"
    if smt is not None:
        values["smt"] = _smt(smt)
    values["omp"] = "1" if _bool("omp", omp) else "0"
    values["ucx"] = "1" if _bool("ucx", ucx) else "0"
    fallback = _fallback_of(mode, fallback)
    _bool("thread_pools", thread_pools)
    threads_text = _threads(threads)
    if threads_text is not None:
        values["threads"] = threads_text
    values["fallback"] = "warn"  # the library reports every failure; which ones raise is decided here
    mode_before = os.environ.get(_ENV_MODE)
    with _COptions(values) as opts:
        res = ctypes.c_void_p()
        st = _lib.numabind_bind(opts.ptr, ctypes.byref(res), opts.err, len(opts.err))
        if st != _OK:
            _raise(st, opts.err)
        out = _take_result(res)
    if out.get("error"):
        out["error"] = _python_spelling(out["error"])
    for w in out.get("warnings", []):
        _warn(_python_spelling(w))
    if not out.get("bound") and out.get("error"):
        if out.get("error_kind") == "no_accelerator":
            _warn(out["error"] + "; running unbound")
            logger.info("numabind: bind(mode=%r, local_rank=%r, ntasks=%r) found no accelerator: %s",
                        values["mode"], local_rank, ntasks, out["error"])
        elif fallback == "fail":
            _restore_env(_ENV_MODE, mode_before)
            raise Error(out["error"])
        else:
            _warn(out["error"] + "; running unbound (fallback='warn')")
    _sync_environ(out.get("env"))
    if out.get("bound") and thread_pools:
        _say_omp_notice(out.get("omp_notice"))
        out["thread_pools"] = _size_thread_pools(len(out.get("cpus", [])), threads)
    else:
        out["thread_pools"] = {}
    return out


def _restore_env(name: str, value: Optional[str]) -> None:
    if value is None:
        os.environ.pop(name, None)
        os.unsetenv(name)
    else:
        os.environ[name] = value


def plan(local_rank: Optional[int] = None, ntasks: Optional[int] = None, mode: Mode = "node", mem: str = "prefer",
         devices: Optional[IntList] = None, device_match: Optional[str] = None, topology: Optional[PathLike] = None,
         migrate: bool = False, fallback: Optional[str] = None, allowed_cpus: Optional[IntList] = None,
         rank_source: str = "auto", *, within_affinity: bool = False, thread_pools: bool = True,
         smt: Union[int, str] = "all", omp: bool = False) -> Dict[str, Any]:
    """What `numabind plan --json` prints for bind()'s arguments: {"mode", "tasks": [{"local_rank",
    "device", "devices", "cpus", "mems", "mem_policy", "nics", "warnings"}], "warnings"}. Applies nothing
    and works on any topology XML (another machine's: the XML's own CPUs are the allowed ones
    unless allowed_cpus is given). ntasks defaults to the launcher's variables. With local_rank,
    "local_rank" names this process's entry of "tasks". devices is the only source of the visible
    devices (CUDA_VISIBLE_DEVICES is this machine's); smt=1 plans one thread per core; migrate,
    fallback, thread_pools and omp are checked and do not change a plan."""
    values = _options(local_rank, ntasks, mode, mem, devices, device_match, topology, allowed_cpus, rank_source,
                      within_affinity)
    _bool("migrate", migrate), _fallback_of(mode, fallback), _bool("thread_pools", thread_pools)
    values["smt"] = _smt(smt)
    _bool("omp", omp)
    with _COptions(values) as opts:
        out = _json_call(_lib.numabind_plan_json, opts.ptr)
    if local_rank is not None:
        if local_rank >= len(out["tasks"]):
            raise UsageError(f"invalid local_rank {local_rank} (the plan has tasks 0-{len(out['tasks']) - 1})")
        out["local_rank"] = local_rank
    return out


def reapply() -> Dict[str, Any]:
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


def _bound_parent() -> Optional[int]:
    """The pid of the multiprocessing parent when numabind bound it (its plan marker is mapped)."""
    parent = getattr(multiprocessing, "parent_process", lambda: None)()  # Python 3.8+
    pid = getattr(parent, "pid", None) if parent is not None else None
    if not pid or pid == os.getpid():
        return None
    try:
        with open(f"/proc/{pid}/maps") as f:
            return pid if any(_PLAN_MARKER in line for line in f) else None
    except OSError:
        return None


def worker_init_fn(worker_id: int) -> Dict[str, Any]:
    """For torch.utils.data.DataLoader(worker_init_fn=...): a forked worker inherits the
    binding of the thread that forked it; this checks every thread of the worker against
    NUMABIND_* and re-applies the binding where it was lost (worker_id is unused). A worker
    without a binding whose parent is bound (a forkserver started before bind()) warns."""
    out = reapply()
    if not out.get("checked"):
        parent = _bound_parent()
        if parent is not None:
            out["unbound_parent_bound"] = parent
            _warn(f"this worker (pid {os.getpid()}) runs unbound although its parent (pid {parent}) is bound: it "
                  "was started by a process created before bind() (a forkserver?); call numabind.bind() before "
                  "anything starts workers, or use multiprocessing_context='spawn' or 'fork'")
    return out


def cuda_index(topology: Optional[PathLike] = None, device_match: Optional[str] = None) -> int:
    """The CUDA ordinal of this process's device (NUMABIND_DEVICE, a physical index) under the
    current CUDA_VISIBLE_DEVICES: what torch.cuda.set_device() and torch.device("cuda", i) take.
    Raises Error when the process is not bound to a device or CUDA does not see it."""
    err = ctypes.create_string_buffer(1024)
    index = ctypes.c_int(-1)
    st = _lib.numabind_cuda_index(_opt("topology", topology), _opt("device_match", device_match),
                                  ctypes.byref(index), err, len(err))
    if st != _OK:
        _raise(st, err)
    return index.value


def _opt(name: str, value: Any) -> Optional[bytes]:
    text = _str(name, value)
    return None if text is None else text.encode()


def placement(topology: Optional[PathLike] = None, device_match: Optional[str] = None) -> Dict[str, Any]:
    """This process's placement, as `numabind show --json` prints it: pid, cpus, cpu_numa_nodes,
    mem_policy, mem_nodes (the calling thread's), device, devices, nics (the fabric NICs nearest
    those devices, [{"name", "pci"}]), warnings; after a bind from another
    topology (devices this machine does not show), also "plan" and "note"."""
    return _json_call(_lib.numabind_placement_json, _opt("topology", topology), _opt("device_match", device_match))


def inspect(pid: int, topology: Optional[PathLike] = None, device_match: Optional[str] = None) -> Dict[str, Any]:
    """A running process, as `numabind show --pid PID --json` prints it (threads, memory,
    devices, mismatches). Only the process's owner or root may look."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise _type_error("pid", "an int", pid)
    return _json_call(_lib.numabind_inspect_json, pid, _opt("topology", topology), _opt("device_match", device_match))
