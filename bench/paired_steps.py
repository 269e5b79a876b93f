#!/usr/bin/env python3
"""Interleaved, paired srun timings for bench/step_overhead.sh (run inside an allocation).

  paired_steps.py DIR OUT N basic        -n2: no plugin / no-op plugin / loaded / exclusive XML / exclusive live /
                                         exclusive XML with --gpus-per-task=1 (the tasks plan by the exchange)
  paired_steps.py DIR OUT N many C...    -nC (oversubscribed): no plugin / no-op plugin / node with XML

Each iteration runs every row back to back (order rotated), so slow drift from other load
cancels in the per-iteration differences. DIR holds plugstack.{off,noop,xml,live}; OUT gets JSON.
"""
import json
import subprocess
import sys
import time


def time_rows(d, srun, rows, n):
    times = {r[0]: [] for r in rows}
    for i in range(n):
        for k in range(len(rows)):
            name, conf, opt = rows[(i + k) % len(rows)]
            subprocess.run(["cp", f"{d}/plugstack.{conf}", f"{d}/plugstack.conf"], check=True)
            t0 = time.perf_counter()
            subprocess.run(srun + opt + ["true"], check=True)
            times[name].append(time.perf_counter() - t0)
    return times


def main():
    d, out, n, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if kind == "basic":
        rows = [("no plugin", "off", []), ("no-op SPANK plugin", "noop", []), ("plugin loaded, not asked", "xml", []),
                ("exclusive, topology=XML", "xml", ["--numa-binding=exclusive"]),
                ("exclusive, live discovery", "live", ["--numa-binding=exclusive"]),
                ("exclusive, --gpus-per-task=1", "xml", ["--numa-binding=exclusive", "--gpus-per-task=1"])]
        result = time_rows(d, ["srun", "-n2", "--gpus-per-node=2"], rows, n)
    else:
        rows = [("no plugin", "off", []), ("no-op SPANK plugin", "noop", []),
                ("node, topology=XML", "xml", ["--numa-binding=node"])]
        result = {c: time_rows(d, ["srun", "-n" + c, "-O", "--gpus-per-node=2"], rows, n) for c in sys.argv[5:]}
    json.dump(result, open(out, "w"))


if __name__ == "__main__":
    main()
