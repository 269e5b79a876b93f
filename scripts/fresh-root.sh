#!/usr/bin/env bash
# scripts/fresh-root.sh — run a command in a freshly bootstrapped minimal Debian root holding
# only a clean export of this tree, as a new machine would (as root).
#
#   scripts/fresh-root.sh [--release bookworm|trixie] [--deps-cache] [--keep]
#                         [--env VAR=VALUE]... [-- COMMAND [ARGS...]]
#
# COMMAND (default: scripts/test.sh, the README's test command) runs as root inside the root,
# in /work/numabind (the tree: `git archive HEAD`, so only committed files), with
# /work/shared = ../shared of this checkout bind-mounted read-only when it exists (the tests
# read ../shared/topologies). Environment inside: only PATH, HOME, LANG, CI, TERM and the
# --env pairs; stdin is /dev/null.
#
# What is cached, below NUMABIND_ROOTS_CACHE (default /var/cache/numabind-roots):
#   <release>/base.tar.gz   `debootstrap --variant=minbase <release>` from the Debian mirror
#                           this machine's apt uses (/etc/apt/sources.list*), made once.
#   <release>/deps-<hash>.tar.gz   only with --deps-cache: the root as it was after COMMAND
#                           ran on the bare base, once the project's own install step had
#                           installed every listed package (`.ci/install-deps.sh --check`;
#                           /work, /tmp, apt's .debs left out).
#                           <hash> = sha256 of `.ci/install-deps.sh --list <release>`. A cold
#                           cache therefore means the README command installed everything on
#                           a bare root; a warm one starts from that result (install-deps then
#                           finds everything installed). Delete the directory to go cold.
# Each run extracts a new root below NUMABIND_FRESH_TMP (default /var/tmp), copies the host's
# resolv.conf and apt.conf.d into it, mounts proc, and sys and dev recursively (rbind, made
# rslave so nothing propagates back; slurmd needs the cgroup mounts below /sys), runs COMMAND,
# and on every exit path (trap) kills what still runs inside the root, unmounts everything
# below it and deletes it (--keep: leaves the root, unmounted). Exit status: COMMAND's.
set -euo pipefail
# All in one function, called on the last line: bash parses it completely before running, so
# editing this file while a run is under way cannot derail that run.
main() {

die() { echo "fresh-root: $*" >&2; exit 1; }
log() { echo "fresh-root: $*" >&2; }

here=$(cd "$(dirname "$0")/.." && pwd)
release=bookworm deps_cache=0 keep=0
envs=() cmd=()
while [ $# -gt 0 ]; do
  case $1 in
    --release) release=${2:?--release needs a value}; shift 2 ;;
    --deps-cache) deps_cache=1; shift ;;
    --keep) keep=1; shift ;;
    --env) [[ ${2:-} == [A-Za-z_]*=* ]] || die "--env needs VAR=VALUE, got '${2:-}'"; envs+=("$2"); shift 2 ;;
    --) shift; cmd=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (valid: --release bookworm|trixie, --deps-cache, --keep, --env VAR=VALUE, -- COMMAND)" ;;
  esac
