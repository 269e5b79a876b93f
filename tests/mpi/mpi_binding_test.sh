#!/usr/bin/env bash
# tests/mpi/mpi_binding_test.sh SCENARIO — numabind as the binder of MPI ranks, with the
# real Open MPI mpirun, Slurm's srun --mpi=pmix and the PMIx server of each.
#
# Environment (set by ctest, see tests/mpi/CMakeLists.txt):
#   NUMABIND      the numabind binary          MPI_PROBE   tests/mpi/mpi_probe.c, built with mpicc
#   GEN_TOPOLOGY  tests/tools/gen_topology.py  CLUSTER_SH  tests/slurm/cluster.sh
#   MPIRUN        mpirun (default: mpirun)     NUMABIND_TEST_TMP  scratch root (default /tmp)
# Scenarios:
#   pmix-errors           --rank-source pmix without/with an unresponsive server; no launcher
#   mpirun-exclusive      mpirun -np 2 --bind-to none; binder narrows to core = local rank
#   mpirun-node           mpirun -np 2 (mpirun binds rank r to CPU r); binder widens to the node
#   mpirun-pmix-source    --rank-source pmix on a non-MPI program under mpirun
#   mpirun-pmix-mpi       --rank-source pmix before an MPI program (gds=hash): MPI_Init works
#   mpirun-pmix-spends    the binder's query with the server's own store list chosen by the
#                         user: PMIx 4 (ds21) MPI_Init fails (why numabind sets hash); PMIx 5 works
#   mpirun-pmix-disagree  a launcher variable contradicting PMIx: warning, PMIx wins
#   prterun               Open MPI 5's prterun: its variables, numabind run, --rank-source pmix
#   srun                  private 2-node Slurm cluster: srun --mpi=pmix -n2, -N2 -n4, pmix source
#   salloc-mpirun         private 2-node Slurm cluster: mpirun -np 4 inside salloc -N2 -n4
# Expected CPU sets are derived from the hwloc XML with hwloc-calc, not from numabind:
# exclusive = the node's cores cut into local_size equal consecutive blocks (on this 2-core
# machine: local rank 0 -> CPU 0, local rank 1 -> CPU 1); node = the PUs of NUMA node 0.
# MPI ranks come from the probe (MPI_Comm_rank, MPI_Comm_split_type SHARED), not from
# launcher variables. Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail

scenario=${1:?usage: mpi_binding_test.sh SCENARIO}
NUMABIND=${NUMABIND:?NUMABIND not set}
MPIRUN=${MPIRUN:-mpirun}
here=$(cd "$(dirname "$0")" && pwd)
GEN_TOPOLOGY=${GEN_TOPOLOGY:-$here/../tools/gen_topology.py}
CLUSTER_SH=${CLUSTER_SH:-$here/../slurm/cluster.sh}
# mpirun refuses root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRTE_ALLOW_RUN_AS_ROOT=1 PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Quiet Open MPI's and PMIx's complaints about this VM's missing high-speed networks.
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_mpi_warn_on_fork=0

CL=$CLUSTER_SH
# shellcheck source=tests/lib/cluster.sh
. "$here/../lib/cluster.sh"

