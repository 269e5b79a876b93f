#!/usr/bin/env bash
# tests/fault/bind_threads_test.sh PROBE GEN_TOPOLOGY — numabind_bind() against programs whose
# threads fight it (bind_threads_probe.c): threads started during
# bind, signals the program blocks, waits for or handles, threads that block everything, a
# late answer to an earlier bind, two threads binding at once. The plans come from a
# generated topology of this machine with a fake GPU on its first and last core.
set -uo pipefail
probe=$1 gen=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
last=$(($(grep -c '^processor' /proc/cpuinfo) - 1))
python3 "$gen" -o "$work/topo.xml" --gpu core:0 --gpu "core:$last" >/dev/null || exit 1
failed=0
for s in spawn sigwait blockall handlers lateack two; do
  timeout 120 "$probe" "$s" "$work/topo.xml" || failed=1
done
exit $failed
