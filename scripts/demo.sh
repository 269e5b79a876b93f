#!/usr/bin/env bash
# The main job, end to end on one Debian 12 machine (as root): install what is needed,
# build, start an embedded local Slurm cluster (munged + slurmctld + slurmd in a temporary
# directory) with spank_numabind.so loaded, and show `srun --numa-binding=...` placing tasks
# in every mode. Everything started here is stopped on exit.
#
# The cluster runs on this machine's real CPUs. Slurm sees two GPUs per node (fake device
# files in gres.conf); the plugin's topology= is an hwloc XML of this machine plus two
# NVIDIA GPUs (tests/tools/gen_topology.py), so bindings are really applied by the kernel
# and read back from /proc by the tasks.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root (it starts munged, slurmctld and slurmd)" >&2; exit 1; }

.ci/install-deps.sh
BUILD=${NUMABIND_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# numabind_python_library: build/python/numabind (the package and its libnumabind.so), used below
cmake --build "$BUILD" -j"$(nproc)" --target numabind-cli spank_numabind numabind_stepd numabind_python_library
NB=$ROOT/$BUILD/numabind

DIR=$(mktemp -d /tmp/numabind-demo.XXXXXX)
chmod 0755 "$DIR"
trap 'tests/slurm/cluster.sh stop "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
cp "$BUILD/spank/spank_numabind.so" "$BUILD/spank/numabind_stepd.so" "$DIR/"
GEN="python3 tests/tools/gen_topology.py"
# this machine as it is, GPU 0 and GPU 1 attached to its (only) package
$GEN -o "$DIR/real.xml" --gpu package:0 --gpu package:0 >/dev/null 2>&1
# the same CPUs presented as a 2-socket node with GPU 0 on NUMA node 1 and GPU 1 on node 0
$GEN -o "$DIR/two-socket.xml" --split-numa 2 --gpu numa:1 --gpu numa:0 >/dev/null 2>&1
# a DGX-A100-like node (2x EPYC 7742 NPS4, 8x A100), the node of the man pages' examples
$GEN --preset dgx-a100 -o "$DIR/dgx-a100.xml"
chmod 0644 "$DIR"/*.xml

banner() { printf '\n=== %s\n' "$*"; }
banner "numabind topo: a generated DGX-A100-like node (gen_topology.py --preset dgx-a100)"
"$NB" topo --topology "$DIR/dgx-a100.xml"
for mode in exclusive core-complex; do
  banner "numabind plan --mode $mode --ntasks 8 on that node (one task per GPU; see man numabind)"
  "$NB" plan --topology "$DIR/dgx-a100.xml" --mode "$mode" --ntasks 8
done
banner "the same from Python: numabind.plan(topology=..., ntasks=16, mode='core-complex') (docs/PYTHON.md)"
PYTHONPATH=$ROOT/$BUILD/python /usr/bin/python3 -m numabind plan --topology "$DIR/dgx-a100.xml" --mode core-complex --ntasks 16

echo "required $DIR/spank_numabind.so topology=$DIR/real.xml mem=bind" >"$DIR/plugstack.conf"
tests/slurm/cluster.sh start "$DIR" --plugstack "$DIR/plugstack.conf" >/dev/null
# shellcheck disable=SC1091
. "$DIR/env.sh"

show_tasks() {  # each task prints what the kernel says about it
  srun "$@" sh -c 'printf "  task %s  GPU %s  cpus %-6s %s\n" "$SLURM_LOCALID" "$CUDA_VISIBLE_DEVICES" \
    "$(awk "/Cpus_allowed_list/{print \$2}" /proc/self/status)" \
    "NUMABIND_MODE=$NUMABIND_MODE NUMABIND_MEMS=$NUMABIND_MEMS"' | sort
}

banner "this machine: $(hwloc-calc -N pu all) CPUs, $(hwloc-calc -N numa all) NUMA node(s); plugstack: $(cat "$DIR/plugstack.conf")"
banner "srun -n2 --gpus-per-task=1  (no --numa-binding: Slurm's own placement)"
show_tasks -n2 --gpus-per-task=1
for mode in node socket exclusive core-complex; do
  banner "srun -n2 --gpus-per-task=1 --numa-binding=$mode,verbose"
  show_tasks -n2 --gpus-per-task=1 --numa-binding=$mode,verbose
done

echo "required $DIR/spank_numabind.so topology=$DIR/two-socket.xml mem=none" >"$DIR/plugstack.conf"
banner "two-socket view of the same CPUs (GPU 0 on NUMA 1, GPU 1 on NUMA 0): --numa-binding=node,verbose"
show_tasks -n2 --gpus-per-node=2 --numa-binding=node,verbose

banner "a bad value is refused before launch"
srun -n1 --numa-binding=fastest true || true
banner "done: the cluster in $DIR is stopped and removed"
