#!/bin/bash
# shellcheck disable=SC2317  # helpers (rc, row, ...) are called from the strings check eval's
# tests/fault/check_root_test.sh NUMABIND GEN_TOPOLOGY
# `numabind check` and `--draw` run as root against files the unprivileged user nbtest owns
# (created when missing): every read and every tool run is bounded, nothing is run from the
# current directory or from another user's directory, nothing is written through another
# user's symlink, and nothing from those files reaches the terminal raw. Each case runs under
# timeout(1) and asserts the bound itself (seconds measured here, marker files, checksums),
# never only a message. Root only (exit 77). About a minute (two 20 s and one 30 s bound,
# run side by side).
set -u
NB=$1
GEN=$2
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
id nbtest >/dev/null 2>&1 || useradd -r -M nbtest || skip "cannot create user nbtest"
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
chmod 0755 "$WORK"
on_fail() { show "$WORK/out" 30; show "$WORK/err" 5 stderr; }
python3 "$GEN" --preset dgx-a100 -o "$WORK/dgx.xml" >/dev/null || { fail "gen_topology.py"; finish; }
mkdir -p "$WORK/user" && chown nbtest "$WORK/user"  # the other user's directory
mkdir -p "$WORK/rootbin" "$WORK/etc"                  # root's
export NUMABIND_CHECK_NVML=none

# nb [check options]: check as root on the generated node, report in $WORK/out, exit status
# in $WORK/rc, seconds taken in $WORK/secs. PATH as the case sets it in NBPATH.
nb() {
  local t0=$SECONDS
  timeout 120 env PATH="${NBPATH:-/usr/bin:/bin}" SLURM_CONF="${CONF:-$WORK/etc/slurm.conf}" \
    "$NB" check --topology "$WORK/dgx.xml" "$@" >"$WORK/out" 2>"$WORK/err"
  echo $? >"$WORK/rc"
  echo $((SECONDS - t0)) >"$WORK/secs"
}
rc() { cat "$WORK/rc"; }
secs() { cat "$WORK/secs"; }
row() { grep -E -m1 -q -- "^$1 +$2  +.*$3.*  .*${4:-}" "$WORK/out"; }
touch "$WORK/etc/slurm.conf"

# ---- plugstack includes ----
P=$WORK/etc/plugstack.conf
mkdir -p "$WORK/etc/plugstack.d"
echo "include $WORK/etc/plugstack.d/*.conf" >"$P"
echo "optional /usr/lib/x/spank_numabind.so" >"$WORK/etc/plugstack.d/nb.conf"
mkfifo "$WORK/etc/plugstack.d/fifo.conf"
nb --plugstack-file "$P"
check "a FIFO in an included directory: not waited on, FAIL naming it" \
  eval '[ $(rc) -le 1 ] && [ $(secs) -lt 30 ] && row FAIL plugstack include "fifo.conf is a FIFO, not a regular file"'
rm "$WORK/etc/plugstack.d/fifo.conf"

# an include another user can write, adding a plugin of that user's
printf 'required %s/evil.so\n' "$WORK/user" >"$WORK/user/extra.conf" && chown nbtest "$WORK/user/extra.conf"
cp /bin/true "$WORK/user/evil.so" && chown nbtest "$WORK/user/evil.so"
echo "include $WORK/user/extra.conf" >>"$P"
nb --plugstack-file "$P"
check "an include in another user's directory: FAIL naming it" \
  eval '[ $(rc) = 1 ] && row FAIL plugstack include "extra.conf.*owned by uid $(id -u nbtest)"'
check "the plugin it adds (another user's): FAIL naming it" \
  eval 'row FAIL plugstack "other plugin" "evil.so.*owned by uid $(id -u nbtest).*loads it as root"'
echo "include $WORK/etc/plugstack.d/*.conf" >"$P"

# PlugStackConfig naming a FIFO, and --plugstack-file naming one: refused, never waited on
mkdir -p "$WORK/pf" && mkfifo "$WORK/pf/plugstack.conf" && echo "PlugStackConfig=$WORK/pf/plugstack.conf" >"$WORK/pf/slurm.conf"
CONF=$WORK/pf/slurm.conf nb
check "PlugStackConfig a FIFO: FAIL naming it" eval '[ $(rc) = 1 ] && [ $(secs) -lt 30 ] && row FAIL plugstack plugstack.conf "is a FIFO"'
nb --plugstack-file "$WORK/pf/plugstack.conf"
check "--plugstack-file a FIFO: exit 2, one line naming it" \
  eval '[ $(rc) = 2 ] && [ $(secs) -lt 30 ] && [ $(wc -l <"$WORK/err") = 1 ] && grep -q "plugstack.conf is a FIFO, not a regular file" "$WORK/err"'

