#!/usr/bin/env bash
# tests/package/package_test.sh — install/packaging tests (ctest label "package").
#
#   package_test.sh STEP BUILD_DIR SOURCE_DIR STAGE_DIR
#
# STEP:
#   install    cmake --install BUILD --prefix STAGE, with the Slurm plugin dir and the
#              plugstack.conf.d dir overridden into STAGE (nothing may land outside STAGE);
#              checks every installed file and runs the installed numabind
#   consumer   a project outside the tree uses the installed library: find_package(numabind)
#              with CMake, and pkg-config numabind with a plain g++ command; both run
#   man        the installed man pages render without warnings (groff -ww, man --warnings)
#   examples   bash -n / py_compile of every example; sbatch-ddp.sh dry run; the placement
#              part of train_resnet18.py under the installed `numabind run` (real binding,
#              checked against /proc/self/status)
#   slurm      the installed plugin in a private Slurm cluster (tests/slurm/cluster.sh):
#              srun --help lists --numa-binding; srun -n1 --numa-binding=node binds the task;
#              the training example's placement under srun (needs root; 77 = skipped)
#   tables     the DGX A100 tables in the man pages and docs/OPTIONS.md are what the installed
#              `numabind plan` prints for the generated DGX-A100-like node
#              (tests/tools/gen_topology.py --preset dgx-a100)
#   deb        cpack -G DEB; the .deb lists the CLI, plugin, man pages, conf (as a conffile)
#              and depends on libhwloc15, libnuma1 and Slurm's plugins of the release it
#              was built for (major.minor from slurm_version.h), copyright = Apache-2.0
#   rpm        rpmbuild -bb packaging/rpm/numabind.spec from a source tarball of SOURCE_DIR
#              (for real: it compiles; --nodeps since Debian's rpm database is empty); the
#              RPMs' License, Requires/Provides on the Slurm release, and file lists
# Exit 0 pass, 1 fail, 77 skipped.
set -Eeuo pipefail

STEP=${1:?step}
BUILD=$(cd "${2:?build dir}" && pwd)
SRC=$(cd "${3:?source dir}" && pwd)
STAGE=${4:?stage dir}
mkdir -p "$STAGE"
STAGE=$(cd "$STAGE" && pwd)
PLUGIN_DIR=$STAGE/slurm-plugins
CONF_DIR=$STAGE/etc/slurm/plugstack.conf.d

# pass, fail, check DESCRIPTION COMMAND..., skip, finish; cluster_start, cluster_stop
# shellcheck source=tests/lib/cluster.sh
. "$SRC/tests/lib/cluster.sh"
# A command that stops the script (set -e) says which one and why, instead of a silent exit.
trap 'rc=$?; [ "$BASH_SUBSHELL" = 0 ] && echo "FAIL: $STEP: line $LINENO: \`$BASH_COMMAND\` exited $rc" >&2' ERR
need_tool() {  # TOOL PACKAGE: a missing tool is a failure naming the package to install
  command -v "$1" >/dev/null && return 0
  fail "$1 not found (Debian package $2; .ci/install-deps.sh installs it)"; return 1
}

has_plugin() { [ -f "$BUILD/spank/spank_numabind.so" ]; }
libdir_of_stage() {  # the lib directory that holds libnumabind.a
  local f; f=$(find "$STAGE" -name libnumabind.a -print -quit 2>/dev/null)
  [ -n "$f" ] && dirname "$f"
}
need_stage() { [ -x "$STAGE/bin/numabind" ] || { echo "stage $STAGE not installed (run the install step)"; exit 1; }; }

# A topology of this very machine with one fake GPU on its first package (real binding possible).
this_topology() {  # OUT
  python3 "$SRC/tests/tools/gen_topology.py" -o "$1" --gpu package:0 >/dev/null
}
# A generated GPU node (gen_topology.py --preset NAME), the same one the man pages show.
preset_topology() {  # NAME OUT
  python3 "$SRC/tests/tools/gen_topology.py" --preset "$1" -o "$2"
}

