#!/usr/bin/env bash
# tests/fault/hardening.sh — exported symbols and hardening of the shipped binaries.
# Usage: hardening.sh NUMABIND_CLI [SPANK_PLUGIN.so]
#   plugin: exports only what Slurm's loader looks up (slurm_spank_*, plugin_*,
#           spank_plugin_*; _init/_fini tolerated) — nm -D --defined-only; the step engine
#           beside it (numabind_stepd.so) only numabind_stepd_v1
#   all:    BIND_NOW, a GNU_RELRO segment, a non-executable stack, the stack protector
#           (__stack_chk_fail) and FORTIFY_SOURCE (*_chk) referenced; the CLI is PIE. The
#           plugin front is small enough that the compiler proves every buffer size of its
#           own calls, so it needs no *_chk: its witness is the engine, compiled by the same
#           CMake function with the same flags (spank/CMakeLists.txt); no empty or relative
#           RPATH/RUNPATH entry (readelf -d), which would load libraries from the current
#           directory.
set -uo pipefail
cli=${1:?usage: hardening.sh NUMABIND_CLI [SPANK_PLUGIN.so]}
plugin=${2:-}
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"

harden() {  # FILE LABEL [FORTIFY_WITNESS]
  local f=$1 what=$2 witness=${3:-} dyn prog syms
  dyn=$(readelf -dW "$f")
  prog=$(readelf -lW "$f")
  syms=$(nm -D "$f")
  if grep -qE 'BIND_NOW|FLAGS.*\bNOW\b' <<<"$dyn"; then pass "$what: BIND_NOW"; else fail "$what: not linked with -z now"; fi
  if grep -q GNU_RELRO <<<"$prog"; then pass "$what: GNU_RELRO"; else fail "$what: no RELRO segment"; fi
  if grep GNU_STACK <<<"$prog" | grep -q 'RWE'; then fail "$what: executable stack"; else pass "$what: non-executable stack"; fi
  if grep -q '__stack_chk_fail' <<<"$syms"; then pass "$what: stack protector"; else fail "$what: __stack_chk_fail not referenced (no -fstack-protector)"; fi
  if grep -qE '__[a-z_]+_chk(@|$)' <<<"$syms"; then pass "$what: FORTIFY_SOURCE"
  elif [ -n "$witness" ] && grep -qE '__[a-z_]+_chk(@|$)' <<<"$(nm -D "$witness")"; then
    pass "$what: FORTIFY_SOURCE (no call left to check at run time; $(basename "$witness"), same flags, references *_chk)"
  else fail "$what: no *_chk function referenced (no _FORTIFY_SOURCE)"; fi
  runpath_clean "$f" "$what" "$dyn"
  if readelf -sW "$f" | grep -q '__asan_init'; then echo "note - $what is an ASan build"; fi
}

# RPATH/RUNPATH: every entry absolute (or $ORIGIN-based); an empty or relative one makes
# the loader search the caller's current directory (CMake's build-RPATH padding ends in ':').
runpath_clean() {  # FILE LABEL READELF_D
  local f=$1 what=$2 dyn=$3 paths p bad_entries=""
  paths=$(sed -nE 's/.*\((RPATH|RUNPATH)\).*\[(.*)\]$/\2/p' <<<"$dyn")
  if [ -z "$paths" ] && ! grep -qE '\((RPATH|RUNPATH)\)' <<<"$dyn"; then pass "$what: no RPATH/RUNPATH"; return; fi
  while IFS= read -r line; do
    # an empty list, a leading, trailing or doubled ':' is an empty entry
    if [ -z "$line" ] || [[ $line == :* || $line == *: || $line == *::* ]]; then bad_entries+=" (empty entry in '$line')"; fi
    IFS=: read -ra parts <<<"$line"
    for p in "${parts[@]}"; do
      [ -z "$p" ] && continue
      case $p in /* | '$ORIGIN'*) ;; *) bad_entries+=" (relative entry '$p')" ;; esac
    done
  done <<<"$paths"
  if [ -z "$bad_entries" ]; then pass "$what: RUNPATH entries all absolute: $(echo $paths)"
  else fail "$what: RPATH/RUNPATH searches the current directory:$bad_entries"; fi
}

harden "$cli" "numabind (CLI)"
if readelf -hW "$cli" | grep -q 'Type:.*DYN'; then pass "numabind (CLI): PIE"; else fail "numabind (CLI): not PIE"; fi

if [ -n "$plugin" ]; then
  engine=$(dirname "$plugin")/numabind_stepd.so
  harden "$plugin" "spank_numabind.so" "$engine"
  if [ -f "$engine" ]; then
    harden "$engine" "numabind_stepd.so"
    e_exports=$(nm -D --defined-only "$engine" | awk 'NF >= 3 { print $3 }' | sort -u | tr '\n' ' ')
    if [ "$e_exports" = "numabind_stepd_v1 " ]; then pass "numabind_stepd.so exports only: $e_exports"; else fail "numabind_stepd.so exports: $e_exports"; fi
  else
    fail "no step engine beside the plugin ($engine)"
  fi
  exports=$(nm -D --defined-only "$plugin" | awk 'NF >= 3 { print $3 }' | sort -u)
  unexpected=$(grep -Ev '^(slurm_spank_[A-Za-z0-9_]+|plugin_[A-Za-z0-9_]+|spank_plugin_[A-Za-z0-9_]+|_init|_fini)$' <<<"$exports")
  if [ -z "$unexpected" ]; then pass "spank_numabind.so exports only: $(echo $exports)"; else fail "spank_numabind.so exports more: $(echo $unexpected | head -c 400)"; fi
  # No C++ runtime or library symbol of ours leaks into slurmstepd's namespace.
  if grep -qE '^_Z' <<<"$exports"; then fail "spank_numabind.so exports C++ symbols"; fi
  # Nothing it needs at load time is left unresolved beyond the Slurm/libc/libstdc++ set.
  undefined=$(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep -E '^(slurm_|spank_)' | sort -u | tr '\n' ' ')
  echo "note - spank_numabind.so uses from Slurm: $undefined"
else
  skip_case "no SPANK plugin given (not built here)"
fi
finish
