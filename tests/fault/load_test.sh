#!/usr/bin/env bash
# tests/fault/load_test.sh — the SPANK plugin under load in a private local Slurm cluster
# (tests/slurm/cluster.sh, one node, 2 fake GPUs), ctest label "load". Needs root.
#   1. 500 consecutive steps (srun -n2, plugin binding every task: default=exclusive,
#      fallback=fail, so any binding failure fails the step) inside one allocation;
#   2. 16 concurrent steps (srun --overlap) inside the allocation;
#   3. slurmd's open file descriptors (/proc/PID/fd) and VmRSS before, half-way and after:
#      neither may grow (fd: at most +2 for sockets in flight; RSS: at most +2 MiB overall
#      and +1 MiB between the half-way and the final sample);
#   4. security: a job user's environment (HWLOC_XMLFILE, HWLOC_PLUGINS_PATH,
#      HWLOC_COMPONENTS, HWLOC_FSROOT) never makes the root slurmstepd open a path: the
#      user's plugin is never loaded and the user's XML is never read.
# Usage: load_test.sh SPANK_PLUGIN.so     Env: LOAD_STEPS (500), LOAD_CONCURRENT (16)
set -uo pipefail
SO_SRC=${1:?usage: load_test.sh spank_numabind.so}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CL=$ROOT/tests/slurm/cluster.sh
GEN=$ROOT/tests/tools/gen_topology.py
STEPS=${LOAD_STEPS:-500}
CONC=${LOAD_CONCURRENT:-16}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (starts slurmctld/slurmd)"
for t in srun salloc slurmd slurmctld munged python3 cc; do command -v $t >/dev/null || skip "$t not found"; done
[ -f "$SO_SRC" ] || { echo "plugin $SO_SRC not found (build target spank_numabind)"; exit 1; }

D=$(mktemp -d "${TMPDIR:-/tmp}/nbload.XXXXXX")
chmod 0755 "$D"
FAILS=0
cleanup() {
  local rc=$?
  "$CL" stop "$D" >/dev/null 2>&1 || true
  if [ "$FAILS" -ne 0 ] || [ "${NBLOAD_KEEP:-0}" = 1 ]; then echo "cluster directory kept: $D"; else rm -rf "$D"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ok() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

cp "$SO_SRC" "$D/spank_numabind.so"
chmod 0755 "$D/spank_numabind.so"
python3 "$GEN" -o "$D/one.xml" --gpu core:0 --gpu package:0 >/dev/null 2>&1 || { echo "gen_topology failed"; exit 1; }
chmod 0644 "$D/one.xml"
PLUG="required $D/spank_numabind.so topology=$D/one.xml default=exclusive fallback=fail"
echo "$PLUG" >"$D/plugstack.conf.want"

if ! "$CL" start "$D" --nodes 1 --gpus 2 >"$D/cluster-start.log" 2>&1; then
  cat "$D/cluster-start.log"; bad "cannot start the test cluster"; exit 1
fi
# shellcheck disable=SC1091
. "$D/env.sh"
cp "$D/plugstack.conf.want" "$D/plugstack.conf"
cd "$D" || exit 1
SLURMD=$(cat "$D/run/slurmd.n1.pid")
CTLD=$(cat "$D/run/slurmctld.pid")
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }
sample() { echo "$(fds "$SLURMD") $(rss "$SLURMD") $(fds "$CTLD") $(rss "$CTLD")"; }

# The job: warm-up, samples written by the job itself between phases (through files the
# test reads), the consecutive steps, then the concurrent ones.
cat >"$D/job.sh" <<EOF
#!/bin/bash
probe='echo "\$SLURM_LOCALID \$NUMABIND_MODE \$NUMABIND_CPUS"'
for i in \$(seq 10); do srun -n2 true || echo "WARMFAIL \$i"; done
touch $D/phase.warm; while [ ! -e $D/go.1 ]; do sleep 0.05; done
fail=0; start=\$(date +%s%N)
for i in \$(seq $STEPS); do
  srun -n2 true || { fail=\$((fail + 1)); echo "STEPFAIL \$i"; }
  [ \$i = $((STEPS / 2)) ] && { touch $D/phase.half; while [ ! -e $D/go.2 ]; do sleep 0.05; done; }
done
echo "SEQ fail=\$fail ms_per_step=\$(( (\$(date +%s%N) - start) / 1000000 / $STEPS ))"
srun -n2 sh -c "\$probe" | sort | sed 's/^/PROBE /'
touch $D/phase.seq; while [ ! -e $D/go.3 ]; do sleep 0.05; done
pids=(); start=\$(date +%s%N)
for i in \$(seq $CONC); do srun --overlap -n1 sh -c "\$probe" >$D/conc.\$i.out 2>$D/conc.\$i.err & pids+=(\$!); done
cfail=0; for p in "\${pids[@]}"; do wait \$p || cfail=\$((cfail + 1)); done
echo "CONC fail=\$cfail ms=\$(( (\$(date +%s%N) - start) / 1000000 ))"
