#!/bin/bash
# shellcheck disable=SC2317  # helpers (rc, row, ...) are called from the strings check eval's
# The smt=, omp= and Flux options on this machine: one hardware thread per core (--smt 1) in plan output and on the
# kernel, OpenMP inside the binding (--omp, checked by a real libgomp program) and the local
# rank under Flux (the variables flux-shell sets). Expected values from hwloc-calc
# (--no-smt, the cores of a CPU set) and the kernel (/proc, sched_getcpu), never numabind's.
# Usage: opts_test.sh NUMABIND_BINARY GEN_TOPOLOGY_PY OMP_PROBE_C CORPUS_DIR
set -u
NB=$1
GEN=$2
PROBE_SRC=$3
CORPUS=${NUMABIND_TOPOLOGY_CORPUS:-${4:-}}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
nb() { "$NB" "$@" >"$WORK/out" 2>"$WORK/err"; echo $? >"$WORK/rc"; }
rc() { cat "$WORK/rc"; }
one_line_error() { [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -q -- "$1" "$WORK/err"; }
kernel_cpus() { cpu_list "$(awk '/Cpus_allowed_list/{print $2}' "$1")"; }
# The task's CPUs from `plan --json`, task $2.
plan_cpus() { python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["tasks"][int(sys.argv[2])]["cpus"])))' "$WORK/out" "$1"; }

# ---- bad values: one line naming the value and the choices, exit 2 ----
nb run --smt 3 --local-rank 0 --ntasks 1 -- true
check "run --smt 3: exit 2, one line naming it and the choices" eval '[ $(rc) = 2 ] && one_line_error "invalid --smt '"'"'3'"'"' (valid: 1, all)"'
nb plan --mode node --ntasks 1 --smt two
check "plan --smt two: exit 2, one line naming it and the choices" eval '[ $(rc) = 2 ] && one_line_error "invalid --smt '"'"'two'"'"' (valid: 1, all)"'

# ---- smt=1 in plan output: every mode, generated SMT nodes and a recorded one whose
# siblings are numbered apart (JUWELS Booster: core 0 = PUs 0,48) ----
for preset in dgx-a100 nps4 power9; do
  python3 "$GEN" --preset "$preset" -o "$WORK/$preset.xml" >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "gen_topology.py --preset $preset"; }
done
files="$WORK/dgx-a100.xml $WORK/nps4.xml $WORK/power9.xml"
if [ -f "$CORPUS/psmgmt_topo.jwb0001.xml" ]; then files="$files $CORPUS/psmgmt_topo.jwb0001.xml"
else skip_case "smt=1 on the recorded JUWELS Booster: corpus not found at '$CORPUS' (NUMABIND_TOPOLOGY_CORPUS)"; fi
for xml in $files; do
  name=$(basename "$xml" .xml)
  first=$(hwloc-calc -i "$xml" --no-smt --po -I pu all)   # one PU per core, as hwloc keeps it
  ngpu=$("$NB" topo --topology "$xml" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["accelerators"]))')
  for mode in node socket exclusive core-complex; do
    nb plan --topology "$xml" --mode $mode --ntasks "$ngpu" --smt 1 --json
    check "plan --smt 1 $mode on $name: every task's CPUs are one PU per core (hwloc-calc --no-smt)" eval '[ $(rc) = 0 ] && python3 - "$WORK/out" "$first" <<PY
import json, sys
first = set(int(x) for x in sys.argv[2].split(","))
tasks = json.load(open(sys.argv[1]))["tasks"]
for t in tasks:
    assert t["cpus"] and set(t["cpus"]) <= first, (t["local_rank"], t["cpus"])
PY'
  done
  # node mode, exactly: the GPU's NUMA node with one PU per core (hwloc-calc), GPU 0 and the last
  nb plan --topology "$xml" --mode node --ntasks "$ngpu" --smt 1 --json
  for r in 0 $((ngpu - 1)); do
    numa=$(python3 -c 'import json,sys; print(",".join("numa:%d" % n for n in json.load(open(sys.argv[1]))["tasks"][int(sys.argv[2])]["mems"]))' "$WORK/out" $r)
    want=$(hwloc-calc -i "$xml" --no-smt --po -I pu --pi $(echo "$numa" | tr , ' '))
    check "plan --smt 1 node on $name task $r: its node's first PU of each core ($want)" eval '[ "$(plan_cpus $r)" = "$(cpu_list "$want")" ]'
  done
done

