# shellcheck shell=bash
# tests/lib/cluster.sh — for the scripts that run jobs on a private local Slurm cluster
# (slurm, load, mpi, package tiers): start and stop it through tests/slurm/cluster.sh (which
# writes the configuration and runs munged, slurmctld, slurmd), and read the lines of the task
# probe tests/slurm/report.sh ("R TAG rank=0 local=0 node=n1 cpus=0-3 mode=node ..."). Needs
# root, as cluster.sh does. Source it (it sources checks.sh for fail):
#   . "$(dirname "$0")/../lib/cluster.sh"
#
#   CL                           cluster.sh (default tests/slurm/cluster.sh; set it before
#                                sourcing to use another)
#   cluster_start LOG DIR [OPTION...]
#                                cluster.sh start DIR OPTION..., its output in LOG; then
#                                sources DIR/env.sh (SLURM_CONF and the rest, for srun, sbatch,
#                                salloc) and returns 0. If it does not start: prints LOG,
#                                fail "cannot start the test cluster in DIR", returns 1
#                                (callers: cluster_start ... || exit 1)
#   cluster_stop DIR...          cluster.sh stop DIR for each, quietly; never fails
#   plugstack_lines FILE LINE... FILE (a cluster's plugstack.conf, which srun, sbatch and
#                                slurmstepd re-read per launch) holds exactly LINE..., one a line
#   probe_step DIR SRUN_ARG...   srun SRUN_ARG... DIR/report.sh (the task probe install_plugin
#                                put in DIR; 60 s at most): its R lines sorted by global rank in
#                                DIR/out, all it printed in DIR/out.raw, its stderr in DIR/err,
#                                srun's exit status in RC. Variables set on the call reach the
#                                tasks (NBPROBE_DEVDIR=... probe_step ...; SLURM_CONF=... too)
#   report_values FILE KEY       the KEY= value of every R line of FILE that has KEY, one per line
#   report_by_rank FILE KEY      "RANK:VALUE" for every line of FILE (VALUE empty when absent)
_nb_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/checks.sh
. "$_nb_lib/checks.sh"
CL=${CL:-$(cd "$_nb_lib/../slurm" && pwd)/cluster.sh}

cluster_start() {
  local _nb_log=$1 _nb_dir=$2
  shift 2
  if ! "$CL" start "$_nb_dir" "$@" >"$_nb_log" 2>&1; then
    cat "$_nb_log"
    fail "cannot start the test cluster in $_nb_dir"
    return 1
  fi
  # shellcheck disable=SC1091
  . "$_nb_dir/env.sh"
  return 0
}
cluster_stop() {
  local _nb_dir
  for _nb_dir in "$@"; do "$CL" stop "$_nb_dir" >/dev/null 2>&1 || true; done
  return 0
}
plugstack_lines() {
  local _nb_file=$1
  shift
  printf '%s\n' "$@" >"$_nb_file"
}
probe_step() {
  local _nb_dir=$1
  shift
  timeout 60 srun "$@" "$_nb_dir/report.sh" >"$_nb_dir/out.raw" 2>"$_nb_dir/err"
  # shellcheck disable=SC2034  # read by the caller
  RC=$?
  grep '^R ' "$_nb_dir/out.raw" | sort -t= -k2,2n >"$_nb_dir/out"
  return 0
}
report_values() {
  awk -v k="$2" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$1"
}
report_by_rank() {
  awk -v k="$2" '{ r = ""; v = ""
    for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "rank") r = a[2]; if (a[1] == k) v = substr($i, length(k) + 2) }
    print r ":" v }' "$1"
}
