#!/usr/bin/env bash
# tests/load/load_test.sh — the SPANK plugin under load in a private local Slurm cluster
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
: "${1:?usage: load_test.sh spank_numabind.so}"
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/slurm/plugin_test_env.sh
. "$HERE/../slurm/plugin_test_env.sh" "$1" srun salloc cc
STEPS=${LOAD_STEPS:-500}
CONC=${LOAD_CONCURRENT:-16}

D=$(mktemp -d "${TMPDIR:-/tmp}/nbload.XXXXXX")
chmod 0755 "$D"
cleanup() {
  local rc=$?
  cluster_stop "$D"
  if [ "$failures" -ne 0 ] || [ "${NBLOAD_KEEP:-0}" = 1 ]; then echo "cluster directory kept: $D"; else rm -rf "$D"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_plugin "$D"
python3 "$GEN" -o "$D/one.xml" --gpu core:0 --gpu package:0 >/dev/null 2>&1 || { echo "gen_topology failed"; exit 1; }
chmod 0644 "$D/one.xml"
PLUG="required $D/spank_numabind.so topology=$D/one.xml default=exclusive fallback=fail"
echo "$PLUG" >"$D/plugstack.conf.want"

cluster_start "$D/cluster-start.log" "$D" --nodes 1 --gpus 2 || exit 1
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
EOF
chmod 0755 "$D/job.sh"

T0=$SECONDS
(timeout 500 salloc -N1 -n2 --gpus-per-node=2 "$D/job.sh" >"$D/job.out" 2>"$D/job.err" </dev/null; echo $? >"$D/job.done") &
JOB=$!
wait_for_job() {  # FILE: the job's phase marker, or give up when the job is gone
  local f=$1 n=0
  while [ ! -e "$f" ]; do
    [ -e "$D/job.done" ] && return 1
    sleep 0.2; n=$((n + 1)); [ $n -gt 2000 ] && return 1
  done
  return 0
}
if ! wait_for_job "$D/phase.warm"; then
  fail "warm-up did not finish: $(tail -3 "$D/job.err" | tr '\n' ' ')"; exit 1
fi
grep -q WARMFAIL "$D/job.out" && fail "warm-up steps failed: $(grep -c WARMFAIL "$D/job.out")"
sleep 1; read -r fd0 rss0 cfd0 crss0 <<<"$(sample)"; touch "$D/go.1"
wait_for_job "$D/phase.half"; sleep 1; read -r fd1 rss1 cfd1 crss1 <<<"$(sample)"; touch "$D/go.2"
wait_for_job "$D/phase.seq"; sleep 1; read -r fd2 rss2 cfd2 crss2 <<<"$(sample)"; touch "$D/go.3"
wait $JOB; rc=$?
sleep 1; read -r fd3 rss3 cfd3 crss3 <<<"$(sample)"
echo "info - slurmd pid $SLURMD: fds $fd0 -> $fd1 (after $((STEPS / 2)) steps) -> $fd2 (after $STEPS) -> $fd3 (after $CONC concurrent);" \
     "VmRSS kB $rss0 -> $rss1 -> $rss2 -> $rss3"
echo "info - slurmctld pid $CTLD: fds $cfd0 -> $cfd1 -> $cfd2 -> $cfd3; VmRSS kB $crss0 -> $crss1 -> $crss2 -> $crss3"
grep -E '^(SEQ|CONC)' "$D/job.out" | sed 's/^/info - /'
echo "info - elapsed $((SECONDS - T0)) s"

[ $rc -eq 0 ] && pass "allocation finished (rc 0)" || fail "salloc rc $rc: $(tail -3 "$D/job.err" | tr '\n' ' ')"
grep -q "^SEQ fail=0 " "$D/job.out" && pass "$STEPS consecutive steps, none failed" ||
  fail "consecutive steps: $(grep -E '^SEQ|STEPFAIL' "$D/job.out" | head -5 | tr '\n' ' ')"
grep -q "^CONC fail=0 " "$D/job.out" && pass "$CONC concurrent steps, none failed" ||
  fail "concurrent steps: $(grep '^CONC' "$D/job.out"); $(cat "$D"/conc.*.err 2>/dev/null | sort | uniq -c | head -3 | tr '\n' ' ')"
probe=$(grep '^PROBE' "$D/job.out" | awk '{print $2, $3}' | paste -sd'|')
[ "$probe" = "0 exclusive|1 exclusive" ] && pass "steps are bound by the plugin (NUMABIND_MODE=exclusive on both tasks)" ||
  fail "probe step: '$probe'"
conc_bound=$(cat "$D"/conc.*.out 2>/dev/null | grep -c ' exclusive ')
[ "$conc_bound" = "$CONC" ] && pass "every concurrent step was bound" || fail "only $conc_bound of $CONC concurrent steps bound"
[ "${fd2:-999}" -le $((fd0 + 2)) ] && [ "${fd3:-999}" -le $((fd0 + 2)) ] && pass "slurmd fds do not grow ($fd0 -> $fd2 -> $fd3)" ||
  fail "slurmd fds grow: $fd0 -> $fd1 -> $fd2 -> $fd3"
[ $((rss2 - rss0)) -le 2048 ] && [ $((rss2 - rss1)) -le 1024 ] && [ $((rss3 - rss0)) -le 2048 ] &&
  pass "slurmd VmRSS does not grow ($rss0 -> $rss1 -> $rss2 -> $rss3 kB)" || fail "slurmd VmRSS grows: $rss0 -> $rss1 -> $rss2 -> $rss3 kB"

# ---- 4. user-controlled environment vs the root slurmstepd --------------------------
mkdir -p "$D/evil/plugins" "$D/evil/fsroot"
chmod -R 0777 "$D/evil"
cat >"$D/evil/evil.c" <<EOF
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void pwned(void) {
    char p[512];
    snprintf(p, sizeof p, "$D/evil/PWNED-uid%d-pid%d", (int)geteuid(), (int)getpid());
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
EOF
cc -shared -fPIC -o "$D/evil/plugins/hwloc_evil.so" "$D/evil/evil.c" && chmod 0755 "$D/evil/plugins/hwloc_evil.so"
# An XML with GPUs: were it read, the binding below would succeed instead of warning.
python3 "$GEN" -o "$D/evil/gpus.xml" --gpu package:0 >/dev/null 2>&1
chmod 0644 "$D/evil/gpus.xml"
# Live discovery (no topology=), so hwloc's environment would matter if it were the user's.
# The step holds a GPU and asks for a binding: a plugin that read the user's XML would bind.
echo "required $D/spank_numabind.so default=node fallback=warn" >"$D/plugstack.conf"
su nbtest -s /bin/sh -c ". '$D/env.sh'; cd /tmp; HWLOC_XMLFILE='$D/evil/gpus.xml' HWLOC_PLUGINS_PATH='$D/evil/plugins' \
  HWLOC_COMPONENTS=xml,evil HWLOC_FSROOT='$D/evil/fsroot' HWLOC_THISSYSTEM=1 \
  timeout 60 srun -n1 --gpus=1 --numa-binding=node sh -c 'echo MODE=\$NUMABIND_MODE'" >"$D/sec.out" 2>"$D/sec.err"
src=$?
if ls "$D"/evil/PWNED-* >/dev/null 2>&1; then
  fail "a user's HWLOC_PLUGINS_PATH plugin was loaded: $(ls "$D"/evil/ | grep PWNED | tr '\n' ' ')"
else
  pass "user's HWLOC_PLUGINS_PATH/HWLOC_COMPONENTS: no plugin of the user loaded"
fi
if [ $src -eq 0 ] && grep -q 'MODE=none' "$D/sec.out" && grep -q 'no accelerator' "$D/sec.err"; then
  pass "user's HWLOC_XMLFILE/HWLOC_FSROOT ignored: the plugin discovered the real machine (no GPU: warned, unbound)"
else
  fail "user's hwloc environment changed the plugin's topology (rc $src): $(cat "$D/sec.out" "$D/sec.err" | head -3 | tr '\n' ' ')"
fi
cp "$D/plugstack.conf.want" "$D/plugstack.conf"

finish