# smt=1 and --cpus-per-task: Slurm's -c counts threads; as many cores' first threads, not
# more cores from other NUMA nodes (nps4: 6 two-thread cores per node; -c 12 = those 6 cores).
if [ -f "$WORK/nps4.xml" ]; then
  allpus=$(hwloc-calc -i "$WORK/nps4.xml" --po -I pu all)
  nb plan --topology "$WORK/nps4.xml" --mode node --ntasks 4 --smt 1 --cpus-per-task 12 --allowed-cpus "$allpus" --json
  numa=$(python3 -c 'import json,sys; print(" ".join("numa:%d" % n for n in json.load(open(sys.argv[1]))["tasks"][0]["mems"]))' "$WORK/out" 2>/dev/null)
  want=$(hwloc-calc -i "$WORK/nps4.xml" --no-smt --po -I pu --pi $numa 2>/dev/null)
  check "plan --smt 1 --cpus-per-task 12 on 6 two-thread cores: the node's 6 first threads ($want), not widened" eval '[ $(rc) = 0 ] && [ -n "$want" ] && [ "$(plan_cpus 0)" = "$(cpu_list "$want")" ]'
fi

# ---- smt=1 on the kernel: this machine's CPUs described as one core of two threads ----
python3 "$GEN" --synthetic "package:1 core:1 pu:2" --gpu package:0 -o "$WORK/smt.xml" >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "gen_topology.py --synthetic"; }
if [ "$(nproc --all)" -ge 2 ] && taskset -c 0,1 true 2>/dev/null; then
  one=$(hwloc-calc -i "$WORK/smt.xml" --no-smt --po -I pu all)
  both=$(hwloc-calc -i "$WORK/smt.xml" --po -I pu all)
  for mode in node socket exclusive core-complex; do
    nb run --topology "$WORK/smt.xml" --mode $mode --local-rank 0 --ntasks 1 --smt 1 -- grep Cpus_allowed_list /proc/self/status
    check "run --smt 1 --mode $mode: the kernel's affinity is the core's first PU ($one)" eval '[ $(rc) = 0 ] && [ "$(kernel_cpus "$WORK/out")" = "$(cpu_list "$one")" ]'
  done
  # --smt 1 under srun: SLURM_CPUS_PER_TASK counts threads (2 = this one core), unless
  # --hint=nomultithread made Slurm count cores (SLURM_THREADS_PER_CORE=1).
  SLURM_CPUS_PER_TASK=2 nb run --topology "$WORK/smt.xml" --mode node --local-rank 0 --ntasks 1 --smt 1 -v -- true
  check "run --smt 1 with SLURM_CPUS_PER_TASK=2 on one 2-thread core: at least 1 CPU (one core)" eval '[ $(rc) = 0 ] && grep -q "at least 1 per task" "$WORK/err"'
  SLURM_CPUS_PER_TASK=2 SLURM_THREADS_PER_CORE=1 nb run --topology "$WORK/smt.xml" --mode node --local-rank 0 --ntasks 1 --smt 1 -v -- true
  check "run --smt 1 with SLURM_THREADS_PER_CORE=1 (the hint): SLURM_CPUS_PER_TASK=2 stays 2" eval 'grep -q "at least 2 per task" "$WORK/err"'
  # srun --hint=nomultithread (SLURM_THREADS_PER_CORE=1): an unset --smt follows it, --smt all overrides it.
  SLURM_THREADS_PER_CORE=1 nb run --topology "$WORK/smt.xml" --mode node --local-rank 0 --ntasks 1 -- grep Cpus_allowed_list /proc/self/status
  check "run without --smt under --hint=nomultithread: the core's first PU ($one)" eval '[ $(rc) = 0 ] && [ "$(kernel_cpus "$WORK/out")" = "$(cpu_list "$one")" ]'
  SLURM_THREADS_PER_CORE=1 nb run --topology "$WORK/smt.xml" --mode node --local-rank 0 --ntasks 1 --smt all -- grep Cpus_allowed_list /proc/self/status
  check "run --smt all under --hint=nomultithread: both siblings ($both)" eval '[ $(rc) = 0 ] && [ "$(kernel_cpus "$WORK/out")" = "$(cpu_list "$both")" ]'
  nb run --topology "$WORK/smt.xml" --mode node --local-rank 0 --ntasks 1 -- grep Cpus_allowed_list /proc/self/status
  check "run without --smt: both siblings ($both)" eval '[ $(rc) = 0 ] && [ "$(kernel_cpus "$WORK/out")" = "$(cpu_list "$both")" ]'
