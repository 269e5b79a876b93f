#!/usr/bin/env bash
# tests/slurm/cluster.sh — a private, throw-away Slurm cluster on this machine (as root).
#
#   cluster.sh start DIR [--nodes 1|2] [--plugstack FILE] [--cgroup] [--constrain-devices] [--no-constrain-cores] [--cgroup-v2]
#                        [--gpus N] [--node-gpus NODE:N] [--gres-order I,J,...] [--oversubscribe]
#                        [--port-base P] [--debug LEVEL] [--conf 'Key=Value']...
#                        [--slurmd-env NODE:VAR=VALUE]...
#   cluster.sh stop DIR        # cancel jobs, stop slurmd(s), slurmctld, munged of DIR only
#   cluster.sh status DIR      # daemons alive? + sinfo
#   cluster.sh logs DIR        # tail of every log under DIR/log
#
# Everything lives under DIR (created if needed, made 0755 so the job user can read it):
#   DIR/slurm.conf gres.conf cgroup.conf plugstack.conf (empty unless --plugstack FILE)
#   DIR/env.sh          source it: exports SLURM_CONF (+ NUMABIND_CLUSTER_DIR, ports, ...)
#   DIR/munge/          munge.key, munge.socket.2 (dir 0755), seed
#   DIR/log/            slurmctld.log slurmd.<node>.log munged.log *.out (daemon stdio)
#   DIR/run/            pid files: munged.pid slurmctld.pid slurmd.<node>.pid (ours; the
#                       daemons' own are *.slurm-pid and munged.pid.munge)
#   DIR/state/          StateSaveLocation;  DIR/spool/<node>/  SlurmdSpoolDir
#   DIR/tmp/<node>/     TmpFS (1777);  DIR/dev/<node>/nvidia0..N-1  fake GPUs (mknod c 195 minor)
#   DIR/ports           "PORT_BASE=..." ; SlurmctldPort=P, node n1 Port=P+1, n2 Port=P+2
# Nodes are called n1 (and n2), run as `slurmd -N nK` with NodeHostname=localhost,
# NodeAddr=127.0.0.1; the node shape (CPUs/Sockets/Cores/Threads/RealMemory) is `slurmd -C`'s.
# Partition "debug" (default) holds all nodes. Each node has Gres=gpu:N (default 2;
# --node-gpus n2:0 gives one node another count, 0 = a node without GPUs). --gres-order
# 1,0,3,2 lists the fake GPUs in gres.conf in that order of their device files (Slurm's gres
# index then differs from the file's number, as with a hand-written gres.conf not in PCI
# order). --constrain-devices implies --cgroup and sets ConstrainDevices=yes (task/cgroup's
# device cgroup: a task can open only its GPUs' files; open() of the others fails EPERM).
# --no-constrain-cores implies --cgroup with ConstrainCores=no (no cpuset per job or step).
# --cgroup-v2 implies --cgroup on the unified hierarchy (CgroupPlugin=cgroup/v2,
# IgnoreSystemd=yes, CgroupAutomount=yes; /sys/fs/cgroup must be a cgroup2 mount: the guest tier).
# The port base defaults to a free block in 20000-31999 derived from $$ (below the kernel's
# ephemeral range); FirstJobId is derived from it so two clusters never share job ids
# (which would collide in cgroup paths). DIR/plugstack.conf may be rewritten between srun
# calls (srun/sbatch/slurmstepd re-read it per launch; slurmd only at start).
# --slurmd-env NODE:VAR=VALUE puts VAR into that slurmd's environment (NODE = n1, n2 or all);
# slurmstepd inherits it, so a SPANK plugin can see per-node settings through getenv().
# A system user "nbtest" is created (idempotently) for jobs run as non-root:
#   su nbtest -s /bin/sh -c '. DIR/env.sh; cd /tmp; srun -n1 id -un'
# (DIR's parents must be traversable by nbtest — /tmp is fine, /root is not.)
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------- helpers
abspath() { (cd "$1" && pwd -P); }

