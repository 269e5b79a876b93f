# shellcheck shell=bash
# tests/slurm/spank_lib.sh — what the spank_*_test.sh scripts share (one script per Slurm
# setup), the plugin against a real Slurm:
#   . "$(dirname "$0")/spank_lib.sh" "${1:-}"        (after set -uo pipefail; $1: the plugin)
#
# Checks root and the tools (plugin_test_env.sh, exit 77 without them), makes D (the cluster
# directory: kept after a failure or with NBSPANK_KEEP=1, else removed at exit, its cluster
# stopped), installs the plugin and the task probe there and writes the topology= XMLs:
# this machine's real CPUs plus 2 fake NVIDIA GPUs (tests/tools/gen_topology.py), so bindings
# are really applied; tasks read them back from /proc/self/status and get_mempolicy(2)
# (report.sh).
#   ONE    the real machine (its NUMA node and L3), GPU 0 below core 0, GPU 1 below core 1
#   NEAR   the real PUs split into 2 NUMA nodes, GPU i on node i (also topo/node-n1.xml)
#   SWAP   the same, GPUs swapped (also topo/node-n2.xml)
#   NOGPU  no GPU
# Expected CPU sets come from hwloc-calc on the XML, never from the plugin:
#   node_cpus XML GPU, pkg_cpus, l3_cpus, core_cpus XML CORE, numa_os XML GPU, bus GPU
# and the checks of a step of the probe (probe_step "$D" ...):
#   plugin_args ARG...          $D/plugstack.conf: the plugin with these arguments
#   mc FILE                     "rank:mode:cpus" per task; per_rank "0:x" "1:y": the same form
#   check_grep NAME REGEX FILE  pass when a line of FILE matches REGEX
#   case_on NAME                false when NBSPANK_ONLY=regex does not match NAME
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/plugin_test_env.sh" "${1:-}" srun sbatch hwloc-calc

D=$(mktemp -d "${TMPDIR:-/tmp}/nbspank.XXXXXX")
chmod 0755 "$D"
cleanup() {
  local rc=$?
  cluster_stop "$D"
  if [ "${NBSPANK_KEEP:-0}" = 1 ] || [ "$failures" -ne 0 ]; then
    echo "cluster directory kept: $D"
  else
    rm -rf "$D"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ fixtures
install_plugin "$D"
mkdir -p "$D/topo"
B0=0000:17:00.0   # physical GPU 0 (PCI order)
B1=0000:27:00.0   # physical GPU 1
gen() { python3 "$GEN" "$@" 2>/dev/null || { echo "gen_topology.py $* failed"; exit 1; }; }
# one: the real machine (1 NUMA node, 1 L3) with GPU 0 below core 0, GPU 1 below core 1
gen -o "$D/topo/one.xml" --gpu core:0=$B0 --gpu core:1=$B1
# near/swap: the real PUs split into 2 NUMA nodes; GPU i on node i, or swapped
gen -o "$D/topo/near.xml" --split-numa 2 --gpu numa:0=$B0 --gpu numa:1=$B1
gen -o "$D/topo/swap.xml" --split-numa 2 --gpu numa:1=$B0 --gpu numa:0=$B1
gen -o "$D/topo/nogpu.xml"
cp "$D/topo/near.xml" "$D/topo/node-n1.xml"
cp "$D/topo/swap.xml" "$D/topo/node-n2.xml"
chmod 0644 "$D"/topo/*.xml

# ---- independent expectations (hwloc-calc on the XML)
bus() { [ "$1" = 0 ] && echo $B0 || echo $B1; }
objs_of_gpu() {  # XML TYPE GPU -> "numa:0 numa:1" (logical indexes of TYPE objects around the GPU)
  hwloc-calc --input "$1" -I "$2" --li pci="$(bus "$3")" | tr ',' '\n' | sed "s/^/$2:/" | tr '\n' ' '
}
pus_of() { cpu_ranges "$(hwloc-calc --input "$1" --po -I pu $2)"; }   # XML "obj obj" -> list
node_cpus() { pus_of "$1" "$(objs_of_gpu "$1" numa "$2")"; }      # PUs of the GPU's NUMA node(s)
pkg_cpus() { pus_of "$1" "$(objs_of_gpu "$1" package "$2")"; }
l3_cpus() { pus_of "$1" "$(objs_of_gpu "$1" l3 "$2")"; }
core_cpus() { pus_of "$1" "core:$2"; }
numa_os() { hwloc-calc --input "$1" -I numa --po pci="$(bus "$2")"; }

# ------------------------------------------------------------------ helpers
on_fail() { show "$D/err" 8 stderr; }   # the last srun's stderr
check_grep() {  # name regex file
  if grep -Eq -- "$2" "$3"; then pass "$1"; else fail "$1" "no line matching /$2/ in $(basename "$3")"; fi
}
# plugstack.conf: the plugin with these arguments
plugin_args() { plugstack_lines "$D/plugstack.conf" "required $D/spank_numabind.so $*"; }
mc() { paste -d: <(report_by_rank "$1" mode) <(report_by_rank "$1" cpus | cut -d: -f2); }  # "rank:mode:cpus"
per_rank() {  # "0:x" "1:y" ... -> lines, as report_by_rank prints them
  printf '%s\n' "$@"
}
case_on() { [ -z "${NBSPANK_ONLY:-}" ] || [[ "$1" =~ $NBSPANK_ONLY ]]; }

# shellcheck disable=SC2034  # read by the scripts that source this file
ONE=$D/topo/one.xml NEAR=$D/topo/near.xml SWAP=$D/topo/swap.xml NOGPU=$D/topo/nogpu.xml