work=$(mktemp -d "${NUMABIND_TEST_TMP:-/tmp}/numabind-mpi.XXXXXX") || exit 1
chmod 0755 "$work"
cluster=""
cleanup() {
  if [ -n "$cluster" ]; then cluster_stop "$cluster"; fi
  if [ "$failures" -eq 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "artifacts kept in $work"; fi
}
trap cleanup EXIT

[ -x "$NUMABIND" ] || skip "numabind binary $NUMABIND missing"

# ---------------------------------------------------------------- topology + expectations
xml=$work/topology.xml
make_topology() {
  need hwloc-calc
  need python3
  [ -f "$GEN_TOPOLOGY" ] || skip "gen_topology.py not found at $GEN_TOPOLOGY"
  python3 "$GEN_TOPOLOGY" -o "$xml" --gpu package:0 --gpu package:0 >/dev/null ||
    { fail "gen_topology.py"; finish "mpi $scenario"; }
  [ "$(hwloc-calc --input "$xml" --number-of numa pu:all)" = 1 ] ||
    skip "the CPU expectations of this test assume one NUMA node"
  ncores=$(hwloc-calc --input "$xml" --number-of core all)
  [ "$ncores" -ge 2 ] || skip "needs at least 2 cores"
}

expected_cpus() {  # MODE LOCAL_RANK LOCAL_SIZE
  local mode=$1 lr=$2 ls=$3
  case $mode in
    exclusive)
      local per=$((ncores / ls)) first last
      first=$((lr * per)); last=$((first + per - 1))
      cpu_list "$(hwloc-calc --input "$xml" --intersect pu "core:$first-$last")" ;;
    node) cpu_list "$(hwloc-calc --input "$xml" --intersect pu numa:0)" ;;
    *) echo "?" ;;
  esac
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# check_probe NAME OUT ERR NRANKS PER_NODE MODE SOURCE_REGEX
# OUT holds the MPI_PROBE lines, ERR numabind's --verbose lines.
check_probe() {
  local name=$1 out=$2 err=$3 n=$4 per=$5 mode=$6 source=$7 ok=1 line
  local lines; lines=$(grep -c '^MPI_PROBE ' "$out")
  if [ "$lines" != "$n" ]; then
    fail "$name: $lines probe line(s), expected $n (MPI_Init failed or ranks missing)"
    sed 's/^/    /' "$out" "$err" | tail -40
    return
  fi
  local seen=""
  while read -r line; do
    local wr ws lr ls sum cpus dev
    wr=$(field world_rank "$line"); ws=$(field world_size "$line"); lr=$(field local_rank "$line")
    ls=$(field local_size "$line"); sum=$(field rank_sum "$line"); cpus=$(field cpus "$line")
    dev=$(field numabind_device "$line")
    seen+="$wr,"
    [ "$ws" = "$n" ] || { fail "$name: rank $wr sees world size $ws, expected $n"; ok=0; }
    [ "$sum" = $((n * (n - 1) / 2)) ] || { fail "$name: rank $wr: allreduce sum $sum"; ok=0; }
    # block distribution: PER_NODE consecutive ranks per node
    [ "$lr" = $((wr % per)) ] && [ "$ls" = "$per" ] ||
      { fail "$name: rank $wr: MPI local rank $lr/$ls, expected $((wr % per))/$per"; ok=0; }
    local want; want=$(expected_cpus "$mode" "$lr" "$ls")
    [ "$(cpu_list "$cpus")" = "$want" ] ||
      { fail "$name: rank $wr (local $lr): Cpus_allowed_list $cpus, expected $want ($mode)"; ok=0; }
    [ "$dev" = "$lr" ] || { fail "$name: rank $wr (local $lr): NUMABIND_DEVICE=$dev"; ok=0; }
  done < <(grep '^MPI_PROBE ' "$out")
  [ "$(tr , '\n' <<<"${seen%,}" | sort -n | paste -sd, -)" = "$(seq -s, 0 $((n - 1)))" ] ||
    { fail "$name: world ranks $seen"; ok=0; }
  local srcs; srcs=$(grep -cE "numabind: local rank [0-9]+ from $source" "$err")
  [ "$srcs" = "$n" ] || { fail "$name: $srcs of $n ranks took the local rank from /$source/"; ok=0; sed 's/^/    /' "$err" | head -20; }
  [ $ok = 1 ] && pass "$name: $n ranks, MPI_Init ok, binding $mode as planned, rank source /$source/"
}