listening_ports() {  # decimal list of TCP ports in LISTEN state (v4+v6)
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    awk 'NR>1 && $4=="0A" { n = split($2, a, ":"); print a[n] }' "$f"
  done | while read -r h; do echo $((16#$h)); done
}

ports_free() {  # base count
  local base=$1 n=$2 p used
  used=$(listening_ports | sort -u)
  for ((p = base; p < base + n; p++)); do
    grep -qx "$p" <<<"$used" && return 1
  done
  # also avoid blocks claimed by another cluster.sh that has not started listening yet
  if compgen -G "/tmp/.numabind-slurm-port.$base" >/dev/null; then
    local owner; owner=$(cat "/tmp/.numabind-slurm-port.$base" 2>/dev/null || true)
    [ -n "$owner" ] && [ -d "$owner" ] && [ -f "$owner/run/slurmctld.pid" ] &&
      pid_is_ours "$owner" "$(cat "$owner/run/slurmctld.pid")" && return 1
  fi
  return 0
}

pid_is_ours() {  # DIR PID : is PID alive and started with DIR in its command line?
  local dir=$1 pid=$2
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  grep -qzF -- "$dir/" "/proc/$pid/cmdline" 2>/dev/null || return 1
}

pid_alive() {  # PID : exists and is not a zombie (used right after we started it)
  [[ "${1:-}" =~ ^[0-9]+$ ]] || return 1
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

env_has() {  # PID needle : does /proc/PID/environ contain the exact entry?
  grep -qzxF -- "$2" "/proc/$1/environ" 2>/dev/null
}

ensure_user() {
  if ! getent passwd nbtest >/dev/null; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /bin/sh nbtest 2>/dev/null || getent passwd nbtest >/dev/null ||
      die "cannot create user nbtest"
  fi
}

print_logs() {
  local dir=$1 f
  for f in "$dir"/log/*; do
    [ -f "$f" ] || continue
    echo "===== $f (last 40 lines) =====" >&2
    tail -n 40 "$f" >&2 || true
  done
}

# ---------------------------------------------------------------- start
cmd_start() {
  [ $# -ge 1 ] || usage
  local dir=$1; shift
  local nodes=1 plugstack="" cgroup=0 constrain_devices=no gpus=2 port_base="${NUMABIND_SLURM_PORT_BASE:-}" debug=info
  local gres_order="" oversubscribe=0 constrain_cores=yes cgroup_plugin=autodetect
  local -a extra_conf=() slurmd_env=() node_gpus=()
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) nodes=$2; shift 2 ;;
      --nodes=*) nodes=${1#*=}; shift ;;
      --plugstack) plugstack=$2; shift 2 ;;
      --plugstack=*) plugstack=${1#*=}; shift ;;
      --cgroup) cgroup=1; shift ;;
      --constrain-devices) cgroup=1; constrain_devices=yes; shift ;;
      --node-gpus) node_gpus+=("$2"); shift 2 ;;
      --node-gpus=*) node_gpus+=("${1#*=}"); shift ;;
      --oversubscribe) oversubscribe=1; shift ;;
      --no-constrain-cores) cgroup=1; constrain_cores=no; shift ;;
      --cgroup-v2) cgroup=1; cgroup_plugin=cgroup/v2; shift ;;
      --gres-order) gres_order=$2; shift 2 ;;
      --gres-order=*) gres_order=${1#*=}; shift ;;
      --gpus) gpus=$2; shift 2 ;;
      --gpus=*) gpus=${1#*=}; shift ;;
      --port-base) port_base=$2; shift 2 ;;
      --port-base=*) port_base=${1#*=}; shift ;;
      --debug) debug=$2; shift 2 ;;
      --debug=*) debug=${1#*=}; shift ;;
      --conf) extra_conf+=("$2"); shift 2 ;;
      --conf=*) extra_conf+=("${1#*=}"); shift ;;
      --slurmd-env) slurmd_env+=("$2"); shift 2 ;;
      --slurmd-env=*) slurmd_env+=("${1#*=}"); shift ;;
      *) die "unknown option $1" ;;
    esac
  done
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  [[ "$nodes" =~ ^[12]$ ]] || die "--nodes must be 1 or 2"
  [[ "$gpus" =~ ^[0-9]+$ ]] && [ "$gpus" -le 8 ] || die "--gpus must be 0..8"
  local t; for t in slurmd slurmctld munged sinfo; do command -v $t >/dev/null || die "$t not found (run .ci/install-deps.sh)"; done

  mkdir -p "$dir"
  dir=$(abspath "$dir")
  if [ -f "$dir/run/slurmctld.pid" ] && pid_is_ours "$dir" "$(cat "$dir/run/slurmctld.pid")"; then
    die "a cluster is already running in $dir (stop it first)"
  fi
  if [ -n "$plugstack" ]; then
    [ -f "$plugstack" ] || die "plugstack file $plugstack not found"
    plugstack=$(abspath "$(dirname "$plugstack")")/$(basename "$plugstack")
  fi
  chmod 0755 "$dir"
  # a fresh state each time (keeps anything else the caller put in DIR)
  rm -rf "${dir:?}/state" "${dir:?}/spool" "${dir:?}/run" "${dir:?}/log" "${dir:?}/munge" \
    "${dir:?}/tmp" "${dir:?}/dev"
  mkdir -p "$dir/state" "$dir/run" "$dir/log" "$dir/munge" "$dir/dev"
  chmod 0755 "$dir/run" "$dir/log" "$dir/munge" "$dir/state" "$dir/dev"
  ensure_user

  local -a names=(n1); [ "$nodes" = 2 ] && names=(n1 n2)
  local n
  for n in "${names[@]}"; do
    mkdir -p "$dir/spool/$n" "$dir/tmp/$n" "$dir/dev/$n"
    chmod 1777 "$dir/tmp/$n"
  done
  chmod 0755 "$dir/spool" "$dir/tmp"

  # ---- ports
  local nports=$((nodes + 1))
  if [ -n "$port_base" ]; then
    [[ "$port_base" =~ ^[0-9]+$ ]] || die "bad --port-base"
    ports_free "$port_base" "$nports" || die "ports $port_base..$((port_base + nports - 1)) are in use"
  else
    local i cand
    for ((i = 0; i < 3000; i++)); do
      cand=$((20000 + ((($$ + i * 7) % 3000) * 4)))
      if ports_free "$cand" "$nports"; then port_base=$cand; break; fi
    done
    [ -n "$port_base" ] || die "no free port block found in 20000-31999"
  fi
  echo "$dir" >"/tmp/.numabind-slurm-port.$port_base" 2>/dev/null || true
  local ctld_port=$port_base
  local first_job_id=$(( (port_base - 20000) * 1000 + 1000 ))

  # ---- munge
  local msock="$dir/munge/munge.socket.2"
  if command -v mungekey >/dev/null; then
    mungekey -c -f -k "$dir/munge/munge.key" >/dev/null 2>&1 || die "mungekey failed"
  else
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  fi
  chmod 0400 "$dir/munge/munge.key"

  # ---- fake GPUs: char devices with NVIDIA's major number 195
  # (minors from 200 up: no real NVIDIA driver on a test machine answers them)
  local g minor=200 gres_conf="AutoDetect=off"$'\n' e
  local -A ngpus=()
  for n in "${names[@]}"; do ngpus[$n]=$gpus; done
  for e in ${node_gpus[@]+"${node_gpus[@]}"}; do
    [[ "$e" =~ ^(n1|n2):([0-8])$ ]] || die "--node-gpus wants NODE:N (N 0..8), got $e"
    ngpus[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
  done
  for n in "${names[@]}"; do
    local -a order=()
    for ((g = 0; g < ngpus[$n]; g++)); do order+=("$g"); done
    if [ -n "$gres_order" ] && [ "${ngpus[$n]}" -gt 0 ]; then
      IFS=, read -r -a order <<<"$gres_order"
      [ "$(printf '%s\n' "${order[@]}" | sort -n | tr '\n' ' ')" = "$(seq 0 $((ngpus[$n] - 1)) | tr '\n' ' ')" ] ||
        die "--gres-order $gres_order is not a permutation of 0..$((ngpus[$n] - 1))"
    fi
    for ((g = 0; g < ngpus[$n]; g++)); do
      mknod -m 0666 "$dir/dev/$n/nvidia$g" c 195 "$minor" 2>/dev/null ||
        die "mknod $dir/dev/$n/nvidia$g failed (filesystem mounted nodev?)"
      minor=$((minor + 1))
    done
    for g in ${order[@]+"${order[@]}"}; do
      gres_conf+="NodeName=$n Name=gpu File=$dir/dev/$n/nvidia$g"$'\n'
    done
  done
  printf '%s' "$gres_conf" >"$dir/gres.conf"

  # ---- node shape from slurmd -C (first line, minus NodeName)
  local shape
  shape=$(slurmd -C 2>/dev/null | head -n1 | sed -E 's/^NodeName=[^ ]+ *//')
  [ -n "$shape" ] || die "slurmd -C printed nothing"

  # ---- plugstack
  if [ -z "$plugstack" ]; then
    [ -f "$dir/plugstack.conf" ] || : >"$dir/plugstack.conf"
    plugstack="$dir/plugstack.conf"
  fi

  # ---- slurm.conf
  local proctrack=proctrack/linuxproc taskplugin=task/affinity
  if [ "$cgroup" = 1 ]; then
    proctrack=proctrack/cgroup; taskplugin=task/cgroup,task/affinity
  fi
  {
    echo "# generated by tests/slurm/cluster.sh"
    echo "ClusterName=nbtest"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=$ctld_port"
    echo "SlurmdPort=$((port_base + 1))"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$msock"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    # Slurm's own pid files; ours (written from $!) are run/slurmctld.pid, run/slurmd.NODE.pid
    echo "SlurmctldPidFile=$dir/run/slurmctld.slurm-pid"
    echo "SlurmdPidFile=$dir/run/slurmd.%n.slurm-pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd.%n.log"
    echo "SlurmctldDebug=$debug"
    echo "SlurmdDebug=$debug"
    echo "TmpFS=$dir/tmp/%n"
    echo "PlugStackConfig=$plugstack"
    echo "MailProg=/bin/true"
    echo "ProctrackType=$proctrack"
    echo "TaskPlugin=$taskplugin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "SwitchType=switch/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    echo "GresTypes=gpu"
    echo "FirstJobId=$first_job_id"
    echo "MinJobAge=5"   # sbatch --wait polls every 2 s only while MinJobAge/2 <= 2 (else 8 s)
    echo "KillWait=2"
    echo "InactiveLimit=0"
    echo "SlurmdTimeout=30"
    echo "SchedulerParameters=sched_interval=1,bf_interval=1"  # het jobs start only through backfill
    local k=1
    for n in "${names[@]}"; do
      local gres="Gres=gpu:${ngpus[$n]}"; [ "${ngpus[$n]}" = 0 ] && gres=""
      echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port_base + k)) $shape $gres State=UNKNOWN"
      k=$((k + 1))
    done
    # --oversubscribe: jobs asking for it (-s) may share cores, so a job can hold GPUs while
    # another one (say, one occupying GPU 0) runs on the same few CPUs
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP$([ "$oversubscribe" = 1 ] && echo " OverSubscribe=YES:4")"
    local l
    for l in ${extra_conf[@]+"${extra_conf[@]}"}; do echo "$l"; done
  } >"$dir/slurm.conf"
  if [ "$cgroup" = 1 ]; then
    cat >"$dir/cgroup.conf" <<EOF
CgroupPlugin=$cgroup_plugin
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=$constrain_cores
ConstrainRAMSpace=no
ConstrainSwapSpace=no
ConstrainDevices=$constrain_devices
EOF
    # Slurm 22.05's cgroup/v2 without systemd: it creates its scope below system.slice itself
    [ "$cgroup_plugin" = cgroup/v2 ] && printf 'IgnoreSystemd=yes\nCgroupAutomount=yes\n' >>"$dir/cgroup.conf"
  else
    rm -f "$dir/cgroup.conf"
  fi
  chmod 0644 "$dir/slurm.conf" "$dir/gres.conf" "$plugstack" 2>/dev/null || true
  [ -f "$dir/cgroup.conf" ] && chmod 0644 "$dir/cgroup.conf"

  cat >"$dir/env.sh" <<EOF
# source me: clients of the test cluster in $dir
export SLURM_CONF=$dir/slurm.conf
export NUMABIND_CLUSTER_DIR=$dir
export NUMABIND_CLUSTER_NODES=$nodes
export NUMABIND_CLUSTER_PORT_BASE=$port_base
EOF
  if [ "$nodes" = 2 ]; then
    cat >>"$dir/env.sh" <<'EOF'
# two "nodes" share one hostname: Open MPI's shared-memory BTL would collide between them
export OMPI_MCA_btl=self,tcp
# ...and both "nodes" are this machine: keep MPI's TCP on loopback (some sandboxes drop
# connections to the machine's own external address, which made MPI_Init crash)
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
EOF
  fi
  chmod 0644 "$dir/env.sh"
  echo "PORT_BASE=$port_base" >"$dir/ports"

  # ---- launch (each daemon in its own session, stdio detached, pid recorded by us)
  local -a denv=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C
                 SLURM_CONF="$dir/slurm.conf" NUMABIND_CLUSTER_DIR="$dir")
  "${denv[@]}" setsid munged -F --socket="$msock" --key-file="$dir/munge/munge.key" \
    --log-file="$dir/log/munged.log" --pid-file="$dir/run/munged.pid.munge" \
    --seed-file="$dir/munge/munged.seed" </dev/null >"$dir/log/munged.out" 2>&1 &
  echo $! >"$dir/run/munged.pid"
  local i
  for ((i = 0; i < 100; i++)); do [ -S "$msock" ] && break; sleep 0.05; done
  [ -S "$msock" ] || { print_logs "$dir"; cmd_stop "$dir"; die "munged did not start"; }

  "${denv[@]}" setsid slurmctld -D -f "$dir/slurm.conf" \
    </dev/null >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/run/slurmctld.pid"

  for n in "${names[@]}"; do
    local -a nenv=()
    local e
    for e in ${slurmd_env[@]+"${slurmd_env[@]}"}; do
      case $e in
        "$n":*|all:*) nenv+=("${e#*:}") ;;
        n1:*|n2:*) ;;
        *) die "--slurmd-env wants NODE:VAR=VALUE, got $e" ;;
      esac
    done
    "${denv[@]}" ${nenv[@]+"${nenv[@]}"} setsid slurmd -D -N "$n" -f "$dir/slurm.conf" \
      </dev/null >"$dir/log/slurmd.$n.out" 2>&1 &
    echo $! >"$dir/run/slurmd.$n.pid"
  done

  # ---- wait for all nodes idle
  export SLURM_CONF="$dir/slurm.conf"
  local deadline=$((SECONDS + ${NUMABIND_CLUSTER_TIMEOUT:-30})) states="" ok=0 p
  while [ $SECONDS -lt $deadline ]; do
    for p in "$dir"/run/munged.pid "$dir"/run/slurmctld.pid "$dir"/run/slurmd.n?.pid; do
      pid_alive "$(cat "$p")" || { log "daemon of $p died"; ok=2; break 2; }
    done
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
    if [ "$(grep -c ' idle$' <<<"$states")" -eq "$nodes" ]; then ok=1; break; fi
    sleep 0.2
  done
  if [ "$ok" != 1 ]; then
    log "cluster in $dir did not come up (sinfo: ${states:-nothing})"
    print_logs "$dir"
    cmd_stop "$dir" || true
    exit 1
  fi
  log "cluster up in $dir: nodes ${names[*]}, ports $port_base-$((port_base + nodes)), source $dir/env.sh"
}

