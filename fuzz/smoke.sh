#!/usr/bin/env bash
# fuzz/smoke.sh — CI smoke run of every libFuzzer harness (ctest label "fuzz").
# Configures a clang build in build-fuzz (or $FUZZ_BUILD_DIR) if needed, builds the
# harnesses, and runs each through fuzz/run.sh for a fixed number of executions from a fixed
# seed and its seeds only (FUZZ_SEED, default 1): the same inputs on every run and machine, so
# the test command never fails by chance. Finding new bugs is the full run's job
# (`cmake --build build-fuzz --target fuzz`, random seeds; SECURITY.md).
#   FUZZ_SMOKE_SCALE  multiplies every harness's execution count (default 1)
# Exit 77 (ctest: skipped) when clang++ or its libFuzzer runtime is missing.
#   FUZZ_JOBS_BUILD  build parallelism (default: nproc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
export FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-$root/build-fuzz}
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
# fuzz/run.sh lets a crash inside hwloc's own XML loading pass (hwloc_crash_filter.sh); that
# needs symbolized stacks. Check it on a reproducer the in-process filter does not skip.
# shellcheck source=fuzz/hwloc_crash_filter.sh
. "$here/hwloc_crash_filter.sh"
log=$(mktemp)
ASAN_OPTIONS=detect_leaks=0 "$FUZZ_BUILD_DIR/fuzz/fuzz_topology_xml" "$here/known-hwloc-crashes/bitmap-sscanf-assert.xml" >"$log" 2>&1 || true
if ! hwloc_internal_crash "$log"; then
  echo "fuzz/smoke.sh: an hwloc-internal crash (known-hwloc-crashes/bitmap-sscanf-assert.xml) is not recognised;"
  echo "  unnamed stack frames? install llvm-symbolizer (Debian package llvm). The stack:"
  grep -E '^    #[0-9]+ ' "$log" | head -20
  rm -f "$log"; exit 1
fi
rm -f "$log"
# Executions per harness: about 10-20 s each on a 2-core CI machine (SECURITY.md's exec/s).
declare -A runs=([fuzz_options]=150000 [fuzz_idset]=40000 [fuzz_device_match]=150000 [fuzz_visible]=200000
                 [fuzz_local_rank]=200000 [fuzz_topology_xml]=3000 [fuzz_model_text]=200000 [fuzz_proc_parsers]=120000)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${!runs[@]}")
export FUZZ_SEED=${FUZZ_SEED:-1} FUZZ_FRESH_CORPUS=1
# Without address randomisation: libFuzzer's comparison tracing records pointer values too, so
# under ASLR the same seed mutates differently from run to run (measured: 21-28 new units).
norand=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norand=(setarch "$(uname -m)" -R)
else echo "fuzz/smoke.sh: setarch -R refused here; runs are not repeatable"; fi
failed=0
for h in $(printf '%s\n' "${harnesses[@]}" | sort); do
  [ -n "${runs[$h]:-}" ] || { echo "fuzz/smoke.sh: unknown harness $h (valid: ${!runs[*]})"; exit 2; }
  FUZZ_RUNS=$(( ${runs[$h]} * ${FUZZ_SMOKE_SCALE:-1} )) "${norand[@]}" "$here/run.sh" "$h" | grep -v '^fuzz: total' || failed=1
done
exit $failed