done
case $release in bookworm|trixie) ;; *) die "unknown --release '$release' (valid: bookworm, trixie)" ;; esac
[ ${#cmd[@]} -gt 0 ] || cmd=(scripts/test.sh)
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
git -C "$here" rev-parse --git-dir >/dev/null 2>&1 || die "$here is not a git checkout (the tree is exported with git archive)"

cache=${NUMABIND_ROOTS_CACHE:-/var/cache/numabind-roots}/$release
mkdir -p "$cache"

# ---------------------------------------------------------------- the mirror
# The first `deb` source of this machine's apt that serves the Debian archive proper (a
# suite without '-': not -security/-updates), in one-line (.list) or deb822 (.sources) form.
host_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    case $f in
      *.sources)
        awk 'BEGIN { RS = ""; FS = "\n" }
             { types = uris = suites = ""
               for (i = 1; i <= NF; i++) {
                 if ($i ~ /^Types:/) types = $i
                 if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
                 if ($i ~ /^Suites:/) suites = $i
                 if ($i ~ /^Enabled:[ \t]*no/) types = "" }
               n = split(suites, s, /[ \t]+/); plain = 0
               for (j = 2; j <= n; j++) if (s[j] !~ /-/) plain = 1
               if (types ~ /(^|[ \t])deb([ \t]|$)/ && plain && uris != "") { split(uris, u, /[ \t]+/); print u[1]; exit } }' "$f" ;;
      *)
        awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++
                           if ($(i + 1) !~ /-/) { print $i; exit } }' "$f" ;;
    esac
  done | head -n1
}
mirror=${NUMABIND_DEBIAN_MIRROR:-$(host_mirror)}
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list* (set NUMABIND_DEBIAN_MIRROR)"

# ---------------------------------------------------------------- the base root (cached)
base=$cache/base.tar.gz
if [ ! -s "$base" ]; then
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    # A new machine may not have fetched its package lists yet.
    DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >/dev/null 2>&1 ||
      { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >/dev/null; } ||
      die "could not install debootstrap (apt-get install debootstrap)"; }
  build=$(mktemp -d "${NUMABIND_FRESH_TMP:-/var/tmp}/numabind-base.XXXXXX")
  log "bootstrapping $release from $mirror into the cache (once)"
  t0=$(date +%s)
  if ! debootstrap --variant=minbase "$release" "$build/root" "$mirror" >"$build/debootstrap.log" 2>&1; then
    tail -n 30 "$build/debootstrap.log" >&2
    # debootstrap mounts proc/sys itself; never delete through a mount.
    umount -R "$build/root/proc" "$build/root/sys" 2>/dev/null || true
    rm -rf --one-file-system "$build"; die "debootstrap $release failed"
  fi
  tar -C "$build/root" --numeric-owner -czf "$base.part" . && mv "$base.part" "$base"
  rm -rf --one-file-system "$build"
  log "base $release cached in $(( $(date +%s) - t0 )) s: $base ($(du -h "$base" | cut -f1))"
fi

start_from=$base
deps_key=""
if [ "$deps_cache" = 1 ]; then
  deps_key=$("$here/.ci/install-deps.sh" --list "$release" | sha256sum | cut -c1-16)
  if [ -s "$cache/deps-$deps_key.tar.gz" ]; then
    start_from=$cache/deps-$deps_key.tar.gz
    log "deps cache warm: starting from $start_from (packages installed by an earlier cold run)"
  else
    log "deps cache cold ($cache/deps-$deps_key.tar.gz): COMMAND installs the packages on the bare base"
  fi
fi

# ---------------------------------------------------------------- this run's root
run=$(mktemp -d "${NUMABIND_FRESH_TMP:-/var/tmp}/numabind-fresh.XXXXXX")
root=$run/root
mounted=()   # mount points below $root, in mount order

