# shellcheck shell=bash
# tests/lib/checks.sh — the helpers every shell test script shares (bash; source it):
#   . "$(dirname "$0")/../lib/checks.sh"
# One line per result, a count of each; exit 0 all passed, 1 a check failed, 77 skipped.
#
#   pass NAME                  "ok   - NAME"
#   fail NAME [DETAIL]         "FAIL - NAME", then DETAIL's lines indented; counts a failure and
#                              runs the script's on_fail function if it defines one (to show
#                              the output of the command that failed, e.g. `show "$WORK/err"`)
#   check NAME CMD [ARG...]    runs CMD ARG... (no shell re-parsing): pass NAME if it exits 0,
#                              else fail NAME. A shell expression goes through eval:
#                                check "bad --mode: exit 2" eval '[ $(rc) = 2 ] && grep -q x "$WORK/err"'
#                              (the expression runs in the script's shell, as when written
#                              inline: its functions and variables, evaluated at check time;
#                              $? is still the status of the command before check)
#   check_eq NAME EXPECTED ACTUAL
#                              pass if the two strings are equal, else fail showing both
#                              (newlines shown as |)
#   skip REASON                "SKIP: REASON" and exit 77 (ctest's SKIP_RETURN_CODE): the whole
#                              test cannot run here
#   skip_case REASON           "skip - REASON" and go on: one part of the test cannot run here
#   need TOOL...               skip "TOOL not found" unless every TOOL is on PATH
#   show FILE [LINES [LABEL]]  the first LINES (default 10) lines of FILE, indented, each after
#                              "LABEL: " if given; nothing if FILE is missing or empty
#   finish [LABEL]             "LABEL: P passed, F failed in S s" (LABEL: the script's name),
#                              then exit 1 after a failure, else 0
#   cpu_list LIST              LIST expanded and sorted: "0-2,5" -> "0,1,2,5" (cpulist.py)
#   cpu_ranges LIST [WITHIN]   LIST in the kernel's form: "0,1,2,5" -> "0-2,5"; with WITHIN
#                              (a list, or "-" for none) only the CPUs WITHIN has
#   nb_python ARG...           python3 with tests/lib importable: `from cpulist import ids, fmt`
#
# State: $passes and $failures (read them, e.g. in an EXIT trap that keeps a work directory
# after a failure). CHECKS_TIMES=1 ends each ok/FAIL line with the seconds since the library
# was sourced. Every helper returns 0 (safe under set -e, set -u and pipefail); sourcing it
# twice (a script and a sourced helper of it) keeps the first counts.
if [ -n "${_nb_checks_sh:-}" ]; then return 0; fi
_nb_checks_sh=1
_nb_checks_t0=$SECONDS
_nb_checks_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
passes=0
failures=0

_nb_checks_when() {
  if [ "${CHECKS_TIMES:-0}" = 1 ]; then echo " [$((SECONDS - _nb_checks_t0)) s]"; fi
  return 0
}
pass() {
  passes=$((passes + 1))
  echo "ok   - $1$(_nb_checks_when)"
  return 0
}
fail() {
  failures=$((failures + 1))
  echo "FAIL - $1$(_nb_checks_when)"
  if [ -n "${2:-}" ]; then printf '%s\n' "$2" | sed 's/^/       /'; fi
  if declare -F on_fail >/dev/null; then on_fail || true; fi
  return 0
}
# The names of the locals below start with _nb_ so that an eval'd expression sees the
# script's own variables (a local "name" would hide the caller's).
_nb_status() { return "$1"; }
check() {
  local _nb_before=$? _nb_name=$1
  shift
  # CMD sees in $? the status of the command before check (e.g. eval '[ $? = 2 ]').
  if _nb_status "$_nb_before"; "$@"; then pass "$_nb_name"; else fail "$_nb_name"; fi
  return 0
}
check_eq() {
  if [ "$2" = "$3" ]; then
    pass "$1"
  else
    fail "$1" "expected: $(printf '%s' "$2" | tr '\n' '|')
actual:   $(printf '%s' "$3" | tr '\n' '|')"
  fi
  return 0
}
skip() {
  echo "SKIP: $*"
  exit 77
}
skip_case() {
  echo "skip - $*"
  return 0
}
need() {
  local _nb_tool
  for _nb_tool in "$@"; do
    command -v "$_nb_tool" >/dev/null 2>&1 || skip "$_nb_tool not found"
  done
  return 0
}
show() {
  local _nb_prefix="       ${3:+$3: }"
  if [ -s "$1" ]; then head -n "${2:-10}" "$1" | sed "s|^|$_nb_prefix|"; fi
  return 0
}
# shellcheck disable=SC2120  # LABEL is optional
finish() {
  echo "${1:-${0##*/}}: $passes passed, $failures failed in $((SECONDS - _nb_checks_t0)) s"
  if [ "$failures" -ne 0 ]; then exit 1; fi
  exit 0
}

# The script tiers' one CPU-list parser (tests/lib/cpulist.py), from the shell and from Python.
cpu_list() { python3 "$_nb_checks_lib/cpulist.py" "$1"; }
cpu_ranges() { python3 "$_nb_checks_lib/cpulist.py" --ranges "$1" "${2--}"; }
nb_python() { PYTHONPATH="$_nb_checks_lib${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"; }