step_install() {
  rm -rf "$STAGE"; mkdir -p "$STAGE"
  local log=$STAGE/../install.log
  NUMABIND_SLURM_PLUGIN_DIR=$PLUGIN_DIR NUMABIND_PLUGSTACK_DIR=$CONF_DIR \
    cmake --install "$BUILD" --prefix "$STAGE" >"$log" 2>&1 || { cat "$log"; fail "cmake --install"; finish; }
  pass "cmake --install --prefix STAGE"
  # nothing outside STAGE
  local outside
  outside=$(grep -v "^$STAGE/" "$BUILD/install_manifest.txt" || true)
  check "every installed file is below STAGE" test -z "$outside"
  [ -z "$outside" ] || echo "$outside"

  check "CLI installed" test -x "$STAGE/bin/numabind"
  check "headers installed" test -f "$STAGE/include/numabind/plan.hpp" -a -f "$STAGE/include/numabind/idset.hpp"
  # Only the public API (docs/API.md lists it): the headers the docs name, each one compiling
  # on its own against the installed tree alone (no internal header of src/ reached).
  local documented installed
  documented=$(grep -o 'numabind/[a-z_]*\.h[p]*' "$SRC/docs/API.md" | sort -u | tr '\n' ' ')
  installed=$(cd "$STAGE/include" && find numabind -type f | sort | tr '\n' ' ')
  check "installed headers are the documented public API ($installed)" test "$installed" = "$documented"
  local h bad="" cc
  for h in $installed; do
    if [ "${h##*.}" = h ]; then cc=(gcc -std=c11 -x c); else cc=(g++ -std=c++17 -x c++); fi
    echo "#include <$h>" | "${cc[@]}" -fsyntax-only -I"$STAGE/include" - 2>/dev/null || bad="$bad $h"
  done
  check "each public header compiles alone against the installed tree${bad:+ (not:$bad)}" test -z "$bad"
  local lib; lib=$(libdir_of_stage || true)
  check "libnumabind.a installed" test -n "$lib"
  check "CMake package config installed" test -f "$lib/cmake/numabind/numabindConfig.cmake" \
    -a -f "$lib/cmake/numabind/numabindConfigVersion.cmake" -a -f "$lib/cmake/numabind/numabindTargets.cmake"
  check "pkg-config file installed" test -f "$lib/pkgconfig/numabind.pc"
  check "man pages installed" test -f "$STAGE/share/man/man1/numabind.1" -a -f "$STAGE/share/man/man8/spank_numabind.8"
  check "docs and examples installed" test -f "$STAGE/share/doc/numabind/examples/train_resnet18.py" \
    -a -x "$STAGE/share/doc/numabind/examples/sbatch-ddp.sh" -a -f "$STAGE/share/doc/numabind/examples/plugstack.conf" \
    -a -f "$STAGE/share/doc/numabind/OPTIONS.md"
  if has_plugin; then
    check "plugin installed into the (overridden) Slurm plugin dir" test -f "$PLUGIN_DIR/spank_numabind.so"
    check "step engine installed beside the plugin" test -f "$PLUGIN_DIR/numabind_stepd.so"
    check "plugstack entry installed" test -f "$CONF_DIR/numabind.conf"
    check "plugstack entry names the installed plugin" \
      grep -qE "^required $PLUGIN_DIR/spank_numabind\.so" "$CONF_DIR/numabind.conf"
    local dups
    dups=$(grep '/spank_numabind\.so$' "$BUILD/install_manifest.txt" | grep -v "^$PLUGIN_DIR/" || true)
    [ -z "$dups" ] || echo "NOTE: the plugin is also installed at: $dups (an install() rule outside cmake/Install.cmake)"
  else
    echo "NOTE: no SPANK plugin in this build (slurm/spank.h missing?): CLI and library only"
  fi
  # A packager's install (DESTDIR, prefix /usr, RPM's plugin dir): everything below DESTDIR,
  # numabind.conf in DESTDIR/etc/slurm/plugstack.conf.d naming /usr/lib64/slurm.
  local dd=$STAGE/../destdir
  rm -rf "$dd"; mkdir -p "$dd"
  if NUMABIND_SLURM_PLUGIN_DIR=/usr/lib64/slurm DESTDIR=$dd cmake --install "$BUILD" --prefix /usr \
       >"$STAGE/../destdir.log" 2>&1; then
    pass "DESTDIR=... cmake --install --prefix /usr"
    check "DESTDIR install: CLI in DESTDIR/usr/bin" test -x "$dd/usr/bin/numabind"
    if has_plugin; then
      check "DESTDIR install: plugin in DESTDIR/usr/lib64/slurm" test -f "$dd/usr/lib64/slurm/spank_numabind.so"
      check "DESTDIR install: step engine beside it" test -f "$dd/usr/lib64/slurm/numabind_stepd.so"
      check "DESTDIR install: numabind.conf in DESTDIR/etc/slurm/plugstack.conf.d naming /usr/lib64/slurm" \
        grep -qE '^required /usr/lib64/slurm/spank_numabind\.so' "$dd/etc/slurm/plugstack.conf.d/numabind.conf"
    fi
  else
    cat "$STAGE/../destdir.log"; fail "DESTDIR=... cmake --install --prefix /usr"
  fi
  rm -rf "$dd"
  "$STAGE/bin/numabind" --version >"$STAGE/../version.out" 2>&1
  check "installed numabind --version" grep -q "numabind 0.1" "$STAGE/../version.out"
  preset_topology dgx-a100 "$STAGE/../dgx-a100.xml"
  "$STAGE/bin/numabind" plan --topology "$STAGE/../dgx-a100.xml" \
    --mode exclusive --ntasks 4 >"$STAGE/../plan.out" 2>&1 || true
  check "installed numabind plan works" grep -q "mode exclusive, 4 task" "$STAGE/../plan.out"
  finish
}

