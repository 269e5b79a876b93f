#!/usr/bin/env bash
# .ci/install-deps.sh — install every Debian package numabind needs to build and test.
#
# Usage (as root, or with sudo available):   .ci/install-deps.sh
#        .ci/install-deps.sh --list [RELEASE]   print the package list (one per line), install nothing
#        .ci/install-deps.sh --check            exit 0 if every package is installed, else list the missing
#   RELEASE: bookworm (Debian 12) or trixie (Debian 13); default: this machine's
#   (VERSION_CODENAME in /etc/os-release). The lists differ where Debian renamed packages.
#   Idempotent: if every package is already installed it does nothing (no apt-get update).
#   Otherwise it runs `apt-get update` once and installs only the missing packages.
#   Debian's own slurmd/slurmctld/munge services are NOT started (a temporary policy-rc.d
#   forbids it during the install) and, if they are running afterwards anyway, they are
#   stopped through their pid files, so they cannot clash with tests/slurm/cluster.sh.
#   Env: NUMABIND_EXTRA_PKGS="pkg ..." adds packages.
set -euo pipefail

release=""
list_only=0 check_only=0
if [ "${1:-}" = --list ]; then list_only=1; release=${2:-}; fi
if [ "${1:-}" = --check ]; then check_only=1; fi
if [ -z "$release" ]; then
  release=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
fi

# Same on every release.
PKGS=(
  build-essential cmake pkg-config
  libhwloc-dev hwloc libnuma-dev numactl
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  slurm-wlm slurmd slurmctld libslurm-dev munge libpmix-dev
  libopenmpi-dev openmpi-bin
  hyperfine python3 python3-torch python3-pip python3-venv python3-setuptools
  qemu-system-x86 busybox-static xz-utils zstd iproute2
  clang llvm   # llvm: llvm-symbolizer, so sanitizer stacks name their frames (fuzz/hwloc_crash_filter.sh)
  man-db procps rpm cpio file
)
# Renamed between releases (apt-cache search on each; clang's sanitizer runtimes follow the
# default clang's major version).
case $release in
  bookworm) PKGS+=(libclang-rt-14-dev) ;;   # clang 14, Slurm 22.05, Open MPI 4.1, PMIx 4.2, hwloc 2.9
  trixie) PKGS+=(libclang-rt-19-dev) ;;     # clang 19, Slurm 24.11, Open MPI 5.0, PMIx 5.0, hwloc 2.12
  *) echo "install-deps: unsupported Debian release '${release:-?}' (supported: bookworm, trixie)" >&2; exit 1 ;;
esac
# shellcheck disable=SC2206
PKGS+=(${NUMABIND_EXTRA_PKGS:-})

if [ "$list_only" = 1 ]; then printf '%s\n' "${PKGS[@]}"; exit 0; fi

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

if [ "$check_only" = 1 ]; then
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "install-deps: missing: ${missing[*]}"; exit 1
fi
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
  # Only what is listed (no Recommends): a fresh root proves the list is complete, and
  # Recommends would pull in GUI stacks (Qt, OpenCV, ffmpeg) that nothing here uses.
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
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