# check_shell NAME OUT ERR N PER_NODE TRUTH_VAR MODE: non-MPI program; truth = a launcher variable
check_shell() {
  local name=$1 out=$2 err=$3 n=$4 ls=$5 truth=$6 mode=$7 ok=1 line
  [ "$(grep -c '^SHELL_PROBE ' "$out")" = "$n" ] ||
    { fail "$name: expected $n SHELL_PROBE lines"; sed 's/^/    /' "$out" "$err" | tail -30; return; }
  while read -r line; do
    local t dev cpus want
    t=$(field "$truth" "$line"); dev=$(field nb_device "$line"); cpus=$(field cpus "$line")
    [ -n "$t" ] && [ "$dev" = "$t" ] || { fail "$name: device $dev (planned for the PMIx local rank), $truth=$t"; ok=0; }
    want=$(expected_cpus "$mode" "$t" "$ls")
    [ "$(cpu_list "$cpus")" = "$want" ] || { fail "$name: $truth=$t: cpus $cpus, expected $want"; ok=0; }
  done < <(grep '^SHELL_PROBE ' "$out")
  [ "$(grep -cE 'numabind: local rank [0-9]+ from PMIx PMIX_LOCAL_RANK .*local tasks [0-9]+ from (PMIx PMIX_LOCAL_(SIZE|PEERS)|.*the PMIx server gave none)' "$err")" = "$n" ] ||
    { fail "$name: not every rank used PMIx"; ok=0; sed 's/^/    /' "$err" | head; }
  [ $ok = 1 ] && pass "$name: $n non-MPI tasks, PMIx local ranks = \$$truth, binding $mode as planned"
}

# A non-MPI program: the device numabind gave it (exclusive with --devices 0,1: device =
# local rank), the launcher's own local-rank variables as the truth, and its CPUs.
SHELL_PROG='echo "SHELL_PROBE nb_device=${NUMABIND_DEVICE:-} slurm=${SLURM_LOCALID:-} ompi=${OMPI_COMM_WORLD_LOCAL_RANK:-} pmix_rank=${PMIX_RANK:-} cpus=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status) "'

run_case() {  # NAME CMD... : runs with a timeout (RUN_TIMEOUT, 120 s), output to $work/NAME.{out,err}
  local name=$1; shift
  timeout -k 5 "${RUN_TIMEOUT:-120}" "$@" >"$work/$name.out" 2>"$work/$name.err"
  echo $? >"$work/$name.rc"
  # Open MPI 5's own MPI_Init race (ob1 receives on MPI_COMM_WORLD before setting it up,
  # open-mpi/ompi#12495 and PR #13559): a rank segfaults there now and then whatever binds
  # it. Seen once in six runs of the 2-node srun case on Debian 13; that run is made again, once.
  if grep -q "mca_pml_ob1_recv_frag_callback_match" "$work/$name.err"; then
    echo "note - $name: Open MPI's MPI_Init race (open-mpi/ompi#12495) hit; run again"
    mv "$work/$name.err" "$work/$name.race.err"
    timeout -k 5 "${RUN_TIMEOUT:-120}" "$@" >"$work/$name.out" 2>"$work/$name.err"
    echo $? >"$work/$name.rc"
  fi
}

mpi_common() {
  need "$MPIRUN"
  [ -n "${MPI_PROBE:-}" ] && [ -x "$MPI_PROBE" ] || skip "MPI probe not built"
  make_topology
  [ "$ncores" = 2 ] || skip "the mpirun cases run -np 2 and expect 2 cores (this machine has $ncores)"
}

nb_run() { echo "$NUMABIND" run --verbose --topology "$xml" --devices 0,1 "$@"; }

# ---------------------------------------------------------------- scenarios
case $scenario in
pmix-errors)
  make_topology
  # 1. no PMIx server in the environment: immediate, clear, no connection attempt
  start=$(date +%s%N)
  env -u PMIX_NAMESPACE -u PMIX_SERVER_URI -u PMIX_SERVER_URI2 -u PMIX_SERVER_URI21 -u PMIX_SERVER_URI3 \
    -u PMIX_SERVER_URI4 -u PMIX_SERVER_URI41 "$NUMABIND" run --rank-source pmix --topology "$xml" -- true \
    >"$work/a.out" 2>"$work/a.err"
  rc=$?; ms=$((($(date +%s%N) - start) / 1000000))
  msg=$(cat "$work/a.err")
  if [ $rc = 1 ] && [ "$(wc -l <"$work/a.err")" = 1 ] && grep -q "PMIx" <<<"$msg" && [ $ms -lt 3000 ]; then
    pass "no server: rc 1 in ${ms} ms: $msg"
  else fail "no server: rc $rc in ${ms} ms: $msg"; fi
  if "$NUMABIND" run --rank-source pmix --topology "$xml" -- true 2>&1 | grep -q "built without PMIx"; then
    skip "numabind was built without PMIx (the remaining checks need the adapter)"
  fi
  # 2. a server that accepts but never answers: bounded by NUMABIND_PMIX_TIMEOUT
  need python3
  port_file=$work/port
  python3 - "$port_file" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held, end = [], time.time() + 60
