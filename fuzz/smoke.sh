#!/usr/bin/env bash
# fuzz/smoke.sh — CI smoke run of every libFuzzer harness (ctest label "fuzz").
# Configures a clang build in build-fuzz (or $FUZZ_BUILD_DIR) if needed, builds the
# harnesses, and runs each for $FUZZ_SECONDS (default 15) through fuzz/run.sh.
# Exit 77 (ctest: skipped) when clang++ or its libFuzzer runtime is missing.
#   FUZZ_JOBS_BUILD  build parallelism (default: nproc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
export FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-$root/build-fuzz}
export FUZZ_SECONDS=${FUZZ_SECONDS:-15}
CXX_FUZZ=${FUZZ_CXX:-$(command -v clang++ || command -v clang++-14 || true)}
CC_FUZZ=${FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$CXX_FUZZ" ] || [ -z "$CC_FUZZ" ]; then
  echo "fuzz/smoke.sh: clang++ not found (apt-get install clang libclang-rt-14-dev); skipped"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
if ! "$CXX_FUZZ" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  echo "fuzz/smoke.sh: $CXX_FUZZ cannot link libFuzzer (libclang-rt-*-dev missing?); skipped"
  cat "$probe/err"
  exit 77
fi
if [ ! -f "$FUZZ_BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$FUZZ_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" \
        -DNUMABIND_FUZZ=ON -DNUMABIND_BUILD_TESTS=OFF -DNUMABIND_BUILD_SPANK=OFF -DNUMABIND_WITH_PMIX=OFF >/dev/null
fi
cmake --build "$FUZZ_BUILD_DIR" --target numabind_fuzzers -j"${FUZZ_JOBS_BUILD:-$(nproc)}"
exec "$here/run.sh" "$@"
