"""python -m numabind show|plan|version: the module's view, without the numabind command.

    python -m numabind show [--json] [--topology XML] [--device-match SPEC]
    python -m numabind plan --ntasks N [--mode M] [--mem P] [--devices 0,1] [--topology XML] [--json]
"""
import argparse
import json
import sys
from typing import List, Optional

import numabind


def _print_plan(p: dict) -> None:
    print(f"mode {p['mode']}, {len(p['tasks'])} task(s)")
    print("rank  device  pci           mems    policy      cpus")
    for t in p["tasks"]:
        dev = t["device"] or {}
        print(f"{t['local_rank']:<5} {str(dev.get('index', '-')):<7} {dev.get('pci', '-'):<13} "
              f"{','.join(map(str, t['mems'])) or '-':<7} {t['mem_policy']:<11} {_ranges(t['cpus'])}")
        for w in t["warnings"]:
            print(f"      warning: {w}")
    for w in p["warnings"]:
        print(f"warning: {w}")


def _ranges(ids: List[int]) -> str:
    out, start = [], None
    for i, v in enumerate(ids):
        if start is None:
            start = v
        if i + 1 == len(ids) or ids[i + 1] != v + 1:
            out.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ",".join(out)


def _print_show(s: dict) -> None:
    print(f"cpus:       {_ranges(s['cpus'])} (NUMA node(s) {','.join(map(str, s['cpu_numa_nodes']))})")
    print(f"memory:     {s['mem_policy']}" + (f" on node(s) {_ranges(s['mem_nodes'])}" if s["mem_nodes"] else ""))
    if s.get("plan"):
        p = s["plan"]
        print(f"plan:       mode {p['mode']}, cpus {p['cpus']}, mems {p['mems'] or '-'} ({p['mem_policy']}), "
              f"device(s) {','.join(map(str, p['devices']))}")
        print(f"note:       {s['note']}")
    elif s["device"]:
        d = s["device"]
        print(f"device:     {d['index']} ({d['pci']}) on NUMA node(s) {','.join(map(str, d['numa_nodes']))} "
              f"[{d['source']}]")
    else:
        print("device:     none")
    if s.get("nics"):
        print("nics:       " + ", ".join(f"{n['name']} ({n['pci']})" for n in s["nics"]))
    for w in s["warnings"]:
        print(f"warning: {w}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m numabind", description="numabind from Python: show, plan")
    sub = ap.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="this process's placement (numabind.placement())")
    plan = sub.add_parser("plan", help="the node's plan, nothing applied (numabind.plan())")
    sub.add_parser("version", help="the library's version and path")
    for p in (show, plan):
        p.add_argument("--topology", help="hwloc XML instead of this machine")
        p.add_argument("--device-match", help="VVVV[:DDDD] or class=0xCCSS, comma-separated")
        p.add_argument("--json", action="store_true", help="JSON output")
    plan.add_argument("--ntasks", type=int, help="tasks on the node (default: the launcher's variables)")
    plan.add_argument("--mode", default="node", choices=numabind.MODES)
    plan.add_argument("--mem", default="prefer", choices=numabind.MEM_POLICIES)
    plan.add_argument("--devices", help="visible physical device indexes, e.g. 0,1")
    plan.add_argument("--allowed-cpus", help="CPUs the tasks may use, e.g. 0-15")
    a = ap.parse_args(argv)
    try:
        if a.command == "version":
            print(f"numabind {numabind.version()} ({numabind.library_path})")
            return 0
        if a.command == "show":
            out = numabind.placement(topology=a.topology, device_match=a.device_match)
            show_fn = _print_show
        else:
            out = numabind.plan(ntasks=a.ntasks, mode=a.mode, mem=a.mem, devices=a.devices,
                                device_match=a.device_match, topology=a.topology, allowed_cpus=a.allowed_cpus)
            show_fn = _print_plan
    except numabind.UsageError as e:
        print(f"numabind: error: {e}", file=sys.stderr)
        return 2
    except numabind.Error as e:
        print(f"numabind: error: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        show_fn(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
