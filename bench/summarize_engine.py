#!/usr/bin/env python3
"""Summarise numabind_bench's JSON (--benchmark_out) as Markdown tables.

    bench/summarize_engine.py BUILD/bench/results/engine.json

plan_node: median wall / CPU microseconds per node plan, one row per topology and task
count, one column per mode; then find_accelerators and the topology loads. With
repetitions the *_median aggregates are used, else the single runs.
"""
import json
import sys
from collections import OrderedDict

MODES = ["none", "node", "socket", "exclusive", "core-complex"]
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def main(path):
    data = json.load(open(path))
    rows = OrderedDict()
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            name = b.get("run_name", b["name"])
            rows[name] = None
            continue
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        f = TO_US[b.get("time_unit", "ns")]
        rows[name] = (b["real_time"] * f, b["cpu_time"] * f)

    ctx = data.get("context", {})
    print(f"Host: {ctx.get('num_cpus')} CPUs @ {ctx.get('mhz_per_cpu')} MHz, load average "
          f"{', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))} at start; {ctx.get('date')}\n")

    print("plan_node, µs per node plan (median wall / CPU); ✗ = impossible split (error)\n")
    print("| topology | tasks | " + " | ".join(MODES) + " |")
    print("|---|---:|" + "---:|" * len(MODES))
    plans = OrderedDict()
    for name, v in rows.items():
        if not name.startswith("plan_node/"):
            continue
        _, topo, mode, tasks = name.split("/")
        plans.setdefault((topo, tasks.split(":")[1]), {})[mode] = v
    worst = (0.0, "")
    for (topo, tasks), modes in plans.items():
        cells = []
        for m in MODES:
            v = modes.get(m)
            if v is None:
                cells.append("✗")
            else:
                cells.append(f"{v[0]:.1f} / {v[1]:.1f}")
                if v[1] > worst[0]:
                    worst = (v[1], f"{topo} {m} {tasks} tasks")
        print(f"| {topo} | {tasks} | " + " | ".join(cells) + " |")
    print(f"\nSlowest plan (CPU): {worst[0]:.1f} µs ({worst[1]})\n")

    print("| benchmark | wall | CPU |")
    print("|---|---:|---:|")
    for name, v in rows.items():
        if name.startswith("plan_node/") or v is None:
            continue
        unit, scale = ("ms", 1e-3) if v[1] >= 100 else ("µs", 1.0)
        print(f"| {name} | {v[0] * scale:.3f} {unit} | {v[1] * scale:.3f} {unit} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
