#!/usr/bin/env bash
# examples/srun-mpi.sh — an MPI job launched directly by Slurm, each task through numabind.
#
#   sbatch -N2 --ntasks-per-node=4 --gpus-per-node=4 examples/srun-mpi.sh ./my_mpi_app [ARGS...]
#   # or, inside salloc:  examples/srun-mpi.sh ./my_mpi_app
#
# srun --mpi=pmix starts the tasks; the MPI library connects to slurmstepd's PMIx server in
# MPI_Init. numabind takes the task's place on the node from SLURM_LOCALID and
# SLURM_STEP_TASKS_PER_NODE (no PMIx connection, so MPI_Init still works), and the visible
# GPUs from CUDA_VISIBLE_DEVICES (set by Slurm from --gpus*/--gres).
#
# --cpu-bind=none: Slurm's task/affinity would bind each task first; numabind replaces that
# binding within the step's cpuset, so this only saves a binding that is discarded.
# With the numabind SPANK plugin installed, `srun --numa-binding=MODE` does the same without
# a wrapper; the wrapper is for clusters without the plugin.
#
# mpirun inside the allocation instead of srun: use examples/mpirun.sh (the SPANK plugin would
# bind mpirun's orted daemons, not the ranks; the wrapper binds the ranks).
# Environment: NUMABIND (the binary, default: numabind on PATH), BIND_MODE (default exclusive),
# NUMABIND_ARGS (more `numabind run` options, e.g. "--devices 0,1 --mem bind --topology X.xml").
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: srun-mpi.sh PROGRAM [ARGS...]" >&2; exit 2; }
NUMABIND=${NUMABIND:-numabind}
MODE=${BIND_MODE:-exclusive}         # node | socket | exclusive | core-complex | none
read -ra opts <<<"${NUMABIND_ARGS:-}"   # more numabind options

exec srun --mpi=pmix --cpu-bind=none \
  "$NUMABIND" run --mode "$MODE" --verbose ${opts[@]+"${opts[@]}"} -- "$@"