step_consumer() {
  need_stage
  # A sanitizer/fuzzer build's libnumabind.a needs the same instrumentation in every consumer.
  if grep -qE '^NUMABIND_(SANITIZE|FUZZ):BOOL=ON' "$BUILD/CMakeCache.txt"; then
    skip "instrumented build (NUMABIND_SANITIZE/NUMABIND_FUZZ): consumers would need its flags"
  fi
  local work=$STAGE/../consumer-work lib topo=$STAGE/../consumer-work/nps4.xml
  rm -rf "$work"; mkdir -p "$work"
  preset_topology nps4 "$topo"
  lib=$(libdir_of_stage)
  # CMake: only the staged prefix, not the source or build tree.
  if cmake -S "$SRC/tests/package/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$STAGE" \
       -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 &&
     cmake --build "$work/cmake" -j2 >>"$work/cmake.log" 2>&1; then
    pass "find_package(numabind) consumer builds"
    grep -q "numabind_DIR:PATH=$STAGE" "$work/cmake/CMakeCache.txt" &&
      pass "consumer found the staged package" || fail "consumer found numabind outside STAGE"
    "$work/cmake/consumer" "$topo" exclusive 4 >"$work/cmake.out" 2>&1 || true
    check "find_package consumer runs" grep -q "mode exclusive, 4 task" "$work/cmake.out"
  else
    cat "$work/cmake.log"; fail "find_package(numabind) consumer builds"
  fi
  # pkg-config
  export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  check "pkg-config --modversion numabind" test "$(pkg-config --modversion numabind)" = 0.1.0
  local cflags libs
  cflags=$(pkg-config --cflags numabind) libs=$(pkg-config --libs numabind)
  local incdir; incdir=$(pkg-config --variable=includedir numabind)
  check "pkg-config includedir resolves into STAGE ($incdir)" test "$(realpath "$incdir")" = "$STAGE/include"
  # shellcheck disable=SC2086
  if g++ -std=c++17 -O1 -o "$work/pc-consumer" "$SRC/tests/package/consumer/main.cpp" $cflags $libs \
       >"$work/pc.log" 2>&1; then
    pass "pkg-config consumer builds"
    "$work/pc-consumer" "$topo" core-complex 4 >"$work/pc.out" 2>&1 || true
    check "pkg-config consumer runs" grep -q "mode core-complex, 4 task" "$work/pc.out"
  else
    cat "$work/pc.log"; fail "pkg-config consumer builds (g++ \$(pkg-config --cflags --libs numabind))"
  fi
  finish
}

step_man() {
  need_stage
  need_tool groff groff-base && need_tool man man-db || finish
  local page out rc
  for page in "$STAGE/share/man/man1/numabind.1" "$STAGE/share/man/man8/spank_numabind.8"; do
    out=$(groff -man -ww -z "$page" 2>&1) && rc=0 || rc=$?
    check "groff -man -ww -z $(basename "$page") is silent (exit $rc)" test -z "$out" -a "$rc" = 0
    [ -z "$out" ] || echo "$out"
    out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) && rc=0 || rc=$?
    check "man --warnings -l $(basename "$page") is silent (exit $rc)" test -z "$out" -a "$rc" = 0
    [ -z "$out" ] || echo "$out"
    # Characters, not bytes: groff 1.23 (Debian 13) hyphenates with U+2010, 3 bytes in UTF-8.
    out=$(MANWIDTH=80 man -l "$page" 2>/dev/null |
          python3 -c 'import sys; [print(l) for l in sys.stdin.buffer.read().decode("utf-8", "replace").splitlines() if len(l) > 80]') && rc=0 || rc=$?
    check "$(basename "$page") fits 80 columns" test -z "$out" -a "$rc" = 0
    [ -z "$out" ] || echo "$out"
  done
  local o plain1 plain8
  plain1=$(sed 's/\\-/-/g; s/\\f[BIRP]//g' "$STAGE/share/man/man1/numabind.1")
  plain8=$(sed 's/\\-/-/g; s/\\f[BIRP]//g' "$STAGE/share/man/man8/spank_numabind.8")
  for o in mode mem local-rank ntasks devices fallback rank-source verbose topology device-match allowed-cpus json; do
    grep -q -- "--$o" <<<"$plain1" || fail "numabind(1) does not document --$o"
  done
  pass "numabind(1) option list checked"
  for o in default= mem= fallback= verbose devices= topology= respect_cpu_bind= batch_step= --numa-binding \
           NUMABIND_MODE NUMABIND_CPUS NUMABIND_MEMS NUMABIND_MEM_POLICY NUMABIND_DEVICE NUMABIND_DEVICE_PCI; do
    grep -q -- "$o" <<<"$plain8" || fail "spank_numabind(8) does not document $o"
  done
  pass "spank_numabind(8) argument list checked"
  finish
}

