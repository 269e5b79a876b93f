#!/bin/bash
# shellcheck disable=SC2317  # helpers (rc, row, ...) are called from the strings check eval's
# End-to-end tests of the numabind command on this machine (real affinity and
# memory policy, read back from /proc), on generated GPU nodes (gen_topology.py --preset;
# expected values from hwloc-calc) and, where it is, on the recorded corpus.
# Usage: cli_test.sh NUMABIND_BINARY CORPUS_DIR GEN_TOPOLOGY_PY
#   CORPUS_DIR: the recorded topologies ($NUMABIND_TOPOLOGY_CORPUS wins); without them the
#   corpus checks are skipped with one line and the rest still runs.
set -u
NB=$1
CORPUS=${NUMABIND_TOPOLOGY_CORPUS:-$2}
GEN=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"

# Generated nodes used below (each check takes its expected values from hwloc-calc).
for preset in nps4 mi300a-tpx workstation; do
  python3 "$GEN" --preset "$preset" -o "$WORK/$preset.xml" 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "gen_topology.py --preset $preset"; }
done

# Runs numabind, keeping stdout, stderr and the exit status.
nb() { "$NB" "$@" >"$WORK/out" 2>"$WORK/err"; echo $? >"$WORK/rc"; }
rc() { cat "$WORK/rc"; }
one_line_error() { [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -q -- "$1" "$WORK/err"; }

# ---- bad input: one line naming the value and the choices, exit 2 ----
nb run --mode cores -- true
check "bad --mode exits 2 naming value and choices" eval '[ $(rc) = 2 ] && one_line_error "cores" && grep -q "node, socket, exclusive, core-complex" "$WORK/err"'
nb run --mem local -- true
check "bad --mem exits 2 naming choices" eval '[ $(rc) = 2 ] && one_line_error "local" && grep -q "prefer, bind, interleave, none" "$WORK/err"'
nb run --fallback maybe -- true
check "bad --fallback exits 2" eval '[ $(rc) = 2 ] && one_line_error "maybe"'
nb run --frobnicate -- true
check "unknown flag exits 2" eval '[ $(rc) = 2 ] && one_line_error "frobnicate"'
# An unknown verb is named, with the verbs --help lists (an independent list).
nb dance
verbs=$("$NB" --help | awk 'tolower($0) ~ /^subcommands:/{on=1; next} on && !NF {on=0} on {print $1}' | paste -sd, | sed 's/,/, /g')
check "unknown verb exits 2 naming it and the verbs" eval '[ $(rc) = 2 ] && [ -n "$verbs" ] && one_line_error "unknown command '"'"'dance'"'"' (valid: $verbs)"'
nb
check "no verb exits 2 naming the verbs" eval '[ $(rc) = 2 ] && one_line_error "no command given (valid: $verbs)"'
# A PU or NUMA node without os_index (hwloc and lstopo accept it) is refused by name.
if python3 "$GEN" -o "$WORK/gen.xml" --gpu machine 2>/dev/null; then
  sed -E '/type="PU"/ s/ os_index="[0-9]+"//' "$WORK/gen.xml" >"$WORK/no-pu-os-index.xml"
  sed -E '/type="NUMANode"/ s/ os_index="[0-9]+"//' "$WORK/gen.xml" >"$WORK/no-node-os-index.xml"
  lstopo --input "$WORK/no-pu-os-index.xml" --of xml - >/dev/null 2>&1 && hwloc_ok=1 || hwloc_ok=0
  nb topo --topology "$WORK/no-pu-os-index.xml"
  check "PU without os_index: one-line error naming it (hwloc accepted the file: $hwloc_ok)" eval '[ $(rc) = 1 ] && one_line_error "PU L#0 has no os_index"'
  nb plan --mode node --ntasks 1 --topology "$WORK/no-node-os-index.xml"
  check "NUMA node without os_index: one-line error naming it" eval '[ $(rc) = 1 ] && one_line_error "NUMANode L#0 has no os_index"'
fi
nb plan --mode node --ntasks x
check "bad --ntasks exits 2" eval '[ $(rc) = 2 ] && one_line_error "x"'
nb plan --mode node
check "missing --ntasks exits 2" eval '[ $(rc) = 2 ] && one_line_error "ntasks"'
nb topo --device-match zz
check "bad --device-match exits 2" eval '[ $(rc) = 2 ] && one_line_error "zz" && grep -q "VVVV" "$WORK/err"'
nb plan --mode node --ntasks 1 --allowed-cpus 0-x --topology "$WORK/nps4.xml"
check "bad --allowed-cpus exits 2" eval '[ $(rc) = 2 ] && one_line_error "0-x"'
nb topo --topology "$WORK/missing.xml"
check "missing topology file: one-line error, exit 1" eval '[ $(rc) = 1 ] && one_line_error "missing.xml"'
echo "not xml" >"$WORK/bad.xml"
nb topo --topology "$WORK/bad.xml"
check "garbage topology file: one-line error, exit 1" eval '[ $(rc) = 1 ] && one_line_error "bad.xml"'
nb run -- true
check "run without rank source or accelerator fails clearly" eval '[ $(rc) = 1 ] && grep -q "local rank\|accelerator" "$WORK/err"'
nb run --mode node
check "run without program exits 2" eval '[ $(rc) = 2 ] && one_line_error "PROGRAM"'

# ---- no accelerator on this machine: a message, not a crash ----
nb topo
check "topo without accelerators says so, exit 0" eval '[ $(rc) = 0 ] && grep -q "no accelerator found" "$WORK/out"'
nb plan --mode exclusive --ntasks 2
check "plan without accelerators: clear error" eval '[ $(rc) = 1 ] && one_line_error "no accelerator"'
nb run --local-rank 0 --ntasks 1 --mode node -- true
check "run without accelerators fails (fallback fail)" eval '[ $(rc) = 1 ] && grep -q "no accelerator" "$WORK/err"'
nb run --local-rank 0 --ntasks 1 --mode node --fallback warn -- sh -c 'echo ran; echo "mode=$NUMABIND_MODE"'
check "run --fallback warn runs the program unbound" eval '[ $(rc) = 0 ] && grep -q "^ran" "$WORK/out" && grep -q "mode=none" "$WORK/out" && grep -q "running unbound" "$WORK/err"'

# ---- plan --json / topo --json on generated nodes ----
nb plan --topology "$WORK/nps4.xml" --mode exclusive --ntasks 8 --json
bus1=0000:44:00.0  # the second GPU of nps4 in PCI order; its node from hwloc-calc
node1=$(hwloc-calc --input "$WORK/nps4.xml" pci=$bus1 -p -I numa)
check "plan --json has exactly the documented shape" eval '[ $(rc) = 0 ] && python3 - "$WORK/out" "$bus1" "$node1" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert list(d) == ["mode", "tasks", "warnings"], list(d)
assert d["mode"] == "exclusive"
assert len(d["tasks"]) == 8
for r, t in enumerate(d["tasks"]):
    assert list(t) == ["local_rank", "device", "devices", "cpus", "mems", "mem_policy", "nics", "warnings"], list(t)
    assert t["devices"] == [t["device"]["index"]], t
    assert t["local_rank"] == r
    assert set(t["device"]) == {"index", "pci"} and len(t["device"]["pci"]) == 12
    assert t["cpus"] == sorted(t["cpus"]) and t["mem_policy"] == "prefer"
assert d["tasks"][1]["device"] == {"index": 1, "pci": sys.argv[2]} and d["tasks"][1]["mems"] == [int(sys.argv[3])], d["tasks"][1]
PY'
nb topo --topology "$WORK/mi300a-tpx.xml" --json
tpx_homes=$(for d in 0000 0001 0002 0003; do hwloc-calc --input "$WORK/mi300a-tpx.xml" pci=$d:02:00.0 -p -I numa; done | paste -sd' ')
check "topo --json lists 12 MI300A partitions, 3 per APU, on the APUs' nodes ($tpx_homes)" eval '[ $(rc) = 0 ] && python3 - "$WORK/out" $tpx_homes <<PY
import json, sys
d = json.load(open(sys.argv[1]))["accelerators"]
homes = [int(h) for h in sys.argv[2:]]
assert len(d) == 12, len(d)
assert [a["home_nodes"] for a in d] == [[n] for n in homes for _ in range(3)], [a["home_nodes"] for a in d]
assert all(a["partition"]["count"] == 3 for a in d)
PY'
npus=$(hwloc-calc --input "$WORK/workstation.xml" -N pu all)
nb plan --topology "$WORK/workstation.xml" --mode exclusive --ntasks $((npus + 1))
check "more tasks than PUs: one-line error" eval '[ $(rc) = 1 ] && one_line_error "PU"'

# ---- the same on recorded servers, where the corpus is ----
if [ -f "$CORPUS/expected_gpu_locality.json" ]; then
  nb plan --topology "$CORPUS/psmgmt_topo.jwb0001.xml" --mode exclusive --ntasks 8 --json
  # INDEX: 0000:44:00.0 is on NUMA 1 and is the second GPU in PCI order
  check "corpus: plan --json on JUWELS Booster" eval '[ $(rc) = 0 ] && python3 - "$WORK/out" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["tasks"]) == 8
assert d["tasks"][1]["device"] == {"index": 1, "pci": "0000:44:00.0"} and d["tasks"][1]["mems"] == [1]
PY'
  # Fewer tasks than GPUs: blocks of GPUs in PCI order, homes = the union of their nodes
  # (INDEX: 03:00 on NUMA 3, 44:00 on 1, 84:00 on 7, c4:00 on 5).
  nb plan --topology "$CORPUS/psmgmt_topo.jwb0001.xml" --mode node --ntasks 2 --json
  check "corpus: plan --json: two tasks own two GPUs each, on both their nodes" eval '[ $(rc) = 0 ] && nb_python - "$WORK/out" "$(hwloc-calc --input "$CORPUS/psmgmt_topo.jwb0001.xml" --po -I pu --pi numa:1 numa:3)" <<PY
import json, sys
from cpulist import ids
d = json.load(open(sys.argv[1]))
t = d["tasks"]
assert [x["devices"] for x in t] == [[0, 1], [2, 3]], [x["devices"] for x in t]
assert t[0]["device"]["index"] == 0 and t[0]["mems"] == [1, 3] and t[1]["mems"] == [5, 7], t
want = ids(sys.argv[2])
assert set(t[0]["cpus"]) == want, (t[0]["cpus"], sorted(want))
PY'
  nb topo --topology "$CORPUS/flux-core_tuo.TPX.xml" --json
  check "corpus: topo --json lists 12 MI300A partitions on 4 nodes (Tuolumne TPX)" eval '[ $(rc) = 0 ] && python3 - "$WORK/out" <<PY
import json, sys
d = json.load(open(sys.argv[1]))["accelerators"]
assert len(d) == 12, len(d)
assert [a["home_nodes"] for a in d] == [[n] for n in range(4) for _ in range(3)]
assert all(a["partition"]["count"] == 3 for a in d)
PY'
  nb plan --topology "$CORPUS/hwloc_nvidiaDGX2.xml" --mode exclusive --ntasks 16
  check "corpus: more tasks than PUs on the trimmed DGX-2: one-line error" eval '[ $(rc) = 1 ] && one_line_error "PU"'
else
  skip_case "corpus checks: recorded topology corpus not found at '$CORPUS': set NUMABIND_TOPOLOGY_CORPUS to the directory of its INDEX.md and expected_gpu_locality.json"
fi

# ---- real binding on this machine, with an XML of it plus two fake GPUs ----
python3 "$GEN" -o "$WORK/this.xml" --gpu package:0 --gpu package:0 >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "gen_topology"; }
NCORES=$(hwloc-calc -N core all)
for r in 0 1; do
  expect=$(hwloc-calc --po -I pu core:$((r % NCORES)) | tr , '\n' | sort -n | paste -sd,)
  nb run --topology "$WORK/this.xml" --mode exclusive --ntasks 2 --local-rank $r --mem bind -- \
     sh -c 'grep Cpus_allowed_list /proc/self/status; grep -c " bind:0 " /proc/self/numa_maps; echo "dev=$NUMABIND_DEVICE cpus=$NUMABIND_CPUS mems=$NUMABIND_MEMS"'
  got=$(awk '/Cpus_allowed_list/{print $2}' "$WORK/out")
  got_sorted=$(cpu_list "$got")
  if [ "$NCORES" -ge 2 ]; then
    check "run exclusive rank $r: kernel affinity = core $r ($expect)" eval '[ $(rc) = 0 ] && [ "$got_sorted" = "$expect" ]'
  fi
  check "run rank $r: mem=bind visible in numa_maps, env exported" eval '[ "$(sed -n 2p "$WORK/out")" -gt 0 ] && grep -q "dev=$r .*mems=0" "$WORK/out"'