s.settimeout(0.5)
while time.time() < end:
    try: held.append(s.accept())
    except OSError: pass
PY
  silent=$!
  for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
  port=$(cat "$port_file")
  start=$(date +%s%N)
  env PMIX_NAMESPACE=silent PMIX_RANK=0 PMIX_SERVER_URI4="silent.0;tcp4://127.0.0.1:$port" \
    PMIX_SERVER_URI41="silent.0;tcp4://127.0.0.1:$port" PMIX_SERVER_URI3="silent.0;tcp4://127.0.0.1:$port" \
    PMIX_SERVER_URI2="silent.0;tcp4://127.0.0.1:$port" NUMABIND_PMIX_TIMEOUT=2 \
    timeout 30 "$NUMABIND" run --rank-source pmix --topology "$xml" -- true >"$work/b.out" 2>"$work/b.err"
  rc=$?; ms=$((($(date +%s%N) - start) / 1000000))
  kill "$silent" 2>/dev/null; wait "$silent" 2>/dev/null
  msg=$(cat "$work/b.err")
  if [ $rc = 1 ] && [ $ms -lt 6000 ] && grep -q "did not answer within 2 s" <<<"$msg"; then
    pass "silent server: rc 1 after ${ms} ms: $msg"
  else fail "silent server: rc $rc after ${ms} ms: $msg"; fi
  # 3. auto never uses PMIx: with PMIx variables but no launcher variable it asks for --local-rank
  env -u SLURM_LOCALID -u OMPI_COMM_WORLD_LOCAL_RANK -u MPI_LOCALRANKID -u MV2_COMM_WORLD_LOCAL_RANK \
    -u PALS_LOCAL_RANKID -u LOCAL_RANK PMIX_NAMESPACE=x PMIX_SERVER_URI4="x.0;tcp4://127.0.0.1:$port" \
    "$NUMABIND" run --topology "$xml" -- true >"$work/c.out" 2>"$work/c.err"
  rc=$?; msg=$(cat "$work/c.err")
  if [ $rc = 1 ] && grep -q "cannot determine the local rank" <<<"$msg" && grep -q -- "--local-rank" <<<"$msg" &&
     grep -q -- "--rank-source pmix" <<<"$msg"; then pass "no launcher variable: $msg"
  else fail "no launcher variable: rc $rc: $msg"; fi
  # 4. --local-rank/--ntasks are enough (no launcher at all)
  out=$(env -u SLURM_LOCALID -u OMPI_COMM_WORLD_LOCAL_RANK "$NUMABIND" run --verbose --topology "$xml" \
        --mode exclusive --local-rank 1 --ntasks 2 -- sh -c 'echo $NUMABIND_CPUS' 2>&1)
  grep -q "local rank 1 from --local-rank, local tasks 2 from --ntasks" <<<"$out" && tail -1 <<<"$out" | grep -qx "1" &&
    pass "--local-rank 1 --ntasks 2 -> CPUs 1" || fail "--local-rank/--ntasks: $out"
  ;;

