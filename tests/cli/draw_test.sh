#!/bin/bash
# shellcheck disable=SC2317  # helpers (rc, row, ...) are called from the strings check eval's
# plan/show --draw: lstopo renders the node with each task's CPUs and GPU in its colour.
# Checks the file types, that lstopo accepts the styled XML, and that every task's CPUs (and
# its GPU) carry the task's colour in it: the plan's CPUs, which lie inside the GPU's local
# CPUs as hwloc-calc reports them, and for show the affinity taskset gave. Seconds.
# Usage: draw_test.sh NUMABIND GEN_TOPOLOGY_PY      (exit 77 without a graphical lstopo)
set -u
NB=$1
GEN=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; [ -n "${SLEEPER:-}" ] && kill "$SLEEPER" 2>/dev/null' EXIT
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
command -v lstopo >/dev/null && lstopo --help 2>&1 | grep -q 'formats:.*png' ||
  skip "lstopo with png output not found (Debian package hwloc)"
on_fail() { show "$WORK/err"; }
magic() { head -c "$2" "$1" | od -An -c | tr -d ' \n'; }

python3 "$GEN" --preset dgx-a100 -o "$WORK/dgx.xml" || exit 1
plan() { "$NB" plan --topology "$WORK/dgx.xml" "$@" >"$WORK/out" 2>"$WORK/err"; }

plan --mode exclusive --ntasks 8 --draw "$WORK/p.png"
check "plan --draw .png: exit 0, a PNG" eval '[ $? = 0 ] && [ "$(magic "$WORK/p.png" 4)" = "211PNG" ]'
plan --mode exclusive --ntasks 8 --draw "$WORK/p.svg"
check "plan --draw .svg: an SVG" eval 'grep -q "<svg" "$WORK/p.svg"'
plan --mode exclusive --ntasks 8 --draw "$WORK/p.pdf"
check "plan --draw .pdf: a PDF" eval '[ "$(magic "$WORK/p.pdf" 5)" = "%PDF-" ]'
plan --mode exclusive --ntasks 8 --draw "$WORK/p.jpg"
check "plan --draw .jpg: exit 2, one line naming it and the formats" \
  eval '[ $? = 2 ] && [ $(wc -l <"$WORK/err") = 1 ] && grep -q "p.jpg.*png, .svg, .pdf, .xml" "$WORK/err"'

# The styled XML itself, and the plan's tasks as JSON.
plan --mode exclusive --ntasks 8 --draw "$WORK/styled.xml"
"$NB" plan --topology "$WORK/dgx.xml" --mode exclusive --ntasks 8 --json >"$WORK/plan.json"
lstopo --input "$WORK/styled.xml" --of xml - >"$WORK/relstopo.xml" 2>"$WORK/err"
check "lstopo accepts the styled XML, silently, and keeps its styles" \
  eval '[ $? = 0 ] && [ ! -s "$WORK/err" ] && [ "$(grep -c lstopoStyle "$WORK/relstopo.xml")" = "$(grep -c lstopoStyle "$WORK/styled.xml")" ]'
lstopo --input "$WORK/styled.xml" --of png -f "$WORK/again.png" 2>"$WORK/err"
check "lstopo renders the styled XML itself" eval '[ $? = 0 ] && [ "$(magic "$WORK/again.png" 4)" = "211PNG" ]'
# Per task: the PUs with its colour are exactly its planned CPUs, inside hwloc-calc's
# local CPUs of its GPU, and that GPU carries the same colour; a legend line names it.
nb_python - "$WORK/styled.xml" "$WORK/plan.json" "$WORK/dgx.xml" >"$WORK/err" 2>&1 <<'PY'
import json, subprocess, sys
from cpulist import ids
import xml.etree.ElementTree as ET
styled, plan, topo = sys.argv[1:4]
root = ET.parse(styled).getroot()
pu_style, pci_style, legend = {}, {}, []
for obj in root.iter("object"):
    infos = {i.get("name"): i.get("value") for i in obj.findall("info")}
    legend += [i.get("value") for i in obj.findall("info") if i.get("name") == "lstopoLegend"]
    if "lstopoStyle" not in infos: continue
    if obj.get("type") == "PU": pu_style[int(obj.get("os_index"))] = infos["lstopoStyle"]
    if obj.get("type") == "PCIDev": pci_style[obj.get("pci_busid")] = infos["lstopoStyle"]