done
if [ "$NCORES" -ge 2 ]; then
  # A launcher's default pinning (mpirun --bind-to core, Slurm task/affinity) is replaced:
  # the allowed set is the cpuset, not the current affinity.
  first=$(hwloc-calc --po -I pu core:0)
  expect=$(hwloc-calc --po -I pu core:1)
  taskset -c "$first" "$NB" run --topology "$WORK/this.xml" --mode exclusive --ntasks 2 --local-rank 1 -- \
     grep Cpus_allowed_list /proc/self/status >"$WORK/out" 2>"$WORK/err"
  check "launcher pinning is replaced, not intersected" eval 'grep -q "Cpus_allowed_list:[[:space:]]*$expect\$" "$WORK/out"'
fi
nb run --topology "$WORK/this.xml" --mode node --local-rank 1 --ntasks 2 --mem interleave -v -- "$NB" show --json --topology "$WORK/this.xml"
check "show inside run reports the binding and the device" eval '[ $(rc) = 0 ] && python3 - "$WORK/out" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"]["index"] == 1 and d["device"]["source"] == "NUMABIND_DEVICES", d["device"]
assert d["devices"] == [1], d["devices"]
assert d["mem_policy"] == "interleave" and d["mem_nodes"] == [0], d
assert d["warnings"] == [], d["warnings"]
PY'
check "run --verbose names the sources" eval 'grep -q "local rank 1 from --local-rank" "$WORK/err" && grep -q "topology: $WORK/this.xml" "$WORK/err"'
SLURM_LOCALID=1 SLURM_STEP_TASKS_PER_NODE=2 nb run --topology "$WORK/this.xml" --mode exclusive -v -- true
check "local rank and count from SLURM_LOCALID/SLURM_STEP_TASKS_PER_NODE" eval '[ $(rc) = 0 ] && grep -q "local rank 1 from SLURM_LOCALID, local tasks 2 from SLURM_STEP_TASKS_PER_NODE" "$WORK/err"'
CUDA_VISIBLE_DEVICES=1 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1 nb run --topology "$WORK/this.xml" --mode node -- sh -c 'echo "dev=$NUMABIND_DEVICE"'
check "CUDA_VISIBLE_DEVICES picks the device" eval '[ $(rc) = 0 ] && grep -q "dev=1" "$WORK/out"'
CUDA_VISIBLE_DEVICES=5 nb run --topology "$WORK/this.xml" --local-rank 0 -- true
check "out-of-range CUDA_VISIBLE_DEVICES: exit 2 naming it" eval '[ $(rc) = 2 ] && one_line_error "CUDA_VISIBLE_DEVICES"'
nb run --topology "$WORK/this.xml" --mode exclusive --ntasks 3 --local-rank 0 -- true
if [ "$(hwloc-calc -N pu all)" -lt 3 ]; then
  check "impossible exclusive split fails with fallback=fail" eval '[ $(rc) = 1 ] && grep -q "exclusive binding impossible" "$WORK/err"'
  nb run --topology "$WORK/this.xml" --mode exclusive --ntasks 3 --local-rank 0 --fallback warn -- sh -c 'echo ran'
  check "impossible split runs unbound with fallback=warn" eval '[ $(rc) = 0 ] && grep -q ran "$WORK/out" && grep -q "running unbound" "$WORK/err"'