# files including each other: 4 and 12 files, each including all of them
for n in 4 12; do
  rm -rf "$WORK/loop" && mkdir -p "$WORK/loop"
  for i in $(seq "$n"); do echo "include $WORK/loop/*.conf" >"$WORK/loop/f$i.conf"; done
  nb --plugstack-file "$WORK/loop/f1.conf"
  check "$n files including each other: done in seconds, FAIL naming the loop" \
    eval '[ $(rc) = 1 ] && [ $(secs) -lt 15 ] && row FAIL plugstack include "includes itself|more than 64 plugstack files"'
done

# ---- gres.conf ----
mkdir -p "$WORK/g"
CONF=$WORK/g/slurm.conf && touch "$CONF"
echo "NodeName=n[0-4096]x[0-4096]y[0-4096] Name=gpu File=/dev/nvidia0" >"$WORK/g/gres.conf"
( ulimit -v 1048576; nb )
check "gres.conf brackets n[0-4096] three times in one name: bounded (1 GB, 15 s), FAIL naming the limit" \
  eval '[ $(rc) = 1 ] && [ $(secs) -lt 15 ] && row FAIL slurm gres.conf "more than 65536 names"'
rm "$WORK/g/gres.conf" && mkfifo "$WORK/g/gres.conf"
nb
check "gres.conf a FIFO: not waited on, FAIL" eval '[ $(rc) = 1 ] && [ $(secs) -lt 15 ] && row FAIL slurm gres.conf "is a FIFO"'
rm "$WORK/g/gres.conf" && ln -s /dev/zero "$WORK/g/gres.conf"
( ulimit -v 1048576; nb )
check "gres.conf pointing at /dev/zero: FAIL, no endless read" \
  eval '[ $(rc) = 1 ] && [ $(secs) -lt 15 ] && row FAIL slurm gres.conf "character device"'
# ---- terminal escapes in gres.conf File= names ----
rm "$WORK/g/gres.conf" && printf 'Name=gpu File=/dev/nvidia0\033]0;owned\007\033[31m\n' >"$WORK/g/gres.conf"
nb
check "gres.conf File= with terminal escapes: none reaches the output, shown as \\x1b" \
  eval '! grep -q "$(printf "\033")" "$WORK/out" && ! grep -q "$(printf "\007")" "$WORK/out" && grep -qF "nvidia0\\x1b]0;owned\\x07\\x1b[31m" "$WORK/out"'
nb --json
check "the same in --json: valid JSON without raw control bytes" \
  eval 'python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$WORK/out" && ! grep -q "$(printf "\033")" "$WORK/out"'
CONF=

# ---- vendor tools ----
# Run only from absolute PATH entries, and as root only root's files in root's directories.
mkdir -p "$WORK/cwd" && printf '#!/bin/sh\ntouch %s/cwd-ran\n' "$WORK" >"$WORK/cwd/nvidia-smi" && chmod 0755 "$WORK/cwd/nvidia-smi"
(cd "$WORK/cwd" && NBPATH=":/usr/bin:/bin" nb)
check "an empty PATH entry: ./nvidia-smi in the current directory not run" eval '[ ! -e "$WORK/cwd-ran" ]'
(cd "$WORK" && NBPATH="cwd:/usr/bin:/bin" nb)
check "a relative PATH entry: not run" eval '[ ! -e "$WORK/cwd-ran" ]'
printf '#!/bin/sh\ntouch %s/user-ran\n' "$WORK" >"$WORK/user/nvidia-smi" && chmod 0755 "$WORK/user/nvidia-smi" && chown nbtest "$WORK/user/nvidia-smi"
NBPATH="$WORK/user:/usr/bin:/bin" nb
check "nvidia-smi of another user on PATH: not run as root, WARN naming it" \
  eval '[ ! -e "$WORK/user-ran" ] && row WARN accelerators nvidia-smi "not run: .*owned by uid $(id -u nbtest)"'

# A tool that ignores SIGTERM, and one that leaves a child holding its stdout: both bounded
# at 20 s (the whole process group killed), run side by side.
mkdir -p "$WORK/hang" "$WORK/leak"
printf '#!/bin/sh\ntrap "" TERM\necho $$ >%s/hang.pid\nwhile :; do sleep 1; done\n' "$WORK" >"$WORK/hang/nvidia-smi"
printf '#!/bin/sh\nsleep 300 &\necho $! >%s/leak.pid\nexit 0\n' "$WORK" >"$WORK/leak/nvidia-smi"
chmod 0755 "$WORK/hang/nvidia-smi" "$WORK/leak/nvidia-smi"
(WORK2=$WORK/h; mkdir -p "$WORK2"; t0=$SECONDS
 timeout 120 env PATH="$WORK/hang:/usr/bin:/bin" "$NB" check --topology "$WORK/dgx.xml" --plugstack "optional /x/spank_numabind.so" >"$WORK2/out" 2>&1
 echo $((SECONDS - t0)) >"$WORK2/secs") &
PIDS+=($!)
(WORK2=$WORK/l; mkdir -p "$WORK2"; t0=$SECONDS
 timeout 120 env PATH="$WORK/leak:/usr/bin:/bin" "$NB" check --topology "$WORK/dgx.xml" --plugstack "optional /x/spank_numabind.so" >"$WORK2/out" 2>&1
 echo $((SECONDS - t0)) >"$WORK2/secs") &