mpirun-exclusive)
  mpi_common
  # control: without the binder mpirun --bind-to none leaves every rank on all CPUs
  run_case control "$MPIRUN" -np 2 --bind-to none "$MPI_PROBE"
  grep -q "cpus=0-1 " "$work/control.out" && pass "control: mpirun --bind-to none leaves the ranks on 0-1" ||
    fail "control: $(cat "$work/control.out")"
  run_case excl "$MPIRUN" -np 2 --bind-to none $(nb_run --mode exclusive) -- "$MPI_PROBE"
  [ "$(cat "$work/excl.rc")" = 0 ] || fail "mpirun exit status $(cat "$work/excl.rc")"
  check_probe "mpirun -np 2 --bind-to none, exclusive" "$work/excl.out" "$work/excl.err" 2 2 exclusive \
    "OMPI_COMM_WORLD_LOCAL_RANK, local tasks 2 from OMPI_COMM_WORLD_LOCAL_SIZE"
  ;;

mpirun-node)
  mpi_common
  # control: mpirun's own default binding (rank r -> one core) ...
  run_case control "$MPIRUN" -np 2 "$MPI_PROBE"
  grep -q "cpus=0-1 " "$work/control.out" && echo "note: this mpirun does not bind by default" ||
    pass "control: mpirun binds each rank to one core by itself"
  # ... is replaced by the binder's plan (node: both GPUs on NUMA node 0 -> all its CPUs)
  run_case node "$MPIRUN" -np 2 $(nb_run --mode node) -- "$MPI_PROBE"
  [ "$(cat "$work/node.rc")" = 0 ] || fail "mpirun exit status $(cat "$work/node.rc")"
  check_probe "mpirun -np 2 (mpirun binding), node" "$work/node.out" "$work/node.err" 2 2 node \
    "OMPI_COMM_WORLD_LOCAL_RANK"
  ;;

mpirun-pmix-source)
  mpi_common
  run_case pmix "$MPIRUN" -np 2 --bind-to none $(nb_run --mode exclusive --rank-source pmix) -- sh -c "$SHELL_PROG"
  [ "$(cat "$work/pmix.rc")" = 0 ] || fail "mpirun exit status $(cat "$work/pmix.rc")"
  check_shell "mpirun -np 2, --rank-source pmix, non-MPI program" "$work/pmix.out" "$work/pmix.err" 2 2 ompi exclusive
  ;;

mpirun-pmix-mpi)
  # --rank-source pmix in front of an MPI program: numabind sets PMIX_MCA_gds=hash for its
  # query and the program, and MPI_Init works; the PMIx answer agrees with mpirun's variables.
  mpi_common
  for i in 1 2 3; do
    run_case "mpi$i" "$MPIRUN" -np 2 --bind-to none $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
    [ "$(cat "$work/mpi$i.rc")" = 0 ] || fail "run $i: mpirun exit status $(cat "$work/mpi$i.rc")"
    check_probe "run $i: mpirun -np 2, --rank-source pmix, MPI program" "$work/mpi$i.out" "$work/mpi$i.err" 2 2 exclusive \
      "PMIx PMIX_LOCAL_RANK \(.*(PMIX_MCA_gds=hash|PMIx 5 default stores)\), agrees with OMPI_COMM_WORLD_LOCAL_RANK, local tasks 2 from PMIx PMIX_LOCAL_SIZE"
  done
  grep -h 'PMIX_MCA_gds' "$work"/mpi*.err | head -n 2
  ;;