fi
# show outside numabind: placement of a launcher-pinned process, with a mismatch warning
# when the process sits on CPUs its GPU is not local to (a split-NUMA XML makes one here).
if [ "$NCORES" -ge 2 ]; then
  python3 "$GEN" -o "$WORK/split.xml" --split-numa 2 --gpu numa:1 >/dev/null 2>&1
  first=$(hwloc-calc --po -I pu core:0)
  CUDA_VISIBLE_DEVICES=0 nb run --topology "$WORK/split.xml" --mode none --local-rank 0 -- taskset -c "$first" "$NB" show --topology "$WORK/split.xml"
  check "show warns when CPUs and device NUMA node differ" eval '[ $(rc) = 0 ] && grep -q "warning: CPUs .* include NUMA node 0 but device(s) 0 are on node(s) 1" "$WORK/out"'
fi

# --cpus-per-task: no task gets fewer CPUs than asked; its GPU's node first, then
# the nearest node. Expected sets from hwloc-calc on the generated XML.
python3 "$GEN" -o "$WORK/c4.xml" --split-numa 2 --gpu numa:0 >/dev/null 2>&1
if [ -s "$WORK/c4.xml" ] && [ "$(hwloc-calc -i "$WORK/c4.xml" -N pu numa:0)" -ge 1 ]; then
  node0=$(hwloc-calc -i "$WORK/c4.xml" --po -I pu numa:0); all=$(hwloc-calc -i "$WORK/c4.xml" --po -I pu all)
  need=$(($(hwloc-calc -i "$WORK/c4.xml" -N pu numa:0) + 1))
  nb plan --topology "$WORK/c4.xml" --mode node --ntasks 1 --allowed-cpus "$all" --cpus-per-task "$need" --json
  got=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["tasks"][0]["cpus"])))' "$WORK/out" 2>/dev/null)
  check "plan --cpus-per-task beyond the GPU's node: its node, then the nearest ($got)" eval '[ $(rc) = 0 ] && [ "$got" = "$all" ]'
  nb plan --topology "$WORK/c4.xml" --mode node --ntasks 1 --allowed-cpus "$all" --cpus-per-task 1 --json
  got=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["tasks"][0]["cpus"])))' "$WORK/out" 2>/dev/null)
  check "plan --cpus-per-task that fits: the GPU's node only ($got)" eval '[ $(rc) = 0 ] && [ "$got" = "$node0" ]'
  nb plan --topology "$WORK/c4.xml" --mode node --ntasks 1 --cpus-per-task 0
  check "bad --cpus-per-task exits 2 naming it" eval '[ $(rc) = 2 ] && one_line_error "cpus-per-task"'
  SLURM_CPUS_PER_TASK=x nb run --topology "$WORK/c4.xml" --local-rank 0 -- true
  check "bad SLURM_CPUS_PER_TASK under run: exit 2 naming it" eval '[ $(rc) = 2 ] && one_line_error "SLURM_CPUS_PER_TASK"'
fi

finish