# ---------------------------------------------------------------- stop
kill_pid_wait() {  # DIR NAME PID : SIGTERM, wait up to 10 s, then SIGKILL
  local dir=$1 name=$2 pid=$3 i
  pid_is_ours "$dir" "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do pid_is_ours "$dir" "$pid" || return 0; sleep 0.1; done
  log "$name ($pid) ignored SIGTERM, killing"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do pid_is_ours "$dir" "$pid" || return 0; sleep 0.1; done
}

kill_wait() {  # DIR NAME PIDFILE
  local dir=$1 name=$2 pf=$3
  [ -f "$pf" ] || return 0
  kill_pid_wait "$dir" "$name" "$(cat "$pf" 2>/dev/null || true)"
  rm -f "$pf"
}

cmd_stop() {
  [ $# -ge 1 ] || usage
  local dir=$1
  if [ -d "$dir" ]; then
    dir=$(abspath "$dir")
  else
    log "no such directory $dir (looking for its daemons anyway)"
    case $dir in /*) dir=${dir%/} ;; *) dir=$PWD/${dir%/} ;; esac
  fi
  local conf="$dir/slurm.conf" pf pid i
  # 1) cancel this cluster's jobs while the controller is still up
  if [ -f "$dir/run/slurmctld.pid" ] && pid_is_ours "$dir" "$(cat "$dir/run/slurmctld.pid")"; then
    if [ -n "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ]; then
      SLURM_CONF=$conf scancel --partition=debug --full 2>/dev/null || true
      SLURM_CONF=$conf scancel --partition=debug 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        [ -z "$(SLURM_CONF=$conf squeue -h -t R,CG,PD -o %i 2>/dev/null)" ] && break
        sleep 0.1
      done
    fi
  fi
  # 2) daemons, by the pid files we wrote (checked against DIR in their command line)
  for pf in "$dir"/run/slurmd.n?.pid; do
    [ -e "$pf" ] && kill_wait "$dir" "slurmd" "$pf"
  done
  kill_wait "$dir" slurmctld "$dir/run/slurmctld.pid"
  kill_wait "$dir" munged "$dir/run/munged.pid"
  # 2b) daemons whose pid file is gone (DIR removed, crashed start): match DIR/ in argv
  local f
  for f in $(grep -lzF -- "$dir/" /proc/[0-9]*/cmdline 2>/dev/null || true); do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    case $(cat "/proc/$pid/comm" 2>/dev/null) in
      slurmd|slurmctld|munged)
        log "stopping stray $(cat "/proc/$pid/comm" 2>/dev/null) ($pid) of $dir"
        kill_pid_wait "$dir" stray "$pid" ;;
    esac
  done
  # 3) leftovers of jobs: slurmstepd inherited NUMABIND_CLUSTER_DIR=DIR from our slurmd;
  #    job tasks carry SLURM_CONF=DIR/slurm.conf plus a SLURM_JOB_ID; srun/salloc/sbatch
  #    clients carry SLURM_CONF=DIR/slurm.conf (never this script or its ancestors)
  local -A keep=()
  pid=$$
  while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
    keep[$pid]=1
    pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null || true)
  done
  local -a victims=()
  local comm
  for f in $(grep -lzxF -e "NUMABIND_CLUSTER_DIR=$dir" -e "SLURM_CONF=$conf" \
               /proc/[0-9]*/environ 2>/dev/null || true); do
    pid=${f#/proc/}; pid=${pid%/environ}
    [ -n "${keep[$pid]:-}" ] && continue
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    if [ "$comm" = slurmstepd ] && env_has "$pid" "NUMABIND_CLUSTER_DIR=$dir"; then
      victims+=("$pid")
    elif env_has "$pid" "SLURM_CONF=$conf"; then
      if grep -qz '^SLURM_JOB_ID=' "/proc/$pid/environ" 2>/dev/null; then
        victims+=("$pid")
      else
        # client commands of this cluster left hanging (e.g. srun of a killed step)
        case $comm in srun|salloc|sbatch|sattach) victims+=("$pid") ;; esac
      fi
    fi
  done
  if [ ${#victims[@]} -gt 0 ]; then
    log "killing leftover job processes: ${victims[*]}"
    kill -KILL "${victims[@]}" 2>/dev/null || true
  fi
  local claim
  for claim in /tmp/.numabind-slurm-port.*; do
    [ -f "$claim" ] && [ "$(cat "$claim" 2>/dev/null)" = "$dir" ] && rm -f "$claim"
  done
  rm -f "$dir/munge/munge.socket.2" "$dir/munge/munge.socket.2.lock"
  return 0
}

cmd_status() {
  local dir; dir=$(abspath "$1") || exit 1
  local pf rc=0
  for pf in "$dir"/run/munged.pid "$dir"/run/slurmctld.pid "$dir"/run/slurmd.n?.pid; do
    [ -e "$pf" ] || continue
    if pid_is_ours "$dir" "$(cat "$pf")"; then echo "$(basename "$pf" .pid): running ($(cat "$pf"))"
    else echo "$(basename "$pf" .pid): dead"; rc=1; fi
  done
  SLURM_CONF="$dir/slurm.conf" sinfo -N 2>/dev/null || rc=1
  return $rc
}

case ${1:-} in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; [ $# -eq 1 ] || usage; cmd_status "$1" ;;
  logs) shift; [ $# -eq 1 ] || usage; print_logs "$(abspath "$1")" ;;
  *) usage ;;
esac
