#!/usr/bin/env bash
# tests/cli/show_pid_limits_test.sh NUMABIND TARGET — `numabind show --pid` on processes that
# make it work hard or lie (show_pid_target.c): terminal escapes in process
# and thread names reach the text report escaped; 100 threads x 10,000 mappings below the
# first file mapping and a 200 KB NUMABIND_CPUS cost bounded work, with a note saying what a
# limit cut; the caller's own non-dumpable process gets the right permission message.
set -uo pipefail
nb=$1 target=$2
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"

start() {  # FIFO-fed target in the background; sets PID once it says ready
  local fifo=$work/in.$RANDOM
  mkfifo "$fifo"
  "$@" <"$fifo" >"$work/ready" 2>&1 &
  PID=$!
  pids+=("$PID")
  exec {holder}>"$fifo"  # stdin stays open until the test ends
  for _ in $(seq 100); do grep -q ready "$work/ready" 2>/dev/null && return 0; sleep 0.1; done
  echo "target did not start: $(cat "$work/ready")"
  return 1
}

# 1. Escapes: ESC [31m and BEL in the process and thread names.
esc=$(printf '\033[31mred\a')
start env "$target" --name "$esc" --threads 2 || exit 1
"$nb" show --pid "$PID" --threads >"$work/out" 2>&1
if grep -q $'\033\|\a' "$work/out"; then fail "a raw control character reached the text report: $(od -c "$work/out" | head -3)"
else pass "no raw control character in the text report"; fi
if [ "$(grep -c 'x1b\[31mred\\x07' "$work/out")" -ge 3 ]; then pass "process and thread names shown escaped: $(grep -m1 '^process' "$work/out")"
else fail "names not shown escaped: $(head -5 "$work/out")"; fi
"$nb" show --pid "$PID" --json >"$work/json" 2>&1
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["name"].startswith("\x1b[31m") else 1)' "$work/json"
then pass "JSON keeps the name exact (escaped by JSON itself)"; else fail "JSON name: $(head -c 300 "$work/json")"; fi

# 2. Bounded work: 100 threads x 10,000 mappings below the first file mapping, 200 KB of
# NUMABIND_CPUS ranges. Before the bounds this took ~33 s; each thread now reads 64 KiB of
# its numa_maps at most, and a variable is kept up to 4096 bytes.
cpus=$(printf '0-1048575,%.0s' $(seq 12000))
start env NUMABIND_MODE=exclusive NUMABIND_CPUS="${cpus%,}" "$target" --threads 100 --mappings 10000 || exit 1
t0=$(date +%s%N)
timeout 60 "$nb" show --pid "$PID" >"$work/out" 2>&1
rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$rc" -le 1 ] && grep -q '^process: ' "$work/out"; then pass "100 threads x 10,000 mappings reported (rc $rc, $ms ms)"
else fail "no report (rc $rc, $ms ms): $(head -3 "$work/out")"; fi
if grep -q 'note: limit: memory policy of 101 thread(s) unknown: no file mapping in the first 64 KiB' "$work/out"
then pass "the cut is said: $(grep -m1 'memory policy of' "$work/out")"; else fail "no note for the per-thread limit: $(grep note "$work/out")"; fi
if grep -q 'note: limit: NUMABIND_CPUS cut at 4096 bytes' "$work/out"; then pass "the cut variable is said"
else fail "no note for the cut variable: $(grep note "$work/out")"; fi
[ "$ms" -lt 20000 ] || fail "took $ms ms (bounded work expected well under 20 s)"

# 3. The caller's own process, not dumpable: its /proc files are root's.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
  chmod 0755 "$work"
  start setpriv --reuid=65534 --regid=65534 --clear-groups "$target" --nondumpable || exit 1
  child=$(pgrep -P "$PID" -f show_pid_target || echo "$PID")
  setpriv --reuid=65534 --regid=65534 --clear-groups "$nb" show --pid "$child" >"$work/out" 2>&1
  if grep -q "is yours but not dumpable" "$work/out"; then pass "own non-dumpable process: $(head -1 "$work/out")"
  else fail "own non-dumpable process: $(head -2 "$work/out")"; fi
else
  skip_case "the non-dumpable case needs root and setpriv"
fi
finish