mpirun-pmix-spends)
  # What numabind's PMIX_MCA_gds=hash avoids: the binder's query with the server's own store
  # list (PMIX_GDS_MODULE as the launcher exports it: PMIx 4 "ds21,ds12,hash", PMIx 5
  # "shmem2,hash"), set by the user, so numabind keeps it. Measured (docs/MPI.md):
  #   PMIx 4.x: the query uses up the ds21 slots, the program's MPI_Init fails;
  #   PMIx 5.x: MPI_Init works (no spent identity; hash is then merely harmless).
  mpi_common
  pmix_version=$(pkg-config --modversion pmix 2>/dev/null || echo "?")
  gds=$("$MPIRUN" -np 1 printenv PMIX_GDS_MODULE 2>/dev/null | head -n1)
  [ -n "$gds" ] || { fail "the launcher exports no PMIX_GDS_MODULE"; gds=hash; }
  run_case spent env PMIX_MCA_gds="$gds" "$MPIRUN" -np 2 --bind-to none $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
  probes=$(grep -c '^MPI_PROBE ' "$work/spent.out"); rc=$(cat "$work/spent.rc")
  grep -q "PMIX_MCA_gds=$gds from the environment" "$work/spent.err" && pass "numabind kept the user's PMIX_MCA_gds=$gds" ||
    fail "verbose does not name PMIX_MCA_gds=$gds from the environment"
  case $pmix_version in
    4.*) if [ "$probes" = 0 ] && [ "$rc" != 0 ]; then
           pass "PMIx $pmix_version, stores $gds: the binder's query makes MPI_Init fail (rc $rc): the reason for the hash default"
         else
           fail "PMIx $pmix_version, stores $gds: MPI_Init succeeded after a PMIx query ($probes probe lines): the hazard in docs/MPI.md is gone; revisit the note there"
         fi ;;
    *) [ "$rc" = 0 ] && [ "$probes" = 2 ] &&
         pass "PMIx $pmix_version, stores $gds: MPI_Init works after the binder's query (no spent identity on PMIx 5)" ||
         { fail "PMIx $pmix_version, stores $gds: rc $rc, $probes of 2 ranks passed MPI_Init after the binder's query"; sed 's/^/    /' "$work/spent.err" | head; } ;;
  esac
  ;;

mpirun-pmix-disagree)
  # A launcher variable that contradicts the PMIx server: a warning naming both, PMIx wins.
  mpi_common
  run_case dis "$MPIRUN" -np 2 --bind-to none sh -c \
    'OMPI_COMM_WORLD_LOCAL_RANK=$((1 - OMPI_COMM_WORLD_LOCAL_RANK)) exec "$@"' sh \
    $(nb_run --mode exclusive --rank-source pmix) -- sh -c "$SHELL_PROG"
  check_shell "mpirun -np 2, --rank-source pmix, swapped OMPI_COMM_WORLD_LOCAL_RANK" "$work/dis.out" "$work/dis.err" 2 2 pmix_rank exclusive
  n=$(grep -cE 'numabind: warning: the PMIx server says local rank [01] but OMPI_COMM_WORLD_LOCAL_RANK=[01]; using PMIx' "$work/dis.err")
  [ "$n" = 2 ] && pass "both ranks warned about the disagreement" ||
    { fail "$n of 2 ranks warned about PMIx vs OMPI_COMM_WORLD_LOCAL_RANK"; sed 's/^/    /' "$work/dis.err" | head; }
  ;;

mpirun-pmix-slow-query)
  # One rank's binder query lets go of its PMIx connection 1.5 s late (slow_query_shim.c holds
  # it before PMIx_Finalize), so the other rank's program would be fencing in MPI_Init when it
  # closes: PMIx servers up to 5.0.x then complete that fence short and the late rank's MPI_Init
  # waits forever (openpmix#3931; seen in CI as a rare hang of salloc-mpirun). numabind's ranks
  # wait for the node's queries before starting the program, so both pass MPI_Init.
  mpi_common
  [ -n "${SLOW_QUERY_SHIM:-}" ] && [ -f "$SLOW_QUERY_SHIM" ] || skip "the slow-query shim is not built (no PMIx)"
  slow=(env LD_PRELOAD="$SLOW_QUERY_SHIM" NB_SLOW_QUERY_RANK=1 NB_SLOW_QUERY_MS=1500)
  RUN_TIMEOUT=40 run_case slow "$MPIRUN" -np 2 --bind-to none "${slow[@]}" \
    $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
  check_probe "mpirun -np 2, rank 1's query held 1.5 s, MPI program" "$work/slow.out" "$work/slow.err" 2 2 exclusive \
    "PMIx PMIX_LOCAL_RANK \(.*the node's 2 queries done after [0-9]+ ms"
  waited=$(sed -nE "s/.*local rank 0 from PMIx .*the node's 2 queries done after ([0-9]+) ms.*/\1/p" "$work/slow.err")
  [ -n "$waited" ] && [ "$waited" -ge 1000 ] && pass "rank 0 waited ${waited} ms for rank 1's query" ||
    fail "rank 0 did not wait for rank 1's held query (waited '${waited}' ms)"
  leftover=$(find /dev/shm /tmp -maxdepth 1 -name "numabind-pmix-$(id -u)-*" -newer "$xml" 2>/dev/null)
  [ -z "$leftover" ] && pass "the wait left no files behind" || fail "files left behind: $leftover"
  # The hazard itself, with the wait switched off: a hang (bounded here) on PMIx <= 5.0.x.
  RUN_TIMEOUT=20 run_case nowait "$MPIRUN" -np 2 --bind-to none "${slow[@]}" NUMABIND_PMIX_WAIT=0 \
    $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
  probes=$(grep -c '^MPI_PROBE ' "$work/nowait.out")
  grep -q "no wait for the node's queries (NUMABIND_PMIX_WAIT=0)" "$work/nowait.err" &&
    pass "NUMABIND_PMIX_WAIT=0: verbose says there was no wait" || fail "NUMABIND_PMIX_WAIT=0 not reported"
  echo "note: without the wait, PMIx $(pkg-config --modversion pmix 2>/dev/null || echo ?): $probes of 2 ranks passed MPI_Init (rc $(cat "$work/nowait.rc"))"
  ;;

