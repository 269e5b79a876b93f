#!/usr/bin/env bash
# tests/fault/plugin_alloc_test.sh STANDIN PLUGIN GEN_TOPOLOGY [--logs]
# The built spank_numabind.so in a slurmstepd stand-in (stepd_standin.c), which fails the
# N-th allocation for every N a step makes, in Slurm's hook order and in broken ones
# (exit before task_init, init_post_opt that failed, task_init without init_post_opt).
# Every case must end with no crash of numabind's and every task bound as NUMABIND_*
# say, or exactly as before (NUMABIND_MODE none/unset); see stepd_standin.c.
# --logs: instead, a --numa-binding value with a newline and a forged timestamp (and one
# of 8 KiB) must reach slurmd's log as one escaped line of at most 1024 bytes.
# Root only (binds real CPUs and memory nodes of this machine); exit 77 otherwise.
set -uo pipefail
standin=$1 plugin=$2 gen=$3 mode=${4:-}
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# This machine with two fake NVIDIA GPUs (the stand-in's step has SLURM_STEP_GPUS=0,1).
python3 "$gen" -o "$work/topo.xml" --gpu machine --gpu machine || exit 1
site=(default=exclusive fallback=warn mem=bind devices=10de "topology=$work/topo.xml")
run() {  # run LABEL STANDIN-ARGS... -- PLUGSTACK-ARGS...: the stand-in's exit status, its summary
  local label=$1
  shift
  local t0=$SECONDS
  if "$standin" "$plugin" "$@" >"$work/out" 2>"$work/err"; then
    pass "$label: $(tail -1 "$work/out") [$((SECONDS - t0)) s]"
  else
    # its log without numabind's own lines and notes
    fail "$label: $(tail -1 "$work/out") [$((SECONDS - t0)) s]" \
      "$(grep -v '^numabind: ' "$work/err" | grep -v ': note: ' | head -8)"
  fi
}
if [ "$mode" = --logs ]; then
  forged=$(printf 'bogus\n[2024-01-01T00:00:00.000] error: forged by a user')
  long=$(head -c 8192 /dev/zero | tr '\0' x)
  run "newline in --numa-binding" slurm --only 0 --check-logs --option "$forged" -- "${site[@]}"
  run "8 KiB --numa-binding" slurm --only 0 --check-logs --option "$long" -- "${site[@]}"
  finish
fi
run "Slurm's order" slurm -- "${site[@]}"
run "Slurm's order, --numa-binding=socket,mem=interleave" slurm --option socket,mem=interleave -- "${site[@]}"
run "exit before task_init" exit-first -- "${site[@]}"
run "exit before task_init, no SLURM_STEP_GPUS" exit-first --no-gpus -- "${site[@]}"
run "init_post_opt failed (missing topology file)" slurm -- default=exclusive fallback=warn "topology=$work/missing-%n.xml"
run "task_init without init_post_opt" no-post-opt -- "${site[@]}"
finish