step_examples() {
  need_stage
  local ex=$SRC/examples f work=$STAGE/../examples-work
  rm -rf "$work"; mkdir -p "$work"
  for f in "$ex"/*.sh; do check "bash -n $(basename "$f")" bash -n "$f"; done
  for f in "$ex"/*.py; do
    check "py_compile $(basename "$f")" python3 -c 'import py_compile,sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' "$f" "$work/$(basename "$f")c"
  done
  NUMABIND_DRY_RUN=1 bash "$ex/sbatch-ddp.sh" --steps 5 >"$work/dry.out" 2>&1 || true
  check "sbatch-ddp.sh dry run prints the srun command" grep -q "^srun .*train_resnet18.py .*--steps 5" "$work/dry.out"
  check "sbatch-ddp.sh asks for --numa-binding" grep -q "^#SBATCH --numa-binding=" "$ex/sbatch-ddp.sh"

  # Placement part under the installed numabind, on a topology of this machine + one fake GPU.
  this_topology "$work/this.xml"
  local py=$STAGE/share/doc/numabind/examples/train_resnet18.py
  "$STAGE/bin/numabind" run --topology "$work/this.xml" --mode node --mem prefer --local-rank 0 --ntasks 1 -- \
    python3 "$py" --placement-only --workers 2 >"$work/placement.out" 2>"$work/placement.err" || true
  cat "$work/placement.out"
  check "placement: main + 2 workers reported" test "$(grep -c '^placement ' "$work/placement.out")" = 3
  check "placement: mode node everywhere" test "$(grep -c ' mode=node ' "$work/placement.out")" = 3
  check "placement: CPUs match NUMABIND_CPUS in main and workers" test "$(grep -c ' match=yes' "$work/placement.out")" = 3
  check "placement: memory policy prefer seen in numa_maps" test "$(grep -c ' numa_maps_policy=prefer' "$work/placement.out")" = 3
  check "placement: device 0 reported" grep -q ' role=main .* device=0 device_pci=0000:' "$work/placement.out"
  # A binding that differs from the default: 2 tasks share the GPU, exclusive, rank 1 -> 1 core.
  local ncpu; ncpu=$(nproc)
  if [ "$ncpu" -ge 2 ]; then
    "$STAGE/bin/numabind" run --topology "$work/this.xml" --mode exclusive --local-rank 1 --ntasks 2 -- \
      python3 "$py" --placement-only --workers 2 >"$work/excl.out" 2>"$work/excl.err" || true
    cat "$work/excl.out" "$work/excl.err"
    local want; want=$("$STAGE/bin/numabind" plan --topology "$work/this.xml" --mode exclusive --ntasks 2 |
                       awk '$1 == "rank" { for (i = 1; i <= NF; i++) if ($i == "cpus") c = i } $1 == 1 { print $c }')
    check "placement (exclusive, rank 1 of 2): main + workers on CPUs $want" \
      test "$(grep -c " mode=exclusive .* numabind_cpus=$want cpus_allowed=$want .* match=yes" "$work/excl.out")" = 3
  fi
  # Without numabind: still runs, reports no binding.
  python3 "$py" --placement-only --workers 1 >"$work/plain.out" 2>&1 || true
  check "placement without numabind" grep -q '^placement role=main .* mode=- ' "$work/plain.out"
  # Real training (CPU, gloo) when PyTorch is installed (.ci/install-deps.sh installs python3-torch):
  # the model trains, and the main process and its DataLoader workers stay on the plan's CPUs.
  if python3 -c 'import torch' 2>/dev/null; then
    local tv; tv=$(python3 -c 'import torch; print(torch.__version__)')
    local cpus; cpus=$("$STAGE/bin/numabind" plan --topology "$work/this.xml" --mode node --ntasks 1 | awk '$1 == "rank" { for (i = 1; i <= NF; i++) if ($i == "cpus") c = i } $1 == 0 { print $c }')
    timeout 300 "$STAGE/bin/numabind" run --topology "$work/this.xml" --mode node --local-rank 0 --ntasks 1 -- \
      python3 "$py" --steps 3 --batch-size 4 --image-size 64 --resize 32 --workers 2 --classes 10 \
      >"$work/train.out" 2>"$work/train.err" && rc=0 || rc=$?
    cat "$work/train.out"; [ "$rc" = 0 ] || tail -n 20 "$work/train.err"
    check "training with PyTorch $tv under numabind run exits 0" test "$rc" = 0
    check "training reported its rate and loss" grep -qE '^rank 0 epoch 0: [0-9.]+ images/s, loss [0-9.]+' "$work/train.out"
    check "training: main + 2 DataLoader workers on the plan's CPUs ($cpus)" \
      test "$(grep -c " mode=node .* cpus_allowed=$cpus .* match=yes" "$work/train.out")" = 3
  else
    echo "NOTE: PyTorch not importable by python3: the training run is not tested here"
  fi
  finish
}

step_slurm() {
  need_stage
  [ "$(id -u)" = 0 ] || skip "needs root (private Slurm cluster)"
  has_plugin || skip "no SPANK plugin in this build: slurm test not applicable"
  local t; for t in slurmd slurmctld munged srun; do command -v $t >/dev/null || skip "$t not installed"; done
  local dir; dir=$(mktemp -d /tmp/nb-pkg-slurm.XXXXXX); chmod 0755 "$dir"
  local work=$dir/work; mkdir -p "$work"; chmod 0755 "$work"
  this_topology "$work/this.xml"; chmod 0644 "$work/this.xml"
  # the installed entry (its plugin path must be the staged plugin) + a topology for this node
  local line; line=$(grep -E '^(required|optional)[[:space:]]' "$CONF_DIR/numabind.conf" | tail -n1)
  check "installed plugstack entry points at the staged plugin" test "$(awk '{print $2}' <<<"$line")" = "$PLUGIN_DIR/spank_numabind.so"
  echo "$line topology=$work/this.xml" >"$work/plugstack.conf"
  cp "$SRC/examples/train_resnet18.py" "$work/"; chmod 0755 "$work/train_resnet18.py"
  trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
  cluster_start "$work/start.log" "$dir" --plugstack "$work/plugstack.conf" || finish
  srun --help >"$work/help.out" 2>&1 || true
  check "srun --help lists --numa-binding (installed plugin loaded)" grep -q -- '--numa-binding' "$work/help.out"
  ( cd "$work" && timeout 60 srun -n1 --gpus=1 --numa-binding=node,verbose \
      sh -c 'echo "mode=$NUMABIND_MODE cpus=$NUMABIND_CPUS dev=$NUMABIND_DEVICE"; grep Cpus_allowed_list /proc/self/status' ) \
      >"$work/srun.out" 2>"$work/srun.err" || true
  cat "$work/srun.out" "$work/srun.err"
  check "srun -n1 --numa-binding=node binds the task" grep -q '^mode=node cpus=[0-9]' "$work/srun.out"
  check "verbose line on srun's stderr" grep -q 'numabind' "$work/srun.err"
  local prc
  ( cd "$work" && timeout 120 srun -n1 --gpus=1 --numa-binding=node python3 "$work/train_resnet18.py" --placement-only --workers 2 ) \
      >"$work/placement.out" 2>"$work/placement.err" && prc=0 || prc=$?
  cat "$work/placement.out"
  [ "$(grep -c ' mode=node .* match=yes' "$work/placement.out" || true)" = 3 ] ||
    { echo "srun exit $prc; its stderr:"; cat "$work/placement.err"; }
  check "training example placement under srun --numa-binding (main + workers match)" \
    test "$(grep -c ' mode=node .* match=yes' "$work/placement.out")" = 3
  ( cd "$work" && timeout 60 srun -n1 --numa-binding=bogus true ) >"$work/bad.out" 2>&1 && bad_rc=0 || bad_rc=$?
  check "srun refuses a bad --numa-binding value" test "$bad_rc" != 0
  finish
}

step_tables() {
  need_stage
  command -v lstopo-no-graphics >/dev/null || skip "lstopo-no-graphics (hwloc) not installed"
  local work=$STAGE/../tables-work; rm -rf "$work"; mkdir -p "$work"
  # DGX A100-like: 2 x EPYC 7742 NPS4 (8 NUMA nodes x 4 L3 x 4 cores x 2 PUs, siblings c and
  # c+128), 8 A100: GPUs 0,1 -> NUMA 3; 2,3 -> 1; 4,5 -> 7; 6,7 -> 5 (PCI order)
  preset_topology dgx-a100 "$work/dgx.xml"
  local m
  for m in node socket exclusive core-complex; do
    "$STAGE/bin/numabind" plan --topology "$work/dgx.xml" --mode "$m" --ntasks 8 >"$work/$m.plan" 2>&1 ||
      { cat "$work/$m.plan"; fail "plan $m"; }
  done
  if python3 - "$work" "$STAGE/share/man/man1/numabind.1" "$STAGE/share/man/man8/spank_numabind.8" \
       "$SRC/docs/OPTIONS.md" <<'PY'
import re, sys
work, docs = sys.argv[1], sys.argv[2:]
modes = ["node", "socket", "exclusive", "core-complex"]
plan = {}
for m in modes:
    for line in open(f"{work}/{m}.plan"):
        f = line.split()
        if len(f) in (6, 7) and f[0].isdigit():  # 7: with the nics column
            plan[(m, int(f[0]))] = (int(f[1]), f[3], f[5])  # gpu, mems, cpus
bad = 0
for doc in docs:
    text = open(doc).read().replace("\\-", "-")
    rows = {}
    if doc.endswith(".md"):
        for line in text.splitlines():
            f = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(f) == 7 and f[0].isdigit():
                for i, m in enumerate(modes):
                    rows[(m, int(f[0]))] = (int(f[1]), f[2], f[3 + i])
    else:
        pair = None
        for line in text.splitlines():
            f = line.split()
            if f[:3] == ["task", "GPU", "NUMA"]:
                pair = f[3:5]
            elif pair and len(f) == 5 and f[0].isdigit():
                for i, m in enumerate(pair):
                    rows[(m, int(f[0]))] = (int(f[1]), f[2], f[3 + i])
    if len(rows) != 32:
        print(f"{doc}: found {len(rows)} of 32 table cells"); bad += 1
    for key, (gpu, numa, cpus) in sorted(rows.items()):
        want = plan.get(key)
        if want != (gpu, numa, cpus):
            print(f"{doc}: {key}: documented GPU {gpu} NUMA {numa} CPUs {cpus}, plan says {want}"); bad += 1
sys.exit(1 if bad else 0)
PY
  then pass "DGX A100 tables in numabind(1), spank_numabind(8) and OPTIONS.md match numabind plan"
  else fail "DGX A100 tables match numabind plan"; fi
  finish
}

step_deb() {
  command -v cpack >/dev/null || skip "cpack not installed"
  command -v dpkg-deb >/dev/null || skip "dpkg-deb not installed"
  local out=$STAGE/../deb
  rm -rf "$out"; mkdir -p "$out"
  if ! (cd "$out" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$out") >"$out/cpack.log" 2>&1; then
    cat "$out/cpack.log"; fail "cpack -G DEB"; finish
  fi
  local deb; deb=$(ls "$out"/numabind_*.deb 2>/dev/null | head -n1)
  check "cpack -G DEB produced numabind_*.deb" test -n "$deb"
  [ -n "$deb" ] || finish
  dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$out/contents.txt"
  dpkg-deb -f "$deb" >"$out/control.txt"
  echo "--- $deb"; cat "$out/control.txt"; echo "--- contents"; cat "$out/contents.txt"
  c() { grep -qxF "$1" "$out/contents.txt"; }
  check ".deb has /usr/bin/numabind" c /usr/bin/numabind
  check ".deb has numabind.1" c /usr/share/man/man1/numabind.1
  check ".deb has spank_numabind.8" c /usr/share/man/man8/spank_numabind.8
  check ".deb has the headers" c /usr/include/numabind/plan.hpp
  check ".deb has libnumabind.a and the package configs" bash -c \
    'grep -q "/libnumabind\.a$" "$0" && grep -q "/cmake/numabind/numabindConfig\.cmake$" "$0" && grep -q "/pkgconfig/numabind\.pc$" "$0"' "$out/contents.txt"
  check ".deb has the examples" c /usr/share/doc/numabind/examples/train_resnet18.py
  # The Python module where Debian's python3 imports packaged modules from, and the path of
  # the library it records is the .deb's own.
  check ".deb has the Python module in /usr/lib/python3/dist-packages" bash -c \
    'grep -qxF /usr/lib/python3/dist-packages/numabind/__init__.py "$0" && grep -qxF /usr/lib/python3/dist-packages/numabind/py.typed "$0"' "$out/contents.txt"
  if [ -x /usr/bin/python3 ]; then
    check "/usr/bin/python3 searches /usr/lib/python3/dist-packages" \
      /usr/bin/python3 -c 'import sys; sys.exit("/usr/lib/python3/dist-packages" not in sys.path)'
  fi
  local recorded; recorded=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/python3/dist-packages/numabind/_install_paths.py 2>/dev/null |
    sed -n 's/^LIBRARIES = \["\(.*\)"\]$/\1/p')
  check ".deb's module records the .deb's library ($recorded)" bash -c \
    'test -n "$1" && dpkg-deb -c "$0" | grep -qE "\.$1( |\$)"' "$deb" "$recorded"
  check ".deb Depends on libhwloc15 and libnuma1" bash -c 'grep "^Depends:" "$0" | grep -q libhwloc15 && grep "^Depends:" "$0" | grep -q libnuma1' "$out/control.txt"
  if has_plugin; then
    local pdir; pdir=$(sed -n 's/^NUMABIND_SLURM_PLUGIN_DIR:PATH=//p' "$BUILD/CMakeCache.txt")
    case $pdir in /*) ;; *) pdir=/usr/$pdir ;; esac
    check ".deb has the plugin in the Slurm plugin dir ($pdir)" c "$pdir/spank_numabind.so"
    check ".deb has the step engine beside it" c "$pdir/numabind_stepd.so"
    check ".deb has the plugin exactly once" test "$(grep -c '/spank_numabind\.so$' "$out/contents.txt")" = 1
    check ".deb has /etc/slurm/plugstack.conf.d/numabind.conf" c /etc/slurm/plugstack.conf.d/numabind.conf
    dpkg-deb -e "$deb" "$out/DEBIAN"
    check "numabind.conf is a conffile" grep -qxF /etc/slurm/plugstack.conf.d/numabind.conf "$out/DEBIAN/conffiles"
    dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./etc/slurm/plugstack.conf.d/numabind.conf >"$out/numabind.conf"
    check "packaged numabind.conf names the packaged plugin" grep -qE "^required $pdir/spank_numabind\.so" "$out/numabind.conf"
    local mm next; mm=$(slurm_release) next=$(slurm_next_release)
    check ".deb Depends on Slurm's plugins of release $mm (>= $mm~, << $next~)" \
      grep -qE "^Depends:.*slurm-wlm-basic-plugins \(>= $mm~\), slurm-wlm-basic-plugins \(<< $next~\)" "$out/control.txt"
    check ".deb Provides numabind-slurm-$mm" grep -qE "^Provides: .*numabind-slurm-$mm\b" "$out/control.txt"
  fi
  check ".deb has /usr/share/doc/numabind/copyright" c /usr/share/doc/numabind/copyright
  dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/doc/numabind/copyright >"$out/copyright"
  check "copyright: License: Apache-2.0, matching LICENSE" bash -c \
    'grep -qx "License: Apache-2.0" "$0" && grep -q "Apache License" "$1" && grep -q "Version 2.0, January 2004" "$1"' \
    "$out/copyright" "$SRC/LICENSE"
  finish
}

# The Slurm release the plugin was compiled against, from the slurm_version.h in use (not from
# numabind): "22.05"; slurm_next_release: "22.06".
slurm_version_number() {
  local h; h=$(sed -n 's/^SLURM_SPANK_INCLUDE_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  for h in "$h/slurm/slurm_version.h" /usr/include/slurm/slurm_version.h; do
    [ -r "$h" ] && { sed -n 's/^#define[[:space:]]*SLURM_VERSION_NUMBER[[:space:]]*0x\([0-9a-fA-F]*\).*/\1/p' "$h"; return; }
  done
}
slurm_release() { local v; v=$(slurm_version_number); printf '%d.%02d' $((0x$v >> 16)) $(((0x$v >> 8) & 255)); }
slurm_next_release() { local v; v=$(slurm_version_number); printf '%d.%02d' $((0x$v >> 16)) $((((0x$v >> 8) & 255) + 1)); }