PIDS+=($!)

# ---- --draw as root ----
draw() {  # FILE: plan --draw FILE as root; exit status in $WORK/rc, seconds in $WORK/secs
  local t0=$SECONDS
  timeout 120 env PATH="${NBPATH:-/usr/bin:/bin}" TMPDIR="$WORK/tmp" "$NB" plan --topology "$WORK/dgx.xml" \
    --mode exclusive --ntasks 8 --draw "$1" >"$WORK/out" 2>"$WORK/err"
  echo $? >"$WORK/rc"
  echo $((SECONDS - t0)) >"$WORK/secs"
}
mkdir -p "$WORK/tmp"
echo "root's file" >"$WORK/victim" && sum=$(sha256sum <"$WORK/victim")
for ext in png xml; do
  ln -sf "$WORK/victim" "$WORK/user/p.$ext" && chown -h nbtest "$WORK/user/p.$ext"
  draw "$WORK/user/p.$ext"
  check "--draw .$ext to another user's symlink: refused in one line, root's file unchanged" \
    eval '[ $(rc) != 0 ] && [ $(wc -l <"$WORK/err") = 1 ] && grep -q "is a symlink; not replaced" "$WORK/err" && [ "$(sha256sum <"$WORK/victim")" = "$sum" ] && [ -L "$WORK/user/p.$ext" ]'
done
mkfifo "$WORK/user/f.png"
draw "$WORK/user/f.png"
check "--draw to a FIFO: refused at once" eval '[ $(rc) != 0 ] && [ $(secs) -lt 15 ] && grep -q "is a FIFO" "$WORK/err"'
echo old >"$WORK/user/r.png"
draw "$WORK/user/r.png"
check "--draw over a regular file: replaced by the picture" eval '[ $(rc) = 0 ] && [ "$(head -c 4 "$WORK/user/r.png" | od -An -c | tr -d " ")" = "211PNG" ]'
# lstopo from a relative PATH entry is never run
mkdir -p "$WORK/cwd/bin" && printf '#!/bin/sh\ntouch %s/lstopo-ran\nexit 1\n' "$WORK" >"$WORK/cwd/bin/lstopo" && chmod 0755 "$WORK/cwd/bin/lstopo"
(cd "$WORK/cwd" && NBPATH="bin:/usr/bin:/bin" draw "$WORK/rel.png")
check "--draw with a relative PATH entry: ./bin/lstopo not run, the real one draws" \
  eval '[ ! -e "$WORK/lstopo-ran" ] && [ $(rc) = 0 ] && [ -s "$WORK/rel.png" ]'
# a hanging lstopo: killed at the bound, no file, nothing left in TMPDIR or beside the target
printf '#!/bin/sh\ntrap "" TERM\nwhile :; do sleep 1; done\n' >"$WORK/rootbin/lstopo" && chmod 0755 "$WORK/rootbin/lstopo"
mkdir -p "$WORK/out-dir"
NBPATH="$WORK/rootbin:/usr/bin:/bin" draw "$WORK/out-dir/hang.png"
check "--draw with a hanging lstopo: fails within the 30 s bound, no file left" \
  eval '[ $(rc) = 1 ] && [ $(secs) -lt 45 ] && grep -q "within 30 s" "$WORK/err" && [ -z "$(find "$WORK/out-dir" "$WORK/tmp" -mindepth 1)" ]'
# a run killed with SIGKILL mid-way leaves no temporary file anywhere
env PATH="$WORK/rootbin:/usr/bin:/bin" TMPDIR="$WORK/tmp" "$NB" plan --topology "$WORK/dgx.xml" --mode exclusive \
  --ntasks 8 --draw "$WORK/out-dir/killed.png" >/dev/null 2>&1 &
victim=$!
sleep 3
kill -9 "$victim"; wait "$victim" 2>/dev/null
sleep 1
check "--draw killed with SIGKILL: nothing left in TMPDIR or beside the target, lstopo gone" \
  eval '[ -z "$(find "$WORK/out-dir" "$WORK/tmp" -mindepth 1)" ] && ! pgrep -f "$WORK/rootbin/lstopo" >/dev/null'

# ---- the two bounded vendor tools started above ----
for p in "${PIDS[@]}"; do wait "$p"; done
PIDS=()
check "nvidia-smi ignoring SIGTERM: killed at 20 s, WARN, check done" \
  eval '[ "$(cat "$WORK/h/secs")" -lt 40 ] && grep -q "did not finish within 20 s; killed" "$WORK/h/out" && ! kill -0 "$(cat "$WORK/hang.pid")" 2>/dev/null'
check "nvidia-smi leaving a child on its stdout: check not held by it, the child killed" \
  eval '[ "$(cat "$WORK/l/secs")" -lt 15 ] && ! kill -0 "$(cat "$WORK/leak.pid")" 2>/dev/null'
finish
