#!/bin/bash
# sbatch-ddp.sh — PyTorch DDP training (ResNet-18, synthetic images) with every task bound to
# the CPUs and memory of its GPU by the numabind SPANK plugin.
#
#   sbatch examples/sbatch-ddp.sh [train_resnet18.py options...]
#   NUMABIND_DRY_RUN=1 bash examples/sbatch-ddp.sh     # print the srun command, run nothing
#
# One task per GPU (--gpus-per-task=1): task r on a node gets its own GPU and, with
# --numa-binding=exclusive, its own share of the cores of that GPU's NUMA node (on a DGX A100:
# 8 cores + SMT siblings per task, e.g. task 0 -> GPU 0 -> CPUs 48-55,176-183 on NUMA 3).
# The whole node is allocated (--exclusive) so numabind can choose among all its CPUs.
# "verbose" prints one line per task with its binding on the job's stderr.
#
#SBATCH --job-name=ddp-resnet18
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --exclusive
#SBATCH --numa-binding=exclusive,verbose
#SBATCH --time=00:30:00
#SBATCH --output=ddp-resnet18-%j.out

set -euo pipefail

# The training script: next to this file, or installed with the package's examples.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=${TRAIN_SCRIPT:-$here/train_resnet18.py}
[ -f "$script" ] || script=/usr/share/doc/numabind/examples/train_resnet18.py
# sbatch runs a copy of this file from the spool directory: use the submit directory then.
if [ -n "${SLURM_SUBMIT_DIR:-}" ] && [ -f "$SLURM_SUBMIT_DIR/examples/train_resnet18.py" ] &&
   [ -z "${TRAIN_SCRIPT:-}" ]; then
  script=$SLURM_SUBMIT_DIR/examples/train_resnet18.py
fi

# Rendezvous for torch.distributed (env:// init): first node of the job, a free port.
if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
else
  MASTER_ADDR=127.0.0.1
fi
export MASTER_ADDR
export MASTER_PORT=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 10000))}

# Threads per task: the cores numabind gives each task (exclusive: cores of the NUMA node /
# tasks on it). Leave OMP_NUM_THREADS to the site if it is set already.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

# RANK / WORLD_SIZE / LOCAL_RANK come from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID
# inside train_resnet18.py. --cpu-bind is left alone: numabind's binding replaces Slurm's
# per-task default anyway (it is applied last, inside the step's cpuset).
# numabind plans inside the step's cpuset: the step must own the node's CPUs. The job has
# them (--exclusive) and a step uses all of the job's CPUs on its nodes (Slurm 22.05+;
# don't add --exact; Slurm 21.08 needs srun --whole instead).
cmd=(srun --kill-on-bad-exit=1 python3 "$script" --workers 6 --epochs 2 "$@")

if [ "${NUMABIND_DRY_RUN:-0}" = 1 ]; then
  printf 'MASTER_ADDR=%s MASTER_PORT=%s OMP_NUM_THREADS=%s\n' "$MASTER_ADDR" "$MASTER_PORT" "$OMP_NUM_THREADS"
  printf '%q ' "${cmd[@]}"; echo
  exit 0
fi
exec "${cmd[@]}"