prterun)
  # Open MPI 5's runtime (PRRTE) started directly: which local-rank variables the ranks get.
  mpi_common
  command -v prterun >/dev/null || skip "prterun not installed (Open MPI < 5 has no PRRTE)"
  run_case prte_env prterun -np 2 --bind-to none sh -c 'echo "ENV $(env | grep -E "^(OMPI_COMM_WORLD_LOCAL_(RANK|SIZE)|PMIX_RANK|PMIX_LOCAL_RANK|PRTE_LOCAL_RANK)=" | sort | tr "\n" " ")"'
  sed 's/^/    /' "$work/prte_env.out"
  if grep -q 'OMPI_COMM_WORLD_LOCAL_RANK=' "$work/prte_env.out"; then
    run_case prte prterun -np 2 --bind-to none $(nb_run --mode exclusive) -- "$MPI_PROBE"
    check_probe "prterun -np 2, exclusive" "$work/prte.out" "$work/prte.err" 2 2 exclusive "OMPI_COMM_WORLD_LOCAL_RANK"
  else
    run_case prte prterun -np 2 --bind-to none $(nb_run --mode exclusive) -- "$MPI_PROBE"
    grep -q "cannot determine the local rank" "$work/prte.err" && pass "prterun exports no launcher variable: auto says so" ||
      fail "prterun without launcher variables: $(head -3 "$work/prte.err")"
  fi
  run_case prte_pmix prterun -np 2 --bind-to none $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
  check_probe "prterun -np 2, --rank-source pmix, MPI program" "$work/prte_pmix.out" "$work/prte_pmix.err" 2 2 exclusive \
    "PMIx PMIX_LOCAL_RANK"
  ;;

