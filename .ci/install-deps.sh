#!/usr/bin/env bash
# .ci/install-deps.sh — install every Debian 12 package numabind needs to build and test.
#
# Usage (as root, or with sudo available):   .ci/install-deps.sh
#   Idempotent: if every package is already installed it does nothing (no apt-get update).
#   Otherwise it runs `apt-get update` once and installs only the missing packages.
#   Debian's own slurmd/slurmctld/munge services are NOT started (a temporary policy-rc.d
#   forbids it during the install) and, if they are running afterwards anyway, they are
#   stopped through their pid files, so they cannot clash with tests/slurm/cluster.sh.
#   Env: NUMABIND_EXTRA_PKGS="pkg ..." adds packages.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libhwloc-dev hwloc libnuma-dev numactl
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  slurm-wlm slurmd slurmctld libslurm-dev munge libpmix-dev
  libopenmpi-dev openmpi-bin
  hyperfine python3
  qemu-system-x86 busybox-static
  clang libclang-rt-14-dev
)
# shellcheck disable=SC2206
PKGS+=(${NUMABIND_EXTRA_PKGS:-})

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo" >&2; exit 1; }
  SUDO=(sudo)
fi

missing=()
for p in "${PKGS[@]}"; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages already installed"
else
  echo "install-deps: installing: ${missing[*]}"
  # Forbid service starts during the install (Debian policy-rc.d protocol: exit 101 = deny).
  # Keep an existing policy-rc.d (e.g. a container's) untouched.
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# temporary, written by numabind .ci/install-deps.sh\nexit 101\n' |
      "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${SUDO[@]}" chmod 0755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
  cleanup() {
    if [ "$created_policy" = 1 ]; then "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d; fi
  }
  trap cleanup EXIT
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
  cleanup; created_policy=0; trap - EXIT
fi

# Belt and braces: stop the distribution's daemons if something started them (they would
# hold the default ports 6817/6818 and /run/munge). Only the processes named by their
# standard pid files are touched.
stop_pidfile() {  # name pidfile
  local name=$1 pf=$2 pid
  [ -r "$pf" ] || return 0
  pid=$(cat "$pf" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  echo "install-deps: stopping system $name (pid $pid)"
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    "${SUDO[@]}" systemctl stop "$name" || true
  else
    "${SUDO[@]}" kill "$pid" || true
  fi
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  "${SUDO[@]}" kill -9 "$pid" 2>/dev/null || true
}
stop_pidfile slurmd /run/slurmd.pid
stop_pidfile slurmctld /run/slurmctld.pid
stop_pidfile munge /run/munge/munged.pid

echo "install-deps: done"
