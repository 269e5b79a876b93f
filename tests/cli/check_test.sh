#!/bin/bash
# shellcheck disable=SC2317  # helpers (rc, row, ...) are called from the strings check eval's
# `numabind check` on fake node trees (NUMABIND_CHECK_ROOT): a DGX-A100-like node generated
# by gen_topology.py, its sysfs/procfs/etc/dev tree written by fake_node_tree.py from hwloc-calc
# on the same XML. Expected values come from that tree's facts (fake_node_tree.py --facts),
# never from numabind's output. A few seconds.
# Usage: check_test.sh NUMABIND GEN_TOPOLOGY_PY FAKE_NODE_TREE_PY
set -u
NB=$1
GEN=$2
FAKE=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
on_fail() { show "$WORK/out" 60; }   # the report check gave

python3 "$GEN" --preset dgx-a100 -o "$WORK/dgx.xml" || { fail "gen_topology.py --preset dgx-a100"; finish; }
python3 "$GEN" --preset nps4 -o "$WORK/nps4.xml" || { fail "gen_topology.py --preset nps4"; finish; }

# A plugin directory: the front and the engine as regular files (check only looks at them).
mkdir -p "$WORK/plug" "$WORK/noengine" "$WORK/bin"
touch "$WORK/plug/spank_numabind.so" "$WORK/plug/numabind_stepd.so" "$WORK/noengine/spank_numabind.so"
chmod 0755 "$WORK/plug/"*.so "$WORK/noengine/"*.so
PLUG=$WORK/plug/spank_numabind.so

# The machine's own GPU tools must not answer for a fake tree: stubs that find nothing,
# replaced by fake_node_tree.py's nvidia-smi where a case wants one; no real NVML.
stub_tools() {
  for t in nvidia-smi rocm-smi; do printf '#!/bin/sh\nexit 1\n' >"$WORK/bin/$t"; chmod 0755 "$WORK/bin/$t"; done
}
stub_tools
export NUMABIND_CHECK_NVML=$WORK/no-nvml.so

# tree NAME [fake_node_tree.py options]: ROOT=$WORK/NAME, facts in $WORK/NAME.json
tree() {
  local name=$1; shift
  python3 "$FAKE" "$WORK/dgx.xml" "$WORK/$name" --facts "$WORK/$name.json" --calc-cache "$WORK/calc.json" "$@" || fail "fake_node_tree.py $name"
}
# nb ROOT [check options]: the report in $WORK/out, exit status in $WORK/rc
nb() {
  local root=$1; shift
  env SLURMD_NODENAME=fake1 NUMABIND_CHECK_ROOT="$root" NUMABIND_TOPOLOGY_CACHE="$WORK/cache" \
    SLURM_CONF="$root/etc/slurm/slurm.conf" PATH="$WORK/bin:$PATH" \
    "$NB" check --topology "$WORK/dgx.xml" "$@" >"$WORK/out" 2>"$WORK/err"
  echo $? >"$WORK/rc"
}
rc() { cat "$WORK/rc"; }
# row STATUS AREA ITEM_REGEX [DETAIL_REGEX]: a table row with that status (and, unless OK,
# its fix on the next line). Columns are separated by two or more blanks.
row() {
  local line
  line=$(grep -E -n -m1 -- "^$1 +$2  +.*$3.*  .*${4:-}" "$WORK/out") || return 1
  [ "$1" = OK ] && return 0
  sed -n "$((${line%%:*} + 1))p" "$WORK/out" | grep -q '^ *fix: '
}
# facts NAME: shell variables from the tree's facts (what fake_node_tree.py wrote):
# char (True/False), pci_I, numa_I, cpus_I, minor_I per GPU in PCI order, files_swapped, files
facts() {
  eval "$(python3 - "$WORK/$1.json" "$WORK/$1" <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))
print("char=%s" % f["char_devices"])
for i, g in enumerate(f["gpus"]):
    print("pci_%d=%s numa_%d=%s cpus_%d=%s minor_%d=%s" % (i, g["pci"], i, g["numa"], i, g["cpus"], i, g["minor"]))
m = [g["minor"] for g in f["gpus"]]
print("files=" + ",".join(sys.argv[2] + "/dev/nvidia%d" % x for x in m))
m[0], m[1] = m[1], m[0]
print("files_swapped=" + ",".join(sys.argv[2] + "/dev/nvidia%d" % x for x in m))
EOF
)"
}

