#!/usr/bin/env bash
# examples/mpirun.sh — Open MPI's mpirun starting every rank through numabind.
#
#   examples/mpirun.sh NP PROGRAM [ARGS...]         e.g. examples/mpirun.sh 8 ./my_mpi_app
#
# numabind reads the rank's place on the node from OMPI_COMM_WORLD_LOCAL_RANK and
# OMPI_COMM_WORLD_LOCAL_SIZE (mpirun sets them; this costs nothing and leaves the PMIx
# connection to the application), binds the rank to the CPUs and memory of its GPU, sets
# CUDA_VISIBLE_DEVICES-style variables (NUMABIND_*), then execs PROGRAM, whose MPI_Init
# works as usual. Works the same inside salloc/sbatch (mpirun then starts one orted per node
# through srun; numabind prefers Open MPI's variables over the orted step's SLURM_LOCALID).
#
# --bind-to none: mpirun would otherwise bind rank r to core r before numabind runs. numabind
# replaces that binding anyway (it plans within the cgroup/cpuset, not within the launcher's
# affinity), so this only avoids a binding that is immediately discarded.
# Do NOT add --rank-source pmix here: it spends the rank's PMIx identity and MPI_Init fails.
# Environment: NUMABIND (the binary, default: numabind on PATH), BIND_MODE (default exclusive),
# NUMABIND_ARGS (more `numabind run` options, e.g. "--devices 0,1 --mem bind --topology X.xml").
set -euo pipefail
np=${1:?usage: mpirun.sh NP PROGRAM [ARGS...]}; shift
[ $# -ge 1 ] || { echo "usage: mpirun.sh NP PROGRAM [ARGS...]" >&2; exit 2; }
NUMABIND=${NUMABIND:-numabind}
MODE=${BIND_MODE:-exclusive}         # node | socket | exclusive | core-complex | none
read -ra opts <<<"${NUMABIND_ARGS:-}"   # more numabind options

extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)   # containers/CI often run as root

exec mpirun "${extra[@]}" -np "$np" --bind-to none \
  "$NUMABIND" run --mode "$MODE" --verbose ${opts[@]+"${opts[@]}"} -- "$@"