inside_pids() {  # processes whose root directory is this root
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$r" = "$root" ] && echo "${p#/proc/}"
  done
  return 0   # not the status of the last test: callers run under set -e
}

end_inside() {  # whatever COMMAND left running (a daemon a killed test never stopped)
  local pids
  pids=$(inside_pids)
  [ -n "$pids" ] || return 0
  log "ending processes left in the root: $(echo $pids)"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null; sleep 1
  pids=$(inside_pids)
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  sleep 0.2
}

cleanup() {
  local rc=$? i
  set +e
  trap - EXIT INT TERM HUP
  end_inside   # they hold the mounts
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null ||
      log "could not unmount ${mounted[i]}"
  done
  # Anything still mounted below the root (a mount made inside it, e.g. by a test)?
  local left
  left=$(awk -v r="$root/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  for i in $left; do umount -l "$i" 2>/dev/null; done
  if awk -v r="$root" '$5 == r || index($5, r "/") == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
    log "mounts remain below $root; leaving it in place"
  elif [ "$keep" = 1 ]; then
    log "root kept (unmounted): $root"
  else
    rm -rf --one-file-system "$run"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

t0=$(date +%s)
mkdir -p "$root"
tar -C "$root" --numeric-owner -xzf "$start_from"
# What a new machine's admin would have: name resolution and apt's site configuration
# (proxy, validity checks) from this host; the sources debootstrap wrote for the mirror.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# An installed machine resolves its own name (the installer writes it into /etc/hosts);
# debootstrap does not, and Slurm 24.11's srun and slurmstepd look it up.
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" >"$root/etc/hosts"
cp -a /etc/apt/apt.conf.d/. "$root/etc/apt/apt.conf.d/" 2>/dev/null || true
rm -f "$root"/etc/apt/apt.conf.d/*docker* 2>/dev/null || true
printf 'deb %s %s main\n' "$mirror" "$release" >"$root/etc/apt/sources.list"
chmod 1777 "$root/tmp"

# The tree: committed files only, as a fresh clone has them.
mkdir -p "$root/work/numabind"
git -C "$here" archive --format=tar HEAD | tar -C "$root/work/numabind" -xf -
rev=$(git -C "$here" rev-parse --short HEAD)
if ! git -C "$here" diff --quiet HEAD 2>/dev/null; then
  log "note: uncommitted changes in $here are not in the root (it holds HEAD $rev)"
fi

mnt() {  # TARGET MOUNT-ARGS...: mount and remember it for the cleanup
  local target=$1; shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}
mnt "$root/proc" -t proc proc
mnt "$root/sys" --rbind /sys;  mount --make-rslave "$root/sys"
mnt "$root/dev" --rbind /dev;  mount --make-rslave "$root/dev"
if [ -d "$here/../shared" ]; then
  mnt "$root/work/shared" --bind "$(cd "$here/../shared" && pwd)"
  mount -o remount,bind,ro "$root/work/shared"
  mount --make-slave "$root/work/shared"
fi
log "root $release ready in $(( $(date +%s) - t0 )) s: $root (tree $rev)"

# Cache the installed packages (whether or not the tests passed, once the project's install
# step installed every listed package), not what the command built or left in scratch space.
write_deps_cache() {
  end_inside
  chroot "$root" /work/numabind/.ci/install-deps.sh --check >/dev/null 2>&1 || return 1
  chroot "$root" apt-get clean >/dev/null 2>&1 || true
  tar -C "$root" --numeric-owner --one-file-system \
    --exclude=./work --exclude=./proc --exclude=./sys --exclude=./dev \
    --exclude='./tmp/*' --exclude='./var/tmp/*' -czf "$cache/deps-$deps_key.tar.gz.part" . &&
    mv "$cache/deps-$deps_key.tar.gz.part" "$cache/deps-$deps_key.tar.gz" || return 1
  log "deps cache written: $cache/deps-$deps_key.tar.gz ($(du -h "$cache/deps-$deps_key.tar.gz" | cut -f1))"
}

t1=$(date +%s)
set +e
# In the background + wait: a signal to this script runs the cleanup at once (bash defers
# traps until a foreground child exits).
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-true}" "${envs[@]}" \
  /bin/bash -c 'cd /work/numabind && exec "$@"' fresh-root "${cmd[@]}" </dev/null &
wait $!
rc=$?
set -e
log "${cmd[*]} in the $release root: exit $rc after $(( $(date +%s) - t1 )) s"

if [ "$deps_cache" = 1 ] && [ "$start_from" = "$base" ]; then
  # Best effort: the cache never changes COMMAND's exit status.
  write_deps_cache || log "deps cache not written (the next run is cold again)"
fi
exit "$rc"
}
main "$@"