# ---- a good node: every comparison agrees ----
tree good --nvidia-smi "$WORK/bin/nvidia-smi"
facts good
nb "$WORK/good" --json --plugstack "required $PLUG default=exclusive fallback=warn"
check "good node, --json: exit 0, no FAIL, 8 GPUs in the rows" \
  eval '[ $(rc) = 0 ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j[\"summary\"][\"fail\"] != 0 or j[\"exit_status\"] != 0 or sum(r[\"item\"].endswith(\" home\") for r in j[\"rows\"]) != 8)" "$WORK/out"'
nb "$WORK/good" --plugstack "required $PLUG default=exclusive fallback=warn"
check "good node: numabind's 8 GPUs are sysfs's (NVSwitches, NICs not counted)" eval 'row OK accelerators "list vs sysfs" "8 PCI function"'
ok_homes=1
for i in 0 1 2 3 4 5 6 7; do
  eval "pci=\$pci_$i numa=\$numa_$i cpus=\$cpus_$i minor=\$minor_$i"
  row OK accelerators "GPU $i \\($pci\\) home" "NUMA $numa, CPUs $cpus\$" || ok_homes=0
  row OK "device files" "GPU $i \\($pci\\)" "/dev/nvidia$minor \\(NVIDIA Device Minor" || ok_homes=0
done
check "good node: each GPU's home is hwloc-calc's NUMA node and CPUs, its device file the Device Minor" eval '[ $ok_homes = 1 ]'
check "good node: nvidia-smi topo -m agrees" eval 'row OK accelerators "nvidia-smi" "all 8 GPU"'
check "good node: all device files known -> open() per task" eval 'row OK "device files" "GPU rule" "open\\(\\)"'
check "good node: gres.conf in PCI order" eval 'row OK slurm "gres.conf order" "in PCI order: /dev/nvidia$minor_0 = $pci_0"'
check "good node: TaskPlugin, NUMA nodes, cgroup v2, preferred-many" eval 'row OK slurm TaskPlugin && row OK kernel "NUMA nodes" "8 node" && row OK kernel cgroup "v2 \\(unified\\)" && row OK kernel preferred-many "6.1.0-fake"'
check "good node: plugstack arguments parsed by the plugin's parser" eval 'row OK plugstack arguments "default=exclusive mem=prefer fallback=warn"'
nb "$WORK/good" --plugstack "required $PLUG default=node smt=1 omp=yes ucx=yes"
check "plugstack smt=, omp=, ucx= parsed by the plugin's parser" eval 'row OK plugstack arguments "default=node .* smt=1 omp=yes ucx=yes"'
nb "$WORK/good" --plugstack "required $PLUG default=node smt=2"
check "plugstack smt=2: FAIL naming the value and the choices" eval '[ $(rc) = 1 ] && row FAIL plugstack arguments "invalid value .2. for smt \\(valid: 1, all\\)"'
nb "$WORK/good" --plugstack "required $PLUG default=exclusive fallback=warn"
# The loader's rule is slurmstepd's, as root: files of a non-root runner are not root's.
if [ "$(id -u)" = 0 ]; then
  check "good node: engine beside the plugin" eval 'row OK plugstack "step engine" "numabind_stepd.so \\(uid 0, mode 0755\\)"'
else
  skip_case "the engine-accepted case needs root-owned files (run as root)"
fi

# ---- NVML's CPU affinity, from a stand-in libnvidia-ml.so.1 fed hwloc-calc's local CPUs ----
if command -v cc >/dev/null && cc -shared -fPIC -o "$WORK/libnvidia-ml.so.1" "$(dirname "$0")/fake_nvml.c" 2>"$WORK/err"; then
  affinity=""
  for i in 0 1 2 3 4 5 6 7; do eval "affinity+=\"\$pci_$i=\$cpus_$i;\""; done
  NUMABIND_CHECK_NVML=$WORK/libnvidia-ml.so.1 FAKE_NVML_AFFINITY=$affinity nb "$WORK/good"
  check "NVML CPU affinity agrees" eval 'row OK accelerators "NVML CPU affinity" "all 8 GPU"'
  NUMABIND_CHECK_NVML=$WORK/libnvidia-ml.so.1 FAKE_NVML_AFFINITY=${affinity/$cpus_0/$cpus_2} nb "$WORK/good"
  check "NVML CPU affinity of GPU 0 elsewhere: FAIL naming it" eval '[ $(rc) = 1 ] && row FAIL accelerators "NVML CPU affinity" "$pci_0: NVML $cpus_2"'
else
  skip_case "NVML cases: no C compiler"
fi