srun | salloc-mpirun)
  [ "$(id -u)" = 0 ] || skip "the private Slurm cluster needs root"
  need srun; need salloc; need slurmd
  [ -x "$CLUSTER_SH" ] || skip "cluster.sh not found at $CLUSTER_SH"
  mpi_common
  cluster=$work/cluster
  cluster_start "$work/cluster.log" "$cluster" --nodes 2 || { cluster=""; exit 1; }
  cd "$work" || exit 1
  srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no PMIx plugin (srun --mpi=list)"
  if [ "$scenario" = srun ]; then
    run_case control srun --mpi=pmix -N1 -n2 --cpu-bind=none "$MPI_PROBE"
    grep -q "cpus=0-1 " "$work/control.out" && pass "control: srun --cpu-bind=none leaves the ranks on 0-1" ||
      fail "control: $(cat "$work/control.out" "$work/control.err")"
    run_case s1 srun --mpi=pmix -N1 -n2 --cpu-bind=none $(nb_run --mode exclusive) -- "$MPI_PROBE"
    check_probe "srun --mpi=pmix -N1 -n2 --cpu-bind=none, exclusive" "$work/s1.out" "$work/s1.err" 2 2 exclusive \
      "SLURM_LOCALID, local tasks 2 from SLURM_STEP_TASKS_PER_NODE"
    run_case s2 srun --mpi=pmix -N1 -n2 $(nb_run --mode node) -- "$MPI_PROBE"
    check_probe "srun --mpi=pmix -N1 -n2 (Slurm binding), node" "$work/s2.out" "$work/s2.err" 2 2 node "SLURM_LOCALID"
    run_case s3 srun --mpi=pmix -N2 -n4 --cpu-bind=none $(nb_run --mode exclusive) -- "$MPI_PROBE"
    check_probe "srun --mpi=pmix -N2 -n4, exclusive" "$work/s3.out" "$work/s3.err" 4 2 exclusive \
      "SLURM_LOCALID, local tasks 2 from SLURM_STEP_TASKS_PER_NODE"
    run_case s4 srun --mpi=pmix -N2 -n4 --cpu-bind=none $(nb_run --mode exclusive --rank-source pmix) -- sh -c "$SHELL_PROG"
    check_shell "srun --mpi=pmix -N2 -n4, --rank-source pmix, non-MPI program" "$work/s4.out" "$work/s4.err" 4 2 slurm exclusive
    run_case s5 srun --mpi=pmix -N2 -n4 --cpu-bind=none $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
    check_probe "srun --mpi=pmix -N2 -n4, --rank-source pmix, MPI program" "$work/s5.out" "$work/s5.err" 4 2 exclusive \
      "PMIx PMIX_LOCAL_RANK \(.*the node's 2 queries done after [0-9]+ ms, (PMIX_MCA_gds=hash|PMIx 5 default stores)\), agrees with SLURM_LOCALID, local tasks 2 from (PMIx PMIX_LOCAL_(SIZE|PEERS)|.*the PMIx server gave none)"
  else
    # mpirun inside the allocation: one orted per node through srun; the ranks inherit the
    # orted step's SLURM_LOCALID=0 — numabind must take Open MPI's variables instead.
    run_case m1 salloc -N2 -n4 "$MPIRUN" -np 4 --bind-to none $(nb_run --mode exclusive) -- "$MPI_PROBE"
    check_probe "salloc -N2 -n4 mpirun -np 4 --bind-to none, exclusive" "$work/m1.out" "$work/m1.err" 4 2 exclusive \
      "OMPI_COMM_WORLD_LOCAL_RANK \(inner launcher.*, local tasks 2 from OMPI_COMM_WORLD_LOCAL_SIZE"
    run_case m2 salloc -N2 -n4 "$MPIRUN" -np 4 $(nb_run --mode node) -- "$MPI_PROBE"
    check_probe "salloc -N2 -n4 mpirun -np 4, node" "$work/m2.out" "$work/m2.err" 4 2 node "OMPI_COMM_WORLD_LOCAL_RANK"
    run_case m3 salloc -N2 -n4 "$MPIRUN" -np 4 --bind-to none $(nb_run --mode exclusive --rank-source pmix) -- sh -c "$SHELL_PROG"
    check_shell "salloc -N2 -n4 mpirun -np 4, --rank-source pmix, non-MPI program" "$work/m3.out" "$work/m3.err" 4 2 ompi exclusive
    run_case m4 salloc -N2 -n4 "$MPIRUN" -np 4 --bind-to none $(nb_run --mode exclusive --rank-source pmix) -- "$MPI_PROBE"
    check_probe "salloc -N2 -n4 mpirun -np 4, --rank-source pmix, MPI program" "$work/m4.out" "$work/m4.err" 4 2 exclusive \
      "PMIx PMIX_LOCAL_RANK \(.*the node's 2 queries done after [0-9]+ ms, (PMIX_MCA_gds=hash|PMIx 5 default stores)\), agrees with OMPI_COMM_WORLD_LOCAL_RANK"
  fi
  ;;

*) echo "unknown scenario $scenario"; exit 2 ;;
esac

finish "mpi $scenario"
