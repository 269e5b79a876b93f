#!/usr/bin/env bash
# The plugin (the front, spank_numabind.so) exports only what Slurm's loader looks up, the
# step engine beside it (numabind_stepd.so) only the interface the front looks up
# (spank/shared/stepd_api.h); both are linked with relro/now and a non-executable stack, and
# compiled with the stack protector (and FORTIFY_SOURCE: see tests/fault/hardening.sh). Neither needs libstdc++ (linked in
# statically) nor libnuma (mempolicy_calls.cpp), and the front does not need hwloc: srun and
# every slurmstepd load the front, and each of those libraries costs a slice of a
# millisecond per load (docs/PERFORMANCE.md).
set -uo pipefail
so=${1:?usage: check_exports.sh spank_numabind.so}
engine=$(dirname "$so")/numabind_stepd.so
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
hardened() {  # FILE [LIB...]: relro/now, no executable stack, stack protector; no libstdc++/libnuma/LIB
  local f=$1 dyn needed syms lib
  dyn=$(readelf -d "$f")
  grep -q 'BIND_NOW' <<<"$dyn" || fail "$f: not linked with -z now"
  needed=$(awk '/\(NEEDED\)/ { print $NF }' <<<"$dyn" | tr -d '[]')
  for lib in libnuma libstdc++ ${2:-}; do
    grep -q "^$lib\." <<<"$needed" && fail "$f needs $lib (NEEDED: $(echo $needed))"
  done
  readelf -lW "$f" | grep -q 'GNU_RELRO' || fail "$f: no RELRO segment"
  readelf -lW "$f" | grep 'GNU_STACK' | grep -q 'RWE' && fail "$f: executable stack"
  syms=$(nm -D "$f")
  grep -q '__stack_chk_fail' <<<"$syms" || fail "$f: no stack protector (__stack_chk_fail not referenced)"
  # FORTIFY_SOURCE: tests/fault/hardening.sh (the front needs no run-time check of its own calls).
}
[ -f "$engine" ] || fail "no step engine beside the plugin ($engine)"
exports=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort)
unexpected=$(grep -Ev '^(slurm_spank_[a-z_]+|plugin_name|plugin_type|plugin_version|spank_plugin_version)$' <<<"$exports")
[ -z "$unexpected" ] || fail "unexpected exported symbols: $(echo $unexpected)"
for s in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init \
         slurm_spank_init_post_opt slurm_spank_task_init slurm_spank_exit; do
  grep -qx "$s" <<<"$exports" || fail "missing export $s"
done
hardened "$so" libhwloc
grep -q '_chk@' <<<"$(nm -D "$engine" 2>/dev/null)" || fail "$engine: no FORTIFY_SOURCE (*_chk functions not referenced)"
if [ -f "$engine" ]; then
  engine_exports=$(nm -D --defined-only "$engine" | awk '{ print $3 }' | sort | tr '\n' ' ')
  [ "$engine_exports" = "numabind_stepd_v1 " ] || fail "the engine exports $engine_exports, not only numabind_stepd_v1"
  hardened "$engine"
fi
[ "$failures" -eq 0 ] && pass "exports: $(echo $exports); engine: ${engine_exports:-}"
finish