# ---- the table form: one row per line, the fix below, exit status the same ----
nb "$WORK/good" --plugstack "required $WORK/noengine/spank_numabind.so"
check "missing engine: FAIL with its fix, exit 1" eval '[ $(rc) = 1 ] && row FAIL plugstack "step engine" "cannot find the step engine .*/noengine/numabind_stepd.so" && grep -q "^ *fix: install numabind_stepd.so" "$WORK/out"'
chmod 0775 "$WORK/plug/numabind_stepd.so"
nb "$WORK/good" --plugstack "required $PLUG"
check "engine writable by group: FAIL" eval '[ $(rc) = 1 ] && row FAIL plugstack "step engine" "writable by group"'
chmod 0755 "$WORK/plug/numabind_stepd.so"

# ---- device_files= in the wrong order ----
if [ "$char" = True ]; then
  nb "$WORK/good" --plugstack "required $PLUG default=exclusive device_files=$files_swapped"
  check "device_files= with entries 0 and 1 swapped: FAIL on both, naming the GPU each file belongs to, exit 1" \
    eval '[ $(rc) = 1 ] && row FAIL plugstack "device_files\\[0\\]" "file of GPU 1 \\($pci_1\\)" && row FAIL plugstack "device_files\\[1\\]" "file of GPU 0" && row OK plugstack "device_files\\[2\\]"'
  nb "$WORK/good" --plugstack "required $PLUG device_files=$files"
  check "device_files= in PCI order: every entry matches, exit 0" eval '[ $(rc) = 0 ] && row OK plugstack "device_files\\[7\\]" && ! row FAIL plugstack "device_files"'
else
  skip_case "device_files order cases: mknod of character devices not allowed here (not root)"
fi
nb "$WORK/good" --plugstack "required $PLUG device_files=/dev/nvidia0,/dev/nvidia1"
check "device_files= with 2 entries for 8 GPUs: FAIL" eval '[ $(rc) = 1 ] && row FAIL plugstack "device_files= count" "2 file\\(s\\) for 8"'

# ---- typos in a required line ----
nb "$WORK/good" --plugstack "required $PLUG defualt=exclusive"
check "unknown argument: FAIL with the plugin's own message and what it means" \
  eval '[ $(rc) = 1 ] && row FAIL plugstack arguments "unknown argument .defualt=exclusive.*every srun and sbatch stops"'
nb "$WORK/good" --plugstack "required $PLUG default=exclusiv"
check "bad mode: FAIL naming the value and the modes" eval '[ $(rc) = 1 ] && row FAIL plugstack arguments "exclusiv.*node, socket, exclusive, core-complex"'
nb "$WORK/good" --plugstack "requird $PLUG"
check "bad control word: FAIL" eval '[ $(rc) = 1 ] && row FAIL plugstack line "requird.*valid: required, optional"'
nb "$WORK/good" --plugstack "required $WORK/none/spank_numabind.so"
check "required plugin missing: FAIL" eval '[ $(rc) = 1 ] && row FAIL plugstack plugin "does not exist: every srun and sbatch fails"'

# ---- topology= of the plugstack line ----
nb "$WORK/good" --plugstack "required $PLUG topology=$WORK/dgx.xml"
check "topology= of this node: loads and matches" eval 'row OK plugstack "topology=" "loads, and matches"'
nb "$WORK/good" --plugstack "required $PLUG topology=$WORK/nps4.xml"
check "topology= of another node: FAIL" eval '[ $(rc) = 1 ] && row FAIL plugstack "topology=" "differs from this node"'
nb "$WORK/good" --plugstack "required $PLUG topology=$WORK/missing-%n.xml"
check "topology= missing (%n expanded): FAIL" eval '[ $(rc) = 1 ] && row FAIL plugstack "topology=" "missing-fake1.xml"'

# ---- plugstack.conf with an include glob ----
mkdir -p "$WORK/good/etc/slurm/plugstack.conf.d"
echo "include $WORK/good/etc/slurm/plugstack.conf.d/*.conf" >"$WORK/good/etc/slurm/plugstack.conf"
echo "optional $PLUG default=node # site default" >"$WORK/good/etc/slurm/plugstack.conf.d/numabind.conf"
nb "$WORK/good"
check "plugstack.conf beside slurm.conf, include followed" eval 'row OK plugstack line "numabind.conf:1: optional" && row OK plugstack arguments "default=node"'

