#!/usr/bin/env bash
# make_nolibxml_reproducer.sh [OUT] — rebuild fuzz/known-hwloc-crashes/nolibxml-importer-segv.xml
# from a generated topology (gen_topology.py: 1 package, 2 cores x 4 PUs, one V100) with the
# one-byte fault the fuzzer found: the opening quote of the last PU's complete_cpuset
# replaced by 'b'. Then checks that hwloc 2.9 behaves as documented in SECURITY.md:
# `lstopo --input` (libxml2 importer) refuses the file (exit 1), and with the built-in
# importer (HWLOC_LIBXML_IMPORT=0) it dies of SIGSEGV inside hwloc_topology_load().
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$(cd "$here/../.." && pwd)/fuzz/known-hwloc-crashes/nolibxml-importer-segv.xml}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$here/gen_topology.py" --synthetic "pack:1 core:2 pu:4" --gpu package:0,kind=v100 -o "$tmp/gen.xml"
python3 - "$tmp/gen.xml" "$out" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
last = [i for i, l in enumerate(lines) if 'type="PU"' in l][-1]
lines[last] = lines[last].replace('complete_cpuset="', 'complete_cpuset=b', 1)
open(sys.argv[2], "w").write("\n".join(lines))
PY
set +e
lstopo-no-graphics --input "$out" --of console >/dev/null 2>&1; libxml=$?
HWLOC_LIBXML_IMPORT=0 lstopo-no-graphics --input "$out" --of console >/dev/null 2>&1; builtin=$?
set -e
echo "$out: lstopo --input exit $libxml (libxml2 importer), $builtin with HWLOC_LIBXML_IMPORT=0 (139 = SIGSEGV)"
[ "$libxml" = 1 ] && [ "$builtin" = 139 ]
