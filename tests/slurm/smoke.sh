#!/usr/bin/env bash
# tests/slurm/smoke.sh — smoke test of the local Slurm test cluster (tests/slurm/cluster.sh).
#
# Usage (as root):  tests/slurm/smoke.sh [--cgroup]
#   1-node cluster: GPU env of --gpus-per-node / --gpus-per-task, sbatch --wait, a job as nbtest;
#   2-node cluster (slurmd -N n1/n2): srun -N2 -n2 hostname, srun --mpi=pmix PMIX_RANK.
#   --cgroup runs both clusters with proctrack/cgroup + task/cgroup (ConstrainCores=yes).
#   Exit 0 on success. Clusters are stopped on exit; SMOKE_KEEP=1 keeps their directories.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CL="$HERE/cluster.sh"
# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"
EXTRA=()
[ "${1:-}" = --cgroup ] && EXTRA=(--cgroup)

T0=$SECONDS
D1=$(mktemp -d "${TMPDIR:-/tmp}/nbsmoke1.XXXXXX")
D2=$(mktemp -d "${TMPDIR:-/tmp}/nbsmoke2.XXXXXX")
ERRLOG=$(mktemp "${TMPDIR:-/tmp}/nbsmoke-err.XXXXXX")
cleanup() {
  local rc=$?
  "$CL" stop "$D1" || true
  "$CL" stop "$D2" || true
  if [ "${SMOKE_KEEP:-0}" = 1 ] || [ $rc -ne 0 ]; then
    echo "smoke: cluster dirs kept: $D1 $D2" >&2
  else
    rm -rf "$D1" "$D2"
  fi
  rm -f "$ERRLOG"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

on_fail() { echo "       stderr so far (last 10 lines):"; tail -n 10 "$ERRLOG" | sed 's/^/         /'; }
# stdout is what gets compared; stderr (srun's "queued and waiting" notes, errors) goes to
# ERRLOG and is shown when a check fails
run() { timeout 30 "$@" 2>>"$ERRLOG" || echo "[exit $?]"; }

# ---------------------------------------------------------------- 1 node
"$CL" start "$D1" --nodes 1 ${EXTRA[@]+"${EXTRA[@]}"}
(
  failures=0
  . "$D1/env.sh"
  cd "$D1"
  check_eq "srun -n2 --gpus-per-node=2: CUDA_VISIBLE_DEVICES" \
    $'CUDA_VISIBLE_DEVICES=0,1\nCUDA_VISIBLE_DEVICES=0,1' \
    "$(run srun -n2 --gpus-per-node=2 env | grep '^CUDA_VISIBLE_DEVICES=' | sort)"
  check_eq "srun -n2 --gpus-per-task=1: rank:CUDA_VISIBLE_DEVICES" \
    $'0:0\n1:1' \
    "$(run srun -n2 --gpus-per-task=1 sh -c 'echo $SLURM_PROCID:$CUDA_VISIBLE_DEVICES' | sort)"
  check_eq "srun -n2: SLURM_LOCALID" $'0\n1' \
    "$(run srun -n2 sh -c 'echo $SLURM_LOCALID' | sort)"

  cat >"$D1/job.sh" <<'EOF'
#!/bin/sh
echo "batch on $SLURMD_NODENAME"
srun -n1 --gpus=1 sh -c 'echo "step gpus=$CUDA_VISIBLE_DEVICES"'
EOF
  run sbatch --wait -n1 --gpus=1 -o "$D1/job.out" "$D1/job.sh" >/dev/null
  check_eq "sbatch --wait: output" $'batch on n1\nstep gpus=0' "$(cat "$D1/job.out" 2>&1)"

  check_eq "job as user nbtest" "nbtest" \
    "$(run su nbtest -s /bin/sh -c "cd '$D1' && srun -n1 id -un")"
  exit $failures
) || failures=$((failures + $?))
"$CL" stop "$D1"

# ---------------------------------------------------------------- 2 nodes
"$CL" start "$D2" --nodes 2 ${EXTRA[@]+"${EXTRA[@]}"}
(
  failures=0
  . "$D2/env.sh"
  cd "$D2"
  h=$(hostname)
  check_eq "srun -N2 -n2 hostname" "$h"$'\n'"$h" "$(run srun -N2 -n2 hostname)"
  check_eq "srun -N2 -n2: node names" $'n1\nn2' \
    "$(run srun -N2 -n2 printenv SLURMD_NODENAME | sort)"
  check_eq "srun -N2 -n2 --gpus-per-node=1: GPU per node" $'n1:0\nn2:0' \
    "$(run srun -N2 -n2 --gpus-per-node=1 sh -c 'echo $SLURMD_NODENAME:$CUDA_VISIBLE_DEVICES' | sort)"
  check_eq "srun --mpi=pmix -N2 -n2: PMIX_RANK" $'PMIX_RANK=0\nPMIX_RANK=1' \
    "$(run srun --mpi=pmix -N2 -n2 env | grep '^PMIX_RANK=' | sort)"
  check_eq "srun --mpi=pmix -n2 (one node): PMIX_RANK" $'PMIX_RANK=0\nPMIX_RANK=1' \
    "$(run srun --mpi=pmix -n2 env | grep '^PMIX_RANK=' | sort)"
  exit $failures
) || failures=$((failures + $?))

if [ "$failures" -ne 0 ]; then
  echo "smoke: $failures check(s) failed" >&2
  "$CL" logs "$D1" || true
  "$CL" logs "$D2" || true
  exit 1
fi
echo "smoke: all checks passed in $((SECONDS - T0)) s"
