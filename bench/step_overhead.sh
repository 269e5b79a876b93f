#!/usr/bin/env bash
# bench/step_overhead.sh — what the SPANK plugin adds to a job step launch, on a private
# local Slurm cluster (tests/slurm/cluster.sh, 1 node, 2 fake GPUs). Root only.
#
#   bench/step_overhead.sh PLUGIN.so OUT_DIR      (run by `cmake --build B --target bench-step`)
#
# Inside ONE allocation (salloc -n2 --gpus-per-node=2; new jobs per srun add 10-20 ms of
# noise) hyperfine times `srun -n2 --gpus-per-node=2 true` steps, switching plugstack.conf
# in --prepare (srun and slurmstepd re-read it for every launch):
#   no plugin            empty plugstack.conf
#   plugin, not asked    plugin loaded (topology=XML), no --numa-binding: default mode none
#   exclusive, XML       plugin, topology=XML with 2 fake GPUs, --numa-binding=exclusive; their
#                        device files are Slurm's (gres.conf File=), as where numabind cannot
#                        verify its own device_files= (fake GPUs have no driver: a device_files=
#                        list would be said unverifiable, one stderr line in every step, which
#                        alone costs srun ~2 ms)
#   exclusive, live      plugin without topology= (devices=class=0x0180,class=0x0200: the
#                        virtio functions stand in for GPUs): slurmstepd discovers the node live
# ROUNDS rounds (default 3, command order reversed every other round, so drift from other
# load on the machine hits all rows alike) of STEPS steps each (default 100) per row.
# Then PAIRED (default 300) interleaved iterations run the rows back to back (order
# rotated), adding "no-op SPANK plugin" (bench/noop_spank.c: what Slurm itself spends on any
# plugin) and "exclusive, --gpus-per-task=1" (Slurm binds each task a GPU: the tasks plan by
# the exchange), and report the median of the per-iteration differences to "no plugin"
# (robust against drift) with its bootstrap 95% interval (at ~4 ms of step-to-step spread,
# 100 iterations leave the median difference uncertain by about +-0.7 ms, 300 by +-0.4 ms),
# and of "exclusive, topology=XML" minus "plugin loaded, not asked" (what binding itself
# adds). Results: OUT_DIR/step_overhead.txt; raw data OUT_DIR/step_round*.json
# (hyperfine) and OUT_DIR/step_paired.json. Then, for MANY_TASKS (default "8 64") tasks per
# node (overcommitted: -O), MANY_PAIRED (default 100) interleaved iterations of `srun -n N -O
# --gpus-per-node=2 true` without a plugin, with the no-op plugin and with --numa-binding=node: the cost of the
# per-node exchange when task_init hooks share 2 CPUs (OUT_DIR/step_many.json).
# Where perf is installed, FAULT_STEPS (default 30) steps per row under `perf stat -a -e
# minor-faults` give the page faults each row adds per step (OUT_DIR/step_faults.txt), and
# bench/fault_cost.c what one costs on this machine (OUT_DIR/fault_cost.txt).
# SLURMD_ENV="VAR=VALUE ..." starts slurmd (and so every slurmstepd) with these variables, e.g.
# the site tuning HWLOC_PLUGINS_BLACKLIST=hwloc_gl,hwloc_opencl,hwloc_xml_libxml
# (docs/PERFORMANCE.md). KEEP=1 keeps the cluster directory.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
PLUGIN=$(readlink -f "$1"); OUT=$2
STEPS=${STEPS:-100}; ROUNDS=${ROUNDS:-3}; PAIRED=${PAIRED:-300}
HERE=$(cd "$(dirname "$0")" && pwd -P); ROOT=$(dirname "$HERE")
skip() { echo "step_overhead: $*; skipped" >&2; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root (starts Slurm daemons)"
for t in slurmd slurmctld munged srun salloc hyperfine python3; do command -v $t >/dev/null || skip "$t not found"; done
[ -f "$PLUGIN" ] || skip "plugin $PLUGIN not built"
mkdir -p "$OUT"; OUT=$(readlink -f "$OUT")

D=$(mktemp -d /tmp/numabind-step-bench.XXXXXX)
chmod 0755 "$D"
cleanup() {
  "$ROOT/tests/slurm/cluster.sh" stop "$D/cluster" >/dev/null 2>&1 || true
  [ "${KEEP:-0}" = 1 ] || rm -rf "$D"
}
trap cleanup EXIT
# A private copy of the plugin and the step engine beside it: rebuilds during the run do not matter.
cp "$PLUGIN" "$D/spank_numabind.so"
cp "$(dirname "$PLUGIN")/numabind_stepd.so" "$D/numabind_stepd.so"
cc -shared -fPIC -O2 -o "$D/spank_noop.so" "$HERE/noop_spank.c"  # the floor of any SPANK plugin
cc -O2 -o "$D/fault_cost" "$HERE/fault_cost.c"  # what a page fault costs here
"$D/fault_cost" "$(ldd /bin/true | awk '/libc\.so/ {print $3}')" >"$OUT/fault_cost.txt" || : >"$OUT/fault_cost.txt"
echo "required $D/spank_noop.so" >"$D/plugstack.noop"
python3 "$ROOT/tests/tools/gen_topology.py" -o "$D/topo.xml" --gpu package:0 --gpu package:0 >/dev/null
: >"$D/plugstack.off"
echo "required $D/spank_numabind.so topology=$D/topo.xml" >"$D/plugstack.xml"
# live: this machine has no GPU; its two virtio PCI functions (storage 0x0180, network 0x0200)
# stand in for them
echo "required $D/spank_numabind.so devices=class=0x0180,class=0x0200" >"$D/plugstack.live"
cp "$D/plugstack.off" "$D/plugstack.conf"
chmod 0644 "$D"/plugstack.* "$D/topo.xml"; chmod 0755 "$D/spank_noop.so"
denv=()
for e in ${SLURMD_ENV:-}; do denv+=(--slurmd-env "all:$e"); done
"$ROOT/tests/slurm/cluster.sh" start "$D/cluster" --plugstack "$D/plugstack.conf" ${denv[@]+"${denv[@]}"} >/dev/null
# shellcheck disable=SC1091
. "$D/cluster/env.sh"

echo "== step_overhead: slurmd environment: ${SLURMD_ENV:-(none added)}"
echo "== step_overhead: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -Is), $(srun --version)"
echo "-- sanity: the plugin binds (exclusive, XML topology, verbose)"
cp "$D/plugstack.xml" "$D/plugstack.conf"
srun -n2 --gpus-per-node=2 --numa-binding=exclusive,verbose sh -c 'echo "task $SLURM_LOCALID: NUMABIND_CPUS=$NUMABIND_CPUS"' 2>&1 | sort
cp "$D/plugstack.live" "$D/plugstack.conf"
srun -n2 --gpus-per-node=2 --numa-binding=exclusive,verbose true 2>&1 | sort || true

S="srun -n2 --gpus-per-node=2"
cat >"$D/inner.sh" <<EOF
set -euo pipefail
for r in \$(seq 1 $ROUNDS); do
  a=(--prepare "cp $D/plugstack.off $D/plugstack.conf" -n "no plugin" "$S true")
  b=(--prepare "cp $D/plugstack.xml $D/plugstack.conf" -n "plugin loaded, not asked" "$S true")
  c=(--prepare "cp $D/plugstack.xml $D/plugstack.conf" -n "exclusive, topology=XML" "$S --numa-binding=exclusive true")
  d=(--prepare "cp $D/plugstack.live $D/plugstack.conf" -n "exclusive, live discovery" "$S --numa-binding=exclusive true")
  if [ \$((r % 2)) = 1 ]; then set -- "\${a[@]}" "\${b[@]}" "\${c[@]}" "\${d[@]}"; else set -- "\${d[@]}" "\${c[@]}" "\${b[@]}" "\${a[@]}"; fi
  hyperfine -N --style basic -w 3 -r $STEPS --export-json "$OUT/step_round\$r.json" "\$@"
done
# Interleaved, paired: each iteration runs all four rows back to back (order rotated), so
# slow drift from other load cancels in the per-iteration differences.
python3 "$HERE/paired_steps.py" "$D" "$OUT/step_paired.json" $PAIRED basic
EOF
cat >>"$D/inner.sh" <<EOF
python3 "$HERE/paired_steps.py" "$D" "$OUT/step_many.json" ${MANY_PAIRED:-100} many ${MANY_TASKS:-8 64}
EOF
# Page faults per step, system-wide (perf, where installed): the part of the cost that does
# not depend on how dear a fault is on this machine (OUT_DIR/step_faults.txt).
if command -v perf >/dev/null && perf stat -a -e minor-faults true >/dev/null 2>&1; then
  cat >>"$D/inner.sh" <<EOF
for row in "off:" "noop:" "xml:" "xml:--numa-binding=exclusive"; do
  cp "$D/plugstack.\${row%%:*}" "$D/plugstack.conf"
  opt=\${row#*:}
  f=\$(perf stat -a -e minor-faults -x, -- bash -c "for i in \$(seq -s ' ' ${FAULT_STEPS:-30}); do $S \$opt true; done" 2>&1 >/dev/null | awk -F, '/minor-faults/ {print \$1}') || f=
  if [ -n "\$f" ]; then echo "\${row%%:*} \${opt:-(not-asked)} \$((f / ${FAULT_STEPS:-30}))"; fi
done >"$OUT/step_faults.txt"
EOF
fi
salloc -n2 --gpus-per-node=2 bash "$D/inner.sh"

python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/step_overhead.txt"
import json, random, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
def ci95(diffs):
    """Bootstrap 95% interval of the median difference: how far noise alone moves it."""
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    return f"[{meds[50]:+.2f}, {meds[1949]:+.2f}]"
times, per_round = {}, {}
for r in range(1, rounds + 1):
    for res in json.load(open(f"{out}/step_round{r}.json"))["results"]:
        times.setdefault(res["command"], []).extend(res["times"])
        per_round.setdefault(res["command"], []).append(statistics.median(res["times"]) * 1e3)
base = statistics.median(times["no plugin"]) * 1e3
print(f"{'srun -n2 --gpus-per-node=2 true':32} {'steps':>5} {'median ms':>9} {'p25':>7} {'p75':>7} {'vs none':>8}  per-round medians")
for name in ["no plugin", "plugin loaded, not asked", "exclusive, topology=XML", "exclusive, live discovery"]:
    t = sorted(x * 1e3 for x in times[name])
    q = statistics.quantiles(t, n=4)
    med = statistics.median(t)
    print(f"{name:32} {len(t):5d} {med:9.2f} {q[0]:7.2f} {q[2]:7.2f} {med - base:+8.2f}  " +
          " ".join(f"{m:.2f}" for m in per_round[name]))
paired = json.load(open(f"{out}/step_paired.json"))
if paired and paired["no plugin"]:
    none = paired["no plugin"]
    print(f"\ninterleaved, paired ({len(none)} iterations): median step ms, median of per-iteration difference to 'no plugin', its bootstrap 95% interval")
    for name, t in paired.items():
        diffs = sorted((a - b) * 1e3 for a, b in zip(t, none))
        print(f"{name:32} {statistics.median(t) * 1e3:9.2f}  {statistics.median(diffs):+8.2f}  {ci95(diffs)}")
    asked, loaded = paired["exclusive, topology=XML"], paired["plugin loaded, not asked"]
    diffs = sorted((a - b) * 1e3 for a, b in zip(asked, loaded))
    print(f"{'binding minus loaded, not asked':32} {'':9}  {statistics.median(diffs):+8.2f}  {ci95(diffs)}")
try:
    many = json.load(open(f"{out}/step_many.json"))
except OSError:
    many = {}
try:
    faults = {(r.split()[0], r.split()[1]): int(r.split()[2]) for r in open(f"{out}/step_faults.txt") if r.strip()}
except OSError:
    faults = {}
cost = open(f"{out}/fault_cost.txt").read().strip()
if cost:
    print(f"\n{cost}")
if faults:
    none = faults[("off", "(not-asked)")]
    names = {("noop", "(not-asked)"): "no-op SPANK plugin", ("xml", "(not-asked)"): "plugin loaded, not asked",
             ("xml", "--numa-binding=exclusive"): "exclusive, topology=XML"}
    print(f"\npage faults per step, system-wide (perf stat): no plugin {none}")
    for k, name in names.items():
        print(f"{name:32} {faults[k] - none:+9d}")
for c, rows in many.items():
    none = rows["no plugin"]
    print(f"\n{c} tasks per node (-O), interleaved, paired ({len(none)} iterations): median step ms, median difference, 95% interval")
    for name, t in rows.items():
        diffs = sorted((a - b) * 1e3 for a, b in zip(t, none))
        print(f"{name:32} {statistics.median(t) * 1e3:9.2f}  {statistics.median(diffs):+8.2f}  {ci95(diffs)}")
PY
