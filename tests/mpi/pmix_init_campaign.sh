#!/usr/bin/env bash
# tests/mpi/pmix_init_campaign.sh N MODE WHAT — the measurement behind docs/MPI.md's table;
# not part of ctest (minutes). N consecutive
#   mpirun -np 2 --bind-to none [numabind run --mode exclusive --rank-source pmix --] mpi_probe
# MODE: normal, or unresolvable (each run in its own UTS namespace with a host name nothing
# resolves; root). WHAT: pmix (numabind with --rank-source pmix), env (numabind, launcher
# variables), control (no numabind). A run fails when mpirun exits non-zero, hangs past 40 s,
# or fewer than 2 MPI_PROBE lines appear. Needs a build in BUILD (default ./build).
set -u
n=${1:?N} mode=${2:?normal|unresolvable} what=${3:?pmix|env|control}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
xml=$(mktemp)
trap 'rm -f "$xml"' EXIT
python3 "$root/tests/tools/gen_topology.py" -o "$xml" --gpu package:0 --gpu package:0 >/dev/null || exit 1
fails=0 hangs=0
for i in $(seq 1 "$n"); do
  case $what in
    pmix) inner="$build/numabind run --mode exclusive --rank-source pmix --topology $xml --" ;;
    env) inner="$build/numabind run --mode exclusive --topology $xml --" ;;
    control) inner="" ;;
    *) echo "WHAT: pmix, env or control"; exit 2 ;;
  esac
  cmd="timeout -k 5 40 mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none $inner $build/tests/mpi/numabind_mpi_probe"
  if [ "$mode" = unresolvable ]; then
    out=$(unshare --uts sh -c "hostname nb-unresolvable-$RANDOM$RANDOM; $cmd" 2>&1); rc=$?
  else
    out=$($cmd 2>&1); rc=$?
  fi
  lines=$(grep -c '^MPI_PROBE ' <<<"$out")
  if [ $rc -ne 0 ] || [ "$lines" -ne 2 ]; then
    fails=$((fails + 1)); [ $rc -eq 124 ] && hangs=$((hangs + 1))
    echo "run $i: rc $rc, $lines probe lines"; grep -v '^MPI_PROBE' <<<"$out" | head -3
  fi
  [ $((i % 50)) -eq 0 ] && echo "progress $i fails $fails hangs $hangs"
done
echo "RESULT mode=$mode what=$what runs=$n failures=$fails hangs=$hangs load=$(cut -d' ' -f1-3 /proc/loadavg)"
[ "$fails" -eq 0 ]