# ---- the firmware, the kernel and the tools disagree ----
tree nonuma --numa 2=-1 --kernel 5.10.0-fake
nb "$WORK/nonuma"
check "GPU whose firmware reports no NUMA node: WARN" eval 'row WARN accelerators "GPU 2 .* home" "no NUMA node"'
check "kernel older than 5.15: preferred-many WARN" eval 'row WARN kernel preferred-many "5.10.0"'
tree wrongnuma --numa 0=$numa_2 --nvidia-smi "$WORK/bin/nvidia-smi"
nb "$WORK/wrongnuma"
check "sysfs puts GPU 0 on another node: FAIL, and nvidia-smi disagrees too" eval '[ $(rc) = 1 ] && row FAIL accelerators "GPU 0 .* home" && row FAIL accelerators "nvidia-smi" "GPU0"'
stub_tools

# ---- gres.conf out of PCI order; which GPU rule that leaves ----
tree gres --gres-order 1,0,2,3,4,5,6,7
nb "$WORK/gres"
check "gres.conf out of PCI order: WARN; device files known, so open() per task still" \
  eval '[ $(rc) = 0 ] && row WARN slurm "gres.conf order" "not in PCI order" && row OK "device files" "GPU rule" "open\\(\\)"'
tree gres2 --gres-order 0,1,3,2,4,5,6,7 --no-info 0,1
nb "$WORK/gres2"
check "two device files unknown + gres.conf out of order: gres.conf's files stand in, WARN" \
  eval 'row WARN "device files" "GPU 0 " "no device file found" && row WARN "device files" "GPU rule" "2 of 8 device files unknown.*gres.conf.s File=.*not list the GPUs in PCI order"'
tree gres1 --no-info 5
nb "$WORK/gres1"
check "one device file unknown, gres.conf names one file per GPU: gres.conf's file stands in (the engine's rule)" \
  eval 'row WARN "device files" "GPU rule" "1 of 8 device files unknown.*gres.conf.s File= paths"'
tree gres1a --no-info 5 --autodetect --constrain-devices
nb "$WORK/gres1a"
check "one device file unknown, no gres.conf files, devices constrained: still per device" \
  eval 'row OK "device files" "GPU rule" "7 of 8 device files known.*per device"'
tree gres1b --no-info 5 --autodetect
nb "$WORK/gres1b"
check "device files unknown, devices not constrained: the gres index (the engine's rule)" \
  eval 'row OK "device files" "GPU rule" "Slurm does not constrain devices.*gres index"'
tree auto --autodetect --no-info 0,1
nb "$WORK/auto"
check "AutoDetect=nvml: PCI order, the shared-list rule is right" eval 'row OK slurm "gres.conf order" "AutoDetect=nvml" && row OK "device files" "GPU rule" "right here"'

# ---- a topology= file that hwloc itself dies on (admin input: reported, never fatal) ----
# Expected from lstopo: only where this hwloc crashes on the reproducer (hwloc 2.9 does).
crash_xml=$(cd "$(dirname "$0")/../.." && pwd)/fuzz/known-hwloc-crashes/bitmap-sscanf-assert.xml
if (ulimit -c 0; lstopo --input "$crash_xml" --of xml - >/dev/null 2>&1) 2>/dev/null; then
  skip_case "this hwloc loads $(basename "$crash_xml") (no crash to report)"
else
  (cd "$WORK" && nb "$WORK/good" --plugstack "required $PLUG default=node topology=$crash_xml")
  check "topology= that crashes hwloc: FAIL row saying so, check itself exits 1" \
    eval '[ $(rc) = 1 ] && row FAIL plugstack "topology=" "hwloc crashed loading .*SIGABRT"'
  (cd "$WORK" && "$NB" topo --topology "$crash_xml" >"$WORK/out" 2>"$WORK/err"; echo $? >"$WORK/rc")
  check "topo --topology on it: one line, exit 1, no core file" \
    eval '[ $(rc) = 1 ] && [ $(wc -l <"$WORK/err") = 1 ] && grep -q "hwloc crashed loading" "$WORK/err" && ! ls "$WORK"/core* >/dev/null 2>&1'
fi

# ---- usage ----
nb "$WORK/good" --plugstack "x" --plugstack-file /etc/hosts
check "--plugstack with --plugstack-file: exit 2" eval '[ $(rc) = 2 ]'
nb "$WORK/good" --plugstack-file "$WORK/nowhere.conf"
check "unreadable --plugstack-file: exit 2, one line naming it" eval '[ $(rc) = 2 ] && [ $(wc -l <"$WORK/err") = 1 ] && grep -q nowhere.conf "$WORK/err"'

finish