step_rpm() {
  command -v rpmbuild >/dev/null || { fail "rpmbuild not found (Debian package rpm; .ci/install-deps.sh installs it)"; finish; }
  local top=$STAGE/../rpm; rm -rf "$top"; mkdir -p "$top"/{SOURCES,SPECS,BUILD,RPMS,SRPMS,BUILDROOT}
  top=$(cd "$top" && pwd)
  local ver; ver=$(sed -n 's/^Version:[[:space:]]*//p' "$SRC/packaging/rpm/numabind.spec")
  # The source tarball: the tree without build output (a fresh clone has none; a developer's does).
  tar -C "$(dirname "$SRC")" --transform "s|^$(basename "$SRC")|numabind-$ver|" \
    --exclude-vcs --exclude="$(basename "$SRC")/build*" --exclude="$(basename "$SRC")/.ci-*" \
    -czf "$top/SOURCES/numabind-$ver.tar.gz" "$(basename "$SRC")"
  local rc
  rpmbuild -bb --nodeps --define "_topdir $top" --define "debug_package %{nil}" \
    --define "_smp_mflags -j$(nproc)" "$SRC/packaging/rpm/numabind.spec" >"$top/rpmbuild.log" 2>&1 && rc=0 || rc=$?
  [ "$rc" = 0 ] || tail -n 40 "$top/rpmbuild.log"
  check "rpmbuild -bb packaging/rpm/numabind.spec (exit $rc)" test "$rc" = 0
  [ "$rc" = 0 ] || finish
  local main devel
  main=$(ls "$top"/RPMS/*/numabind-"$ver"-*.rpm 2>/dev/null | grep -v devel | head -n1)
  devel=$(ls "$top"/RPMS/*/numabind-devel-"$ver"-*.rpm 2>/dev/null | head -n1)
  check "numabind and numabind-devel RPMs built" test -n "$main" -a -n "$devel"
  [ -n "$main" ] && [ -n "$devel" ] || finish
  rpm -qlp "$main" >"$top/main.files" 2>/dev/null; rpm -qlp "$devel" >"$top/devel.files" 2>/dev/null
  rpm -qp --requires "$main" >"$top/main.requires" 2>/dev/null; rpm -qp --provides "$main" >"$top/main.provides" 2>/dev/null
  echo "--- $main"; cat "$top/main.files"; echo "--- requires"; cat "$top/main.requires"; echo "--- $devel"; cat "$top/devel.files"
  r() { grep -qxF "$1" "$top/main.files"; }
  d() { grep -qxF "$1" "$top/devel.files"; }
  check "RPM License: Apache-2.0" test "$(rpm -qp --qf '%{LICENSE}' "$main" 2>/dev/null)" = Apache-2.0
  check "RPM ships LICENSE as %license" grep -qE "^/usr/share/licenses/numabind(-$ver)?/LICENSE$" "$top/main.files"
  check "RPM has /usr/bin/numabind" r /usr/bin/numabind
  # RHEL's python3 imports packaged modules from %{python3_sitelib} (.../python3.X/site-packages).
  check "RPM has the Python module in python3's site-packages" \
    grep -qE '^/usr/lib(64)?/python3\.[0-9]+/site-packages/numabind/__init__\.py$' "$top/main.files"
  check "RPM has the man pages" bash -c 'grep -q "^/usr/share/man/man1/numabind\.1" "$0" && grep -q "^/usr/share/man/man8/spank_numabind\.8" "$0"' "$top/main.files"
  check "RPM has the docs" r /usr/share/doc/numabind/OPTIONS.md
  if has_plugin; then
    local mm next; mm=$(slurm_release) next=$(slurm_next_release)
    check "RPM has the plugin in /usr/lib64/slurm" r /usr/lib64/slurm/spank_numabind.so
    check "RPM has the step engine beside it" r /usr/lib64/slurm/numabind_stepd.so
    check "RPM has /etc/slurm/plugstack.conf.d/numabind.conf as %config(noreplace)" \
      test "$(rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$main" 2>/dev/null | awk '$1 == "/etc/slurm/plugstack.conf.d/numabind.conf" { print $2 }')" = cn
    check "RPM Requires slurm >= $mm and slurm < $next" bash -c \
      'grep -qx "slurm >= $1" "$0" && grep -qx "slurm < $2" "$0"' "$top/main.requires" "$mm" "$next"
    check "RPM Provides numabind-slurm-$mm" grep -q "^numabind-slurm-$mm" "$top/main.provides"
    rpm2cpio "$main" | (mkdir -p "$top/x" && cd "$top/x" && cpio -idm --quiet ./etc/slurm/plugstack.conf.d/numabind.conf) 2>/dev/null || true
    check "packaged numabind.conf names /usr/lib64/slurm/spank_numabind.so" \
      grep -qE '^required /usr/lib64/slurm/spank_numabind\.so' "$top/x/etc/slurm/plugstack.conf.d/numabind.conf"
  fi
  check "RPM-devel has the headers, libnumabind.a, CMake and pkg-config files" bash -c \
    'grep -qx /usr/include/numabind/plan.hpp "$0" && grep -qx /usr/lib64/libnumabind.a "$0" && grep -qx /usr/lib64/cmake/numabind/numabindConfig.cmake "$0" && grep -qx /usr/lib64/pkgconfig/numabind.pc "$0"' "$top/devel.files"
  finish
}

case $STEP in
  install|consumer|man|examples|slurm|tables|deb|rpm) "step_$STEP" ;;
  *) echo "unknown step $STEP" >&2; exit 2 ;;
esac
