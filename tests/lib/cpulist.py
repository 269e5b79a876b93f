#!/usr/bin/env python3
"""The one CPU-list parser of the script tiers: Linux's list format ("0-2,5", as in
Cpus_allowed_list, NUMABIND_CPUS, hwloc-calc --po -I pu) to a set of ids and back.

    cpulist.py LIST                     prints LIST expanded and sorted: "0-2,5" -> "0,1,2,5"
    cpulist.py --ranges LIST [WITHIN]   prints LIST in the kernel's form: "0,1,2,5" -> "0-2,5";
                                        with WITHIN, only its CPUs that WITHIN has ("-": all)

From Python: sys.path has tests/lib (checks.sh: nb_python), then `from cpulist import ids, fmt`.
"""
import sys


def ids(text):
    """"0-2,5" -> {0, 1, 2, 5}; empty items are ignored; None and "-" (a probe's "no value")
    are the empty set."""
    out = set()
    if text is None or text.strip() == "-":
        return out
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out.update(range(int(a), int(b or a) + 1))
    return out


def fmt(values):
    """{0, 1, 2, 5} -> "0-2,5": the kernel's own form."""
    v, out, i = sorted(values), [], 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[j + 1] == v[j] + 1:
            j += 1
        out.append(str(v[i]) if i == j else "%d-%d" % (v[i], v[j]))
        i = j + 1
    return ",".join(out)


if __name__ == "__main__":
    if sys.argv[1] == "--ranges":
        cpus = ids(sys.argv[2])
        if len(sys.argv) > 3 and sys.argv[3] != "-":
            cpus &= ids(sys.argv[3])
        print(fmt(cpus))
    else:
        print(",".join(map(str, sorted(ids(sys.argv[1])))))
