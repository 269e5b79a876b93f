#!/usr/bin/env bash
# bench/cli_bench.sh — wall time (hyperfine) and peak memory (/usr/bin/time -v) of the
# numabind command on this machine: live discovery vs XML vs the per-boot cache, and
# `numabind show` / `numabind plan`.
#
#   bench/cli_bench.sh NUMABIND TOPO_DIR OUT_DIR     (run by `cmake --build B --target bench-cli`)
#
# TOPO_DIR: the recorded corpus ($NUMABIND_TOPOLOGY_CORPUS wins; its rows are left out when it
# is absent). Generated nodes (tests/tools/gen_topology.py --preset) are measured always.
#
# Environment: RUNS (default 60), WARMUP (default 5). Writes OUT_DIR/cli.{json,md} and
# OUT_DIR/cli_rss.txt. Needs hyperfine; the cache rows need root (the cache trusts only
# root-owned files) and are left out otherwise.
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
NB=$(readlink -f "$1"); TOPO=${NUMABIND_TOPOLOGY_CORPUS:-$2}; OUT=$3
[ -f "$TOPO/psmgmt_topo.jsfc005.xml" ] || { echo "cli_bench: corpus not found at $TOPO (set NUMABIND_TOPOLOGY_CORPUS): its rows are left out" >&2; TOPO=""; }
RUNS=${RUNS:-60}; WARMUP=${WARMUP:-5}
command -v hyperfine >/dev/null || { echo "cli_bench: hyperfine not found; skipped" >&2; exit 0; }
mkdir -p "$OUT"; OUT=$(readlink -f "$OUT")
work=$(mktemp -d /tmp/numabind-cli-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"

# This machine as XML, and with two fake GPUs on package 0 (for a GPU-mode plan here).
"$NB" topo >/dev/null
GEN=$(dirname "$0")/../tests/tools/gen_topology.py
python3 "$GEN" -o "$work/this-2gpu.xml" --gpu package:0 --gpu package:0 >/dev/null
python3 "$GEN" --preset dgx-a100 -o "$work/dgx-a100.xml"
python3 "$GEN" --preset 16gpu -o "$work/16gpu.xml"
lstopo_xml=""
if command -v lstopo-no-graphics >/dev/null; then
  lstopo-no-graphics --of xml -f "$work/this.xml" && lstopo_xml="$work/this.xml"
fi

cache=off
if [ "$(id -u)" -eq 0 ]; then
  NUMABIND_TOPOLOGY_CACHE="$work/cache" "$NB" topo --export-cache >/dev/null && cache="$work/cache"
fi

# Every command goes through env(1) so that each row pays the same exec overhead. The CLI
# keeps hwloc's GL, OpenCL and libxml2 plugins unloaded unless HWLOC_PLUGINS_BLACKLIST is
# set; "all hwloc plugins" rows set it to a name that matches nothing.
E="env NUMABIND_TOPOLOGY_CACHE=off"
C="env NUMABIND_TOPOLOGY_CACHE=$cache"
declare -a names cmds
add() { names+=("$1"); cmds+=("$2"); }
add "process floor: numabind --version"                 "$E $NB --version"
add "topo: live discovery"                              "$E $NB topo"
add "topo: live discovery, all hwloc plugins"           "$E HWLOC_PLUGINS_BLACKLIST=none $NB topo"
[ "$cache" != off ] && add "topo: per-boot cache hit"   "$C $NB topo"
[ -n "$lstopo_xml" ] && add "topo: --topology lstopo XML of this machine" "$E $NB topo --topology $lstopo_xml"
add "topo: --topology generated DGX A100 (256 PUs, 8 GPUs)" "$E $NB topo --topology $work/dgx-a100.xml"
add "topo: --topology generated 16-GPU node"           "$E $NB topo --topology $work/16gpu.xml"
if [ -n "$TOPO" ]; then
add "topo: --topology jsfc005 (256 PUs, 316 KiB)"       "$E $NB topo --topology $TOPO/psmgmt_topo.jsfc005.xml"
add "topo: --topology jsfc005, all hwloc plugins"      "$E HWLOC_PLUGINS_BLACKLIST=none $NB topo --topology $TOPO/psmgmt_topo.jsfc005.xml"
add "topo: --topology DGX-2 (16 GPUs)"                  "$E $NB topo --topology $TOPO/hwloc_nvidiaDGX2.xml"
fi
add "show: live"                                        "$E $NB show"
[ "$cache" != off ] && add "show: cache"                "$C $NB show"
add "plan: live, exclusive, 2 tasks (2 virtio PCI functions as devices)" "$E $NB plan --mode exclusive --ntasks 2 --device-match class=0x0180,class=0x0200"
[ "$cache" != off ] && add "plan: cache, exclusive, 2 tasks (2 virtio PCI functions as devices)" "$C $NB plan --mode exclusive --ntasks 2 --device-match class=0x0180,class=0x0200"
add "plan: this machine + 2 fake GPUs (XML), exclusive, 2 tasks" "$E $NB plan --mode exclusive --ntasks 2 --topology $work/this-2gpu.xml"
add "plan: generated DGX A100, exclusive, 16 tasks"      "$E $NB plan --mode exclusive --ntasks 16 --topology $work/dgx-a100.xml"
[ -n "$TOPO" ] && add "plan: jsfc005, core-complex, 16 tasks" "$E $NB plan --mode core-complex --ntasks 16 --topology $TOPO/psmgmt_topo.jsfc005.xml"

args=()
for i in "${!cmds[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
echo "== cli_bench: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -Is)"
hyperfine -N --style basic -w "$WARMUP" -r "$RUNS" --export-json "$OUT/cli.json" \
  --export-markdown "$OUT/cli.md" "${args[@]}"

# Medians (wall, user+sys CPU) from the JSON: robust against other load on the machine.
python3 - "$OUT/cli.json" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
print(f"{'command':62} {'median ms':>9} {'min ms':>7} {'cpu ms':>7}")
for r in d["results"]:
    cpu = [u + s for u, s in zip(r["user"] if isinstance(r["user"], list) else [], r.get("system", []))] \
        if isinstance(r.get("user"), list) else []
    cpu_ms = statistics.median(cpu) * 1e3 if cpu else (r["user"] + r["system"]) * 1e3
    print(f"{r['command'][:62]:62} {statistics.median(r['times'])*1e3:9.2f} {min(r['times'])*1e3:7.2f} {cpu_ms:7.2f}")
PY

# Peak RSS: median of 5 runs of /usr/bin/time -v.
if [ -x /usr/bin/time ]; then
  {
    echo "== peak RSS (median of 5 runs, /usr/bin/time -v), KiB"
    for i in "${!cmds[@]}"; do
      vals=()
      for _ in 1 2 3 4 5; do
        # shellcheck disable=SC2086
        v=$(/usr/bin/time -v ${cmds[$i]} 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ {print $2}')
        vals+=("$v")
      done
      med=$(printf '%s\n' "${vals[@]}" | sort -n | sed -n 3p)
      printf '%8s  %s\n' "$med" "${names[$i]}"
    done
  } | tee "$OUT/cli_rss.txt"
fi
echo "cli_bench: results in $OUT/cli.json, cli.md, cli_rss.txt"
