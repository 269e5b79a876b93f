#!/usr/bin/env bash
# The test command: install what is needed (Debian 12 or 13, root), build, run every test tier.
#   scripts/test.sh                 all tiers (unit, cli, slurm, mpi, vm)
#   NUMABIND_TEST_LABELS=unit|cli   only the labelled ctest tiers (a ctest -L regex)
#   NUMABIND_BUILD_DIR=DIR          build directory (default: build)
#   NUMABIND_ASAN=0                 skip the AddressSanitizer/UBSan pass (build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
took() { echo "scripts/test.sh: $1 took $(( $(date +%s) - t0 )) s"; t0=$(date +%s); }
.ci/install-deps.sh
took "install-deps"
BUILD=${NUMABIND_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD" -j"$(nproc)"
took "build"
args=(--test-dir "$BUILD" --output-on-failure --timeout 900)
[ -n "${NUMABIND_TEST_LABELS:-}" ] && args+=(-L "$NUMABIND_TEST_LABELS")
start=$(date +%s)
ctest "${args[@]}"
took "ctest${NUMABIND_TEST_LABELS:+ -L $NUMABIND_TEST_LABELS}"
# The unit and command-line tiers again under AddressSanitizer + UBSan (own build dir).
if [ -z "${NUMABIND_TEST_LABELS:-}" ] && [ "${NUMABIND_ASAN:-1}" = 1 ]; then
  NUMABIND_JOBS="$(nproc)" tests/asan.sh
  took "ASan/UBSan pass"
fi
echo "scripts/test.sh: all tests passed in $(( $(date +%s) - start )) s"
