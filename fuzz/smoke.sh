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
# The known-hwloc-crash filter (hwloc_known_crashes.hpp) must catch every reproducer it
# names, also when spelled differently (any whitespace, a look-alike attribute name): each
# input runs once through fuzz_topology_xml, which crashes in hwloc if the filter lets it by.
# Each file is first checked to crash `lstopo --input` (the filter would test nothing).
filter_check() {
  local dir bin=$FUZZ_BUILD_DIR/fuzz/fuzz_topology_xml k=$here/known-hwloc-crashes bad=0
  dir=$(mktemp -d)
  cp "$k/core-without-complete_cpuset.xml" "$k/root-without-complete_cpuset.xml" "$k/doctype-without-systemid.xml" "$dir/"
  sed 's/type="Core" os_index="0" cpuset/type="Core" os_index="0" xcomplete_cpuset="0x1" cpuset/' \
      "$k/core-without-complete_cpuset.xml" >"$dir/lookalike-attribute.xml"
  sed 's/type="Core" os_index="0" cpuset/type="Core"\tos_index="0"\ncpuset/' \
      "$k/core-without-complete_cpuset.xml" >"$dir/tab-newline.xml"
  sed "s/cpuset=\"0x1\" nodeset/cpuset='0x1' nodeset/" "$k/root-without-complete_cpuset.xml" >"$dir/single-quotes.xml"
  printf '<!DOCTYPE\ttopology [ ]>\n<topology version="2.0"/>\n' >"$dir/doctype-internal-subset.xml"
  for f in "$dir"/*.xml; do
    if command -v lstopo >/dev/null && (timeout 20 lstopo --input "$f" --of xml - >/dev/null 2>&1) 2>/dev/null; then
      echo "fuzz/smoke.sh: $(basename "$f") no longer crashes lstopo: drop or update it"; bad=1
    fi
    if ! ASAN_OPTIONS=detect_leaks=0 timeout 60 "$bin" "$f" >"$dir/log" 2>&1; then
      echo "fuzz/smoke.sh: the known-hwloc-crash filter let $(basename "$f") through:"; tail -5 "$dir/log"; bad=1
    fi
  done
  rm -rf "$dir"
  [ $bad -eq 0 ] && echo "fuzz/smoke.sh: known-hwloc-crash filter catches all reproducers and variants"
  return $bad
}
filter_check || exit 1
exec "$here/run.sh" "$@"