tasks = json.load(open(plan))["tasks"]
bad, colours = [], set()
for t in tasks:
    cpus = ids(t["cpus"]) if isinstance(t["cpus"], str) else set(t["cpus"])
    styles = {pu_style.get(c) for c in cpus}
    if len(styles) != 1 or None in styles: bad.append("task %s: CPUs styled %s" % (t["local_rank"], styles))
    style = styles.pop()
    colours.add(style)
    mine = {pu for pu, s in pu_style.items() if s == style}
    if mine != cpus: bad.append("task %s: colour on %s, plan %s" % (t["local_rank"], sorted(mine), sorted(cpus)))
    pci = t["device"]["pci"] if isinstance(t.get("device"), dict) else t["pci"]
    local = subprocess.run(["hwloc-calc", "--input", topo, "pci=" + pci, "-p", "-I", "pu"], capture_output=True, text=True).stdout
    if not cpus <= ids(local.strip()): bad.append("task %s: CPUs outside hwloc-calc's local CPUs of %s" % (t["local_rank"], pci))
    if pci_style.get(pci) != style: bad.append("task %s: GPU %s styled %s, CPUs %s" % (t["local_rank"], pci, pci_style.get(pci), style))
    if not any(("task %s," % t["local_rank"]) in l and pci in l for l in legend): bad.append("no legend line for task %s" % t["local_rank"])
if len(colours) != len(tasks): bad.append("%d colours for %d tasks" % (len(colours), len(tasks)))
print("\n".join(bad)); sys.exit(1 if bad else 0)
PY
check "every task's CPUs and GPU carry its own colour, the legend names it" eval '[ $? = 0 ]'

# node mode: two tasks share each NUMA node, so their CPUs are drawn in the shared colour.
plan --mode node --ntasks 8 --draw "$WORK/node.xml"
shared=$(python3 -c "
import xml.etree.ElementTree as ET, sys
s = {o.get('os_index') for o in ET.parse(sys.argv[1]).getroot().iter('object') if o.get('type') == 'PU'
     and any(i.get('name') == 'lstopoStyle' and '#a0a0a0' in i.get('value') for i in o.findall('info'))}
print(len(s))" "$WORK/node.xml")
expected=$(for n in 1 3 5 7; do hwloc-calc --input "$WORK/dgx.xml" -p numa:$n -N pu; done | awk "{s += \$1} END {print s}")
check "node mode: the GPU nodes' PUs ($expected by hwloc-calc) drawn as shared, legend says so" \
  eval '[ "$shared" = "$expected" ] && grep -q "more than one task" "$WORK/node.xml"'

# show: this process's CPUs (taskset), and --pid of another process.
cpu=$(taskset -pc $$ | sed 's/.*: //' | cut -d, -f1 | cut -d- -f1)
taskset -c "$cpu" "$NB" show --draw "$WORK/show.xml" >"$WORK/out" 2>"$WORK/err"
styled_pus() { python3 -c "
import xml.etree.ElementTree as ET, sys
print(','.join(sorted(o.get('os_index') for o in ET.parse(sys.argv[1]).getroot().iter('object') if o.get('type') == 'PU'
      and any(i.get('name') == 'lstopoStyle' for i in o.findall('info')))))" "$1"; }
check "show --draw: exactly the CPU taskset gave it is coloured" eval '[ "$(styled_pus "$WORK/show.xml")" = "$cpu" ]'
taskset -c "$cpu" sleep 30 &
SLEEPER=$!
"$NB" show --pid "$SLEEPER" --draw "$WORK/pid.png" >"$WORK/out" 2>"$WORK/err" &&
  "$NB" show --pid "$SLEEPER" --draw "$WORK/pid.xml" >"$WORK/out" 2>>"$WORK/err"
check "show --pid --draw: a PNG, and the process's CPU coloured, legend naming the pid" \
  eval '[ "$(magic "$WORK/pid.png" 4)" = "211PNG" ] && [ "$(styled_pus "$WORK/pid.xml")" = "$cpu" ] && grep -q "pid $SLEEPER (sleep)" "$WORK/pid.xml"'

finish