else
  skip_case "smt=1 on the kernel: this machine has fewer than 2 usable CPUs"
fi

# ---- OpenMP inside the binding: a real libgomp program ----
if gcc -fopenmp -O1 -o "$WORK/omp_probe" "$PROBE_SRC" 2>"$WORK/cc.err"; then
  python3 "$GEN" -o "$WORK/this.xml" --gpu package:0 --gpu package:0 >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "gen_topology"; }
  # check_omp XML TASK_CPUS [THREADS]: every place is one core of the task (hwloc-calc), every
  # thread ran only on its place's CPUs, one thread per place unless THREADS says otherwise.
  check_omp() {
    local xml=$1 cpus=$2 threads=${3:-}
    local cores places=""
    cores=$(hwloc-calc -i "$xml" --pi --intersect core $(for c in ${cpus//,/ }; do printf 'pu:%s ' "$c"; done))
    for c in ${cores//,/ }; do
      places="$places $(python3 -c 'import sys; a=set(sys.argv[1].split(",")); b=sys.argv[2].split(","); print(",".join(x for x in b if x in a))' "$(cpu_list "$(hwloc-calc -i "$xml" --po -I pu core:$c)")" "$cpus")"
    done
    python3 - "$WORK/out" "$cpus" "$threads" $places <<'PY'
import sys
out, cpus, threads, want = sys.argv[1], set(map(int, sys.argv[2].split(","))), sys.argv[3], sys.argv[4:]
lines = open(out).read().split("\n")
places = {}
seen = {}
team = None
for l in lines:
    w = l.split()
    if l.startswith("place "):
        places[int(w[1])] = [int(x) for x in w[3].split(",")]
    elif l.startswith("thread "):
        seen[int(w[1])] = (int(w[5]), set(int(x) for x in w[7].split(",")))
        team = int(w[3])
got = [",".join(map(str, places[p])) for p in sorted(places)]
assert got == want, ("places", got, "want", want)
nthreads = int(threads) if threads else len(want)
assert team == nthreads and len(seen) == nthreads, ("threads", team, len(seen), nthreads)
for t, (p, ran) in seen.items():
    assert 0 <= p < len(places), ("thread", t, "place", p)
    assert ran <= set(places[p]) <= cpus, ("thread", t, "ran on", ran, "place", places[p], "task", cpus)
PY
  }
  for r in 0 1; do
    want=$(cpu_list "$(hwloc-calc -i "$WORK/this.xml" --po -I pu core:$r)")
    env -u OMP_NUM_THREADS -u OMP_PLACES -u OMP_PROC_BIND "$NB" run --topology "$WORK/this.xml" --mode exclusive --ntasks 2 --local-rank $r --omp -- \
      sh -c 'echo "env $OMP_NUM_THREADS $OMP_PLACES $OMP_PROC_BIND"; exec "$0"' "$WORK/omp_probe" >"$WORK/out" 2>"$WORK/err"
    echo $? >"$WORK/rc"
    check "run --omp exclusive rank $r: one place, core $r ($want), its thread on it" eval '[ $(rc) = 0 ] && check_omp "$WORK/this.xml" "$want" && grep -q "^env 1 .* close$" "$WORK/out"'
  done
  all=$(cpu_list "$(hwloc-calc -i "$WORK/this.xml" --po -I pu all)")
  env -u OMP_NUM_THREADS -u OMP_PLACES -u OMP_PROC_BIND "$NB" run --topology "$WORK/this.xml" --mode node --ntasks 1 --local-rank 0 --omp -- "$WORK/omp_probe" >"$WORK/out" 2>"$WORK/err"
  echo $? >"$WORK/rc"
  check "run --omp node: one place per core of $all, one thread each, every thread on its place" eval '[ $(rc) = 0 ] && check_omp "$WORK/this.xml" "$all"'
  # One core of two threads: one place holding both siblings; with --smt 1 only the first.
  if [ "$(nproc --all)" -ge 2 ]; then
    both=$(cpu_list "$(hwloc-calc -i "$WORK/smt.xml" --po -I pu all)")
    one=$(cpu_list "$(hwloc-calc -i "$WORK/smt.xml" --no-smt --po -I pu all)")
    env -u OMP_NUM_THREADS -u OMP_PLACES -u OMP_PROC_BIND "$NB" run --topology "$WORK/smt.xml" --mode node --ntasks 1 --local-rank 0 --omp -- "$WORK/omp_probe" >"$WORK/out" 2>"$WORK/err"
    echo $? >"$WORK/rc"
    check "run --omp on an SMT core: one place {$both}, one thread (one per core)" eval '[ $(rc) = 0 ] && check_omp "$WORK/smt.xml" "$both"'
    env -u OMP_NUM_THREADS -u OMP_PLACES -u OMP_PROC_BIND "$NB" run --topology "$WORK/smt.xml" --mode node --ntasks 1 --local-rank 0 --omp --smt 1 -- "$WORK/omp_probe" >"$WORK/out" 2>"$WORK/err"
    echo $? >"$WORK/rc"
    check "run --omp --smt 1: one place {$one}" eval '[ $(rc) = 0 ] && check_omp "$WORK/smt.xml" "$one"'
  fi
  # The user's own OMP_NUM_THREADS stays (verbose says so); the places are still set.
  OMP_NUM_THREADS=3 "$NB" run --topology "$WORK/this.xml" --mode node --ntasks 1 --local-rank 0 --omp -v -- "$WORK/omp_probe" >"$WORK/out" 2>"$WORK/err"
  echo $? >"$WORK/rc"
  check "run --omp keeps the user's OMP_NUM_THREADS=3 (3 threads, on the places), verbose names it" eval '[ $(rc) = 0 ] && check_omp "$WORK/this.xml" "$all" 3 && grep -q "OMP_NUM_THREADS kept" "$WORK/err"'
  OMP_PLACES=cores "$NB" run --topology "$WORK/this.xml" --mode node --ntasks 1 --local-rank 0 --omp -- sh -c 'echo "$OMP_PLACES $OMP_PROC_BIND"' >"$WORK/out" 2>"$WORK/err"
  check "run --omp keeps the user's OMP_PLACES=cores" eval 'grep -qx "cores close" "$WORK/out"'
  env -u OMP_NUM_THREADS -u OMP_PLACES -u OMP_PROC_BIND "$NB" run --topology "$WORK/this.xml" --mode node --ntasks 1 --local-rank 0 -- sh -c 'echo "[${OMP_NUM_THREADS-unset}] [${OMP_PLACES-unset}]"' >"$WORK/out" 2>"$WORK/err"
  check "run without --omp sets no OMP_* variable" eval 'grep -qx "\[unset\] \[unset\]" "$WORK/out"'
else
  fail "cannot compile the OpenMP probe with gcc -fopenmp: $(head -1 "$WORK/cc.err")"
fi

# ---- Flux: what flux-shell exports per task (flux-environment(7)) ----
python3 "$GEN" -o "$WORK/this.xml" --gpu package:0 --gpu package:0 >/dev/null 2>&1
NCORES=$(hwloc-calc -N core all)
FLUX_TASK_LOCAL_ID=1 FLUX_TASK_RANK=1 FLUX_JOB_SIZE=2 FLUX_JOB_NNODES=1 \
  nb run --topology "$WORK/this.xml" --mode exclusive -v -- grep Cpus_allowed_list /proc/self/status
check "Flux, one node: local rank 1 from FLUX_TASK_LOCAL_ID, 2 tasks from FLUX_JOB_SIZE" eval '[ $(rc) = 0 ] && grep -q "local rank 1 from FLUX_TASK_LOCAL_ID, local tasks 2 from FLUX_JOB_SIZE (FLUX_JOB_NNODES=1)" "$WORK/err"'
if [ "$NCORES" -ge 2 ]; then
  want=$(cpu_list "$(hwloc-calc --po -I pu core:1)")
  check "Flux, one node, exclusive: the kernel's affinity is core 1 ($want)" eval '[ "$(kernel_cpus "$WORK/out")" = "$want" ]'
fi
# Several nodes: Flux gives no per-node count; exclusive needs --ntasks, node mode runs.
FLUX_TASK_LOCAL_ID=1 FLUX_TASK_RANK=3 FLUX_JOB_SIZE=4 FLUX_JOB_NNODES=2 nb run --topology "$WORK/this.xml" --mode exclusive -- true
check "Flux, two nodes, exclusive without --ntasks: exit 2 asking for it" eval '[ $(rc) = 2 ] && one_line_error "pass --ntasks"'
FLUX_TASK_LOCAL_ID=1 FLUX_TASK_RANK=3 FLUX_JOB_SIZE=4 FLUX_JOB_NNODES=2 nb run --topology "$WORK/this.xml" --mode exclusive --ntasks 2 -v -- true
check "Flux, two nodes, --ntasks 2: rank from FLUX_TASK_LOCAL_ID" eval '[ $(rc) = 0 ] && grep -q "local rank 1 from FLUX_TASK_LOCAL_ID, local tasks 2 from --ntasks" "$WORK/err"'
FLUX_TASK_LOCAL_ID=2 FLUX_JOB_SIZE=2 FLUX_JOB_NNODES=1 nb run --topology "$WORK/this.xml" --mode node -- true
check "Flux: FLUX_TASK_LOCAL_ID beyond FLUX_JOB_SIZE on one node: exit 2 naming both" eval '[ $(rc) = 2 ] && one_line_error "FLUX_TASK_LOCAL_ID=2 is not below the local task count 2 (FLUX_JOB_SIZE"'
# Flux's gpubind plugin gives each task its own CUDA_VISIBLE_DEVICES: node mode binds to it.
FLUX_TASK_LOCAL_ID=0 FLUX_JOB_SIZE=2 FLUX_JOB_NNODES=1 CUDA_VISIBLE_DEVICES=1 nb run --topology "$WORK/this.xml" --mode node -- sh -c 'echo "dev=$NUMABIND_DEVICE"'
check "Flux with gpubind's CUDA_VISIBLE_DEVICES=1: bound to device 1" eval '[ $(rc) = 0 ] && grep -qx "dev=1" "$WORK/out"'
# ---- the same through the Python module (ctypes over libnumabind, built beside the command) ----
PYDIR=$(dirname "$NB")/python
if [ "${NUMABIND_ASAN_PASS:-0}" = 1 ]; then
  # An uninstrumented python3 cannot load the ASan library (tests/asan.sh); the normal pass runs these.
  skip_case "the Python module under the ASan pass"
elif [ -f "$PYDIR/numabind/__init__.py" ]; then
  # plan() without ntasks takes Flux's count (one node); smt=1 there too
  FLUX_TASK_LOCAL_ID=0 FLUX_JOB_SIZE=2 FLUX_JOB_NNODES=1 PYTHONPATH=$PYDIR python3 - "$WORK/smt.xml" "$(hwloc-calc -i "$WORK/smt.xml" --no-smt --po -I pu all)" >"$WORK/out" 2>"$WORK/err" <<'PY'
import sys, numabind
p = numabind.plan(topology=sys.argv[1], mode="node", smt=1)
assert len(p["tasks"]) == 2, p
assert all(",".join(map(str, t["cpus"])) == sys.argv[2] for t in p["tasks"]), p
print("ok")
PY
  check "python plan(smt=1) under Flux: 2 tasks from FLUX_JOB_SIZE, one PU per core" eval 'grep -qx ok "$WORK/out"'
  if [ "$(nproc --all)" -ge 2 ]; then
    env -u OMP_NUM_THREADS -u OMP_PLACES -u OMP_PROC_BIND OMP_PROC_BIND=spread PYTHONPATH=$PYDIR python3 - "$WORK/smt.xml" "$(hwloc-calc -i "$WORK/smt.xml" --no-smt --po -I pu all)" >"$WORK/out" 2>"$WORK/err" <<'PY'
import os, sys, numabind
try:
    numabind.bind(topology=sys.argv[1], local_rank=0, ntasks=1, smt=3)
    raise SystemExit("smt=3 accepted")
except numabind.UsageError as e:
    assert str(e) == "invalid smt 3 (valid: 1, 'all')", str(e)
r = numabind.bind(topology=sys.argv[1], mode="node", local_rank=0, ntasks=1, smt=1, omp=True)
one = set(int(x) for x in sys.argv[2].split(","))
assert os.sched_getaffinity(0) == one, (os.sched_getaffinity(0), one)
want = "{" + ",".join(map(str, sorted(one))) + "}"
assert os.environ["OMP_PLACES"] == want and os.environ["OMP_NUM_THREADS"] == "1", dict(os.environ)
assert os.environ["OMP_PROC_BIND"] == "spread" and r["omp_kept"] == ["OMP_PROC_BIND"], r
print("ok")
PY
    check "python bind(smt=1, omp=True): the kernel's affinity one PU per core, OMP_* set, the user's OMP_PROC_BIND kept" eval 'grep -qx ok "$WORK/out" || { cat "$WORK/err"; false; }'
  fi
else
  skip_case "Python checks: no module at $PYDIR"
fi

finish
