#!/usr/bin/env bash
# tests/slurm/check_cluster_test.sh — `numabind check` run by srun as a job on the local
# cluster (tests/slurm/cluster.sh): slurm.conf from SLURM_CONF, the node name from Slurm
# (SLURMD_NODENAME), the plugstack line from PlugStackConfig, with the plugin really loaded
# by srun and slurmstepd. The cluster's 2 fake GPUs are char devices 195:200 and 195:201;
# a fake procfs (fake_node_tree.py) names those minors for the 2 GPUs of a generated
# topology, gres.conf lists them out of PCI order (--gres-order 1,0), ConstrainDevices=yes.
# Expected values come from the cluster's own files (gres.conf, stat of the device nodes).
#   check_cluster_test.sh NUMABIND PATH/spank_numabind.so FAKE_NODE_TREE_PY
# Exit 0 passed, 1 failed, 77 skipped (not root, no Slurm).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NB=$1
FAKE=$3
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/plugin_test_env.sh" "$2" srun hwloc-calc
D=$(mktemp -d /tmp/nbcheck.XXXXXX); chmod 0755 "$D"
cleanup() { cluster_stop "$D/c"; [ "$failures" = 0 ] && rm -rf "$D" || echo "kept $D"; }
trap cleanup EXIT
on_fail() { show "$D/out" 50; show "$D/err" 10 err; }   # check's report, its stderr
row() { grep -E -q -- "^$1 +$2  +.*$3.*  .*${4:-}" "$D/out"; }

install_plugin "$D"
# The machine's own GPU tools and NVML must not answer for the fake GPUs.
mkdir -p "$D/bin"
for t in nvidia-smi rocm-smi; do printf '#!/bin/sh\nexit 1\n' >"$D/bin/$t"; chmod 0755 "$D/bin/$t"; done
export PATH=$D/bin:$PATH NUMABIND_CHECK_NVML=$D/no-nvml.so
cp "$NB" "$D/numabind"; chmod 0755 "$D/numabind"
python3 "$GEN" -o "$D/node.xml" --synthetic "pack:2 [numa] core:2 pu:1" --gpu numa:0 --gpu numa:1 >/dev/null || exit 1
python3 "$FAKE" "$D/node.xml" "$D/root" --minors 200,201 --facts "$D/facts.json" || exit 1
python3 "$FAKE" "$D/node.xml" "$D/root-noinfo" --no-info 0,1 || exit 1
chmod -R a+rX "$D"
echo "required $D/spank_numabind.so default=node device_files=$D/c/dev/%n/nvidia0,$D/c/dev/%n/nvidia1" >"$D/plugstack.conf"
cluster_start "$D/start.log" "$D/c" --plugstack "$D/plugstack.conf" --constrain-devices --gpus 2 --gres-order 1,0 || exit 1

# The facts of the cluster's files: gres.conf's File= order, each file's minor.
gres_files=$(sed -n 's/^NodeName=n1 Name=gpu File=//p' "$D/c/gres.conf" | paste -sd' ')
first_minor=$(stat -c %T "${gres_files%% *}")   # hex minor of gres index 0
pci_of_minor() { python3 -c "import json,sys; print([g['pci'] for g in json.load(open(sys.argv[1]))['gpus'] if g['minor']==int(sys.argv[2])][0])" "$D/facts.json" "$1"; }

timeout 60 srun -N1 -n1 --gres=gpu:2 env NUMABIND_CHECK_ROOT="$D/root" "$D/numabind" check --topology "$D/node.xml" >"$D/out" 2>"$D/err"
rc=$?
check "srun numabind check: exit 0 (WARNs only)" eval '[ $rc = 0 ]'
check "slurm.conf from SLURM_CONF, TaskPlugin from it" eval "row OK slurm slurm.conf '$D/c/slurm.conf' && row OK slurm TaskPlugin \"$(sed -n 's/^TaskPlugin=//p' "$D/c/slurm.conf")\""
check "ConstrainDevices=yes from cgroup.conf" eval 'row OK slurm ConstrainDevices "yes \\("'
check "gres.conf for node n1 (Slurm's SLURMD_NODENAME) not in PCI order: WARN" \
  eval "row WARN slurm 'gres.conf order' 'not in PCI order.*${gres_files%% *} = $(pci_of_minor $((16#$first_minor)))'"
check "plugstack line found through PlugStackConfig, parsed, engine beside it" \
  eval "row OK plugstack line '$D/plugstack.conf:1: required' && row OK plugstack arguments 'default=node' && row OK plugstack 'step engine'"
check "device_files= (%n = n1) each match their GPU by device number" \
  eval "row OK plugstack 'device_files\\[0\\]' 'char 195:200' && row OK plugstack 'device_files\\[1\\]' 'char 195:201'"
check "listed device files: open() per task" eval 'row OK "device files" "GPU rule" "open\\(\\)"'

srun --help >"$D/out" 2>&1
check "srun --help: --numa-binding says a site default may apply and names man spank_numabind" \
  eval 'tr -s " \n" " " <"$D/out" | grep -q -- "--numa-binding.*site default may apply.*man spank_numabind"'

echo "required $D/spank_numabind.so default=node" >"$D/plugstack.conf"
timeout 60 srun -N1 -n1 env NUMABIND_CHECK_ROOT="$D/root-noinfo" "$D/numabind" check --topology "$D/node.xml" >"$D/out" 2>"$D/err"
check "no device files + gres.conf out of PCI order: the shared-list rule, WARN" \
  eval 'row WARN "device files" "GPU rule" "2 of 2 device files unknown"'

finish
