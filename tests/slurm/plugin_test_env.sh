# tests/slurm/plugin_test_env.sh — sourced by the test scripts that run spank_numabind.so on
# the local cluster (tests/slurm/*.sh, tests/load/load_test.sh). Sets ROOT (the source
# tree), CL (cluster.sh), GEN (gen_topology.py), SO_SRC (the plugin: $1 or the build's), and
# checks what every such test needs: root, the listed tools, the plugin file and the step
# engine beside it (numabind_stepd.so). install_plugin DIR copies both into DIR, with the task
# probe (report.sh) and the CPU-list helper it imports (tests/lib/cpulist.py); test_workdir
# NAME makes the test's directory D and cleans it up at exit (below).
# Sources tests/lib/cluster.sh (and with it tests/lib/checks.sh).
#   . "$(dirname "$0")/../slurm/plugin_test_env.sh" "${1:-}" TOOL...
# Exit 77 (skipped) without root or a tool, 1 without the plugin.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CL=$ROOT/tests/slurm/cluster.sh
GEN=$ROOT/tests/tools/gen_topology.py
SO_SRC=${1:-$ROOT/build/spank/spank_numabind.so}
shift
# shellcheck source=tests/lib/cluster.sh
. "$ROOT/tests/lib/cluster.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root (starts slurmctld/slurmd)"
need slurmd slurmctld munged python3 "$@"
[ -f "$SO_SRC" ] || { echo "plugin $SO_SRC not found (build target spank_numabind)"; exit 1; }
ENGINE_SRC=$(dirname "$SO_SRC")/numabind_stepd.so
[ -f "$ENGINE_SRC" ] || { echo "step engine $ENGINE_SRC not found beside the plugin (build target numabind_stepd)"; exit 1; }
# A private copy of all four (readable by slurmstepd and the job user wherever the build is;
# rebuilds during the run do not matter).
install_plugin() {
  cp "$SO_SRC" "$1/spank_numabind.so" && cp "$ENGINE_SRC" "$1/numabind_stepd.so" &&
    cp "$ROOT/tests/slurm/report.sh" "$1/report.sh" && cp "$ROOT/tests/lib/cpulist.py" "$1/cpulist.py" &&
    chmod 0755 "$1/spank_numabind.so" "$1/numabind_stepd.so" "$1/report.sh" && chmod 0644 "$1/cpulist.py"
}
[ -x "$CL" ] && [ -f "$GEN" ] || { echo "$CL or $GEN missing"; exit 1; }
# test_workdir NAME: D=/tmp/NAME.XXXXXX (0755, for the job user); at exit every cluster under
# D/c* is stopped and D removed, unless a check failed or NBSPANK_KEEP=1 ("directory kept: D").
test_workdir() {
  D=$(mktemp -d "/tmp/$1.XXXXXX") && chmod 0755 "$D" || exit 1
  trap _nb_workdir_cleanup EXIT
  trap 'exit 130' INT TERM
}
_nb_workdir_cleanup() {
  local rc=$?
  cluster_stop "$D"/c*
  if [ "${NBSPANK_KEEP:-0}" = 1 ] || [ "$failures" -ne 0 ]; then echo "directory kept: $D"; else rm -rf "$D"; fi
  exit $rc
}
