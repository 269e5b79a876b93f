# shellcheck shell=bash
# tests/slurm/gpu_truth_lib.sh — what the gpu_truth_*_test.sh scripts share (one script per
# Slurm setup; each proves that every task binds to the GPUs it really holds):
#   . "$HERE/gpu_truth_lib.sh" "${1:-}"        (after set -uo pipefail; $1: the plugin)
#
# Checks root and the tools (plugin_test_env.sh, exit 77 without them), makes D (kept after a
# failure or with NBSPANK_KEEP=1, else removed at exit, its cluster CD=$D/cluster stopped),
# installs the plugin and the task probe there, builds the helper plugins
# ($D/helper_SLOW.so: a task reports late; $D/helper_FAKE.so: a raw option value reaches
# slurmstepd) and writes the topology= XMLs (tests/tools/gen_topology.py, the real PUs split
# in 2 fake NUMA nodes): $D/topo/n1.xml with 4 fake GPUs (mknod'ed char devices, made by
# cluster.sh), 2 per NUMA node, and $D/topo/n2.xml without GPUs. HOMES: the PUs local to
# each GPU in PCI order (hwloc-calc on the XML, once).
#
# Every case asserts inside the task (report.sh): which fake GPU files open(2) lets it open,
# which of them its runtime uses (CUDA_VISIBLE_DEVICES over those), the CPUs local to them
# (hwloc-calc on the XML), that its own CPUs lie there (inhome=yes) and that NUMABIND_DEVICES
# names exactly the used GPUs (truth); exclusive modes also check that tasks' CPU sets are
# disjoint.
#   gpu_step SRUN_ARG...        one step of the probe on $CD's cluster (probe_step, with the GPUs)
#   truth NAME [exclusive]      the assertion above on that step
#   exact_single NAME           single-GPU tasks: CPUs = that GPU's node, NUMABIND_DEVICES = it
#   plugstack LINE...           $CD/plugstack.conf holds exactly LINE...
#   FILES                       "device_files=..." naming the 4 fake GPU files of each node
#   lines REGEX                 how many lines of the step's stderr match REGEX
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/plugin_test_env.sh" "${1:-}" srun sbatch salloc hwloc-calc cc
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CHECKS_TIMES=1   # each ok/FAIL line says when (seconds since the start)
D=$(mktemp -d /tmp/nbgpu.XXXXXX); chmod 0755 "$D"
CD=$D/cluster   # the script's one cluster
cleanup() {
  local rc=$?
  cluster_stop "$CD"
  if [ "${NBSPANK_KEEP:-0}" = 1 ] || [ "$failures" -ne 0 ]; then echo "directory kept: $D"; else rm -rf "$D"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_plugin "$D"
for h in SLOW FAKE; do
  cc -shared -fPIC -O1 -DHELPER_$h -o "$D/helper_$h.so" "$HERE/helper_plugin.c" || { echo "cannot build helper plugin"; exit 1; }
done
chmod 0755 "$D"/*.so "$D/report.sh"
mkdir -p "$D/topo"
BUSES=0000:17:00.0,0000:27:00.0,0000:37:00.0,0000:47:00.0
python3 "$GEN" -o "$D/topo/n1.xml" --split-numa 2 --gpu numa:0=0000:17:00.0 --gpu numa:0=0000:27:00.0 \
  --gpu numa:1=0000:37:00.0 --gpu numa:1=0000:47:00.0 >/dev/null || exit 1
python3 "$GEN" -o "$D/topo/n2.xml" --split-numa 2 >/dev/null || exit 1
chmod 0644 "$D"/topo/*.xml
XML=$D/topo/n1.xml
# the PUs local to each fake GPU, in PCI order (hwloc-calc, once)
HOMES=$(for b in ${BUSES//,/ }; do hwloc-calc --input "$XML" --po -I pu pci=$b; done | paste -sd'|')
home_of() { cut -d'|' -f$(($1 + 1)) <<<"$HOMES"; }

on_fail() { show "$D/out" 8 out; show "$D/err" 6 err; }   # the last step's R lines, its stderr
lines() { grep -c "$1" "$D/err"; }

# a step of the task probe (probe_step) that also reports the fake GPUs each task can open and uses
gpu_step() { NBPROBE_DEVDIR=$CD/dev NBPROBE_HOMES=$HOMES probe_step "$D" -s "$@"; }
# The core assertion: tasks ran, every task's CPUs lie on the NUMA node(s) of the GPUs it
# really uses, and NUMABIND_DEVICES names exactly those (probe index = PCI order = numabind's).
# $2: "exclusive" also checks that all tasks' CPU sets are disjoint.
truth() {
  local name=$1 n; n=$(wc -l <"$D/out")
  local why=""
  [ "$RC" = 0 ] || why+="rc=$RC "
  [ "$n" -ge 1 ] || why+="no task output "
  grep -Eqv ' inhome=(yes|nohome)' "$D/out" && why+="a task's CPUs are not local to the GPU(s) it uses "
  # a task that uses several GPUs owns all of them; a task that can use all GPUs of a shared
  # step owns its share (checked through inhome above): NUMABIND_DEVICES must be among them
  paste -d' ' <(report_values "$D/out" devs) <(report_values "$D/out" uses) | while read -r dv us; do
    for x in ${dv//,/ }; do [[ ",$us," == *",$x,"* ]] || echo "NUMABIND_DEVICES=$dv not in used GPUs $us"; done
  done >"$D/why"
  [ -s "$D/why" ] && why+="$(head -n1 "$D/why") "
  if [ "${2:-}" = exclusive ]; then
    nb_python - "$D/out" <<'PY' || why+="CPU sets overlap "
import sys
from cpulist import ids
seen = set()
for line in open(sys.argv[1]):
    c = ids([f for f in line.split() if f.startswith("cpus=")][0][5:])
    if c & seen: sys.exit(1)
    seen |= c
PY
  fi
  if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}
# tasks using a single GPU: their CPUs are exactly that GPU's NUMA node (mode node) and
# NUMABIND_DEVICES is that GPU
exact_single() {
  local got want
  got=$(paste -d' ' <(report_values "$D/out" uses) <(report_values "$D/out" cpus) <(report_values "$D/out" devs))
  want=$(paste -d' ' <(report_values "$D/out" uses) <(report_values "$D/out" cgcpus) | while read -r u cg; do
    echo "$u $(cpu_ranges "$(home_of "$u")" "$cg") $u"; done)
  check_eq "$1" "$want" "$got"
}
# the cluster's plugstack.conf holds exactly these lines
plugstack() { plugstack_lines "$CD/plugstack.conf" "$@"; }
FILES() { local f="" i; for i in 0 1 2 3; do f+="${f:+,}$CD/dev/%n/nvidia$i"; done; echo "device_files=$f"; }
