# Shared helpers of the shell test scripts (source it): one line per check, a failure count.
#   check NAME 'SHELL TEST'   pass when the test (eval'd) succeeds, else fail
#   pass NAME / fail NAME     record one result directly
failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }
check() { if eval "$2"; then pass "$1"; else fail "$1"; fi; }
