#!/usr/bin/env bash
# The plugin exports only what Slurm's loader looks up, is linked with relro/now and
# a non-executable stack, and was compiled with the stack protector and FORTIFY_SOURCE.
# It needs neither libstdc++ (linked in statically) nor libnuma (mempolicy_calls.cpp): srun
# and every slurmstepd load it, and each of those cost about 1 ms per load (docs/PERFORMANCE.md).
set -uo pipefail
so=${1:?usage: check_exports.sh spank_numabind.so}
fails=0
fail() { echo "FAIL - $*"; fails=$((fails + 1)); }
exports=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort)
unexpected=$(grep -Ev '^(slurm_spank_[a-z_]+|plugin_name|plugin_type|plugin_version|spank_plugin_version)$' <<<"$exports")
[ -z "$unexpected" ] || fail "unexpected exported symbols: $(echo $unexpected)"
for s in plugin_name plugin_type plugin_version spank_plugin_version slurm_spank_init \
         slurm_spank_init_post_opt slurm_spank_task_init slurm_spank_exit; do
  grep -qx "$s" <<<"$exports" || fail "missing export $s"
done
dyn=$(readelf -d "$so")
grep -q 'BIND_NOW' <<<"$dyn" || fail "not linked with -z now"
needed=$(awk '/\(NEEDED\)/ { print $NF }' <<<"$dyn" | tr -d '[]')
for lib in libnuma libstdc++; do
  grep -q "^$lib\." <<<"$needed" && fail "needs $lib (NEEDED: $(echo $needed))"
done
readelf -lW "$so" | grep -q 'GNU_RELRO' || fail "no RELRO segment"
readelf -lW "$so" | grep 'GNU_STACK' | grep -q 'RWE' && fail "executable stack"
syms=$(nm -D "$so")
grep -q '__stack_chk_fail' <<<"$syms" || fail "no stack protector (__stack_chk_fail not referenced)"
grep -q '_chk@' <<<"$syms" || fail "no FORTIFY_SOURCE (*_chk functions not referenced)"
[ $fails -eq 0 ] && echo "ok - exports: $(echo $exports)"
exit $((fails > 0))
