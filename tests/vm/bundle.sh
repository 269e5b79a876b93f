#!/bin/bash
# Copy host-built dynamically linked programs, with every shared library they
# need and the dynamic loader, into a payload directory for the test guest.
#
#   tests/vm/bundle.sh [--hwloc-plugins] [--lib FILE]... PAYLOAD_DIR PROGRAM...
#
# Layout written:
#   PAYLOAD_DIR/bin/NAME                 the programs, unchanged
#   PAYLOAD_DIR/sysroot/<abs path>       each library at the path the host's ldd
#                                        reports (e.g. sysroot/lib/x86_64-linux-gnu/
#                                        libhwloc.so.15, sysroot/lib64/ld-linux-x86-64.so.2)
#   PAYLOAD_DIR/ldso-run PROG ARGS...    runs PROG through the bundled loader
#                                        (--library-path), for use without the install
#                                        step below
#
# The guest's /init (see build-image.sh) copies PAYLOAD_DIR/sysroot into its RAM
# root file system before run.sh starts, so the programs then run natively:
# /payload/bin/numabind ... (same loader path and library directories as on the host;
# /proc/self/exe is the program; exec of other bundled programs works).
#
# Options:
#   --hwloc-plugins  also bundle hwloc's pci plugin (/usr/lib/x86_64-linux-gnu/hwloc/
#                    hwloc_pci.so, dlopen'ed by libhwloc, uses libpciaccess) and its
#                    libraries. Not needed for PCI discovery on Linux: without it hwloc's
#                    linux backend reads PCI devices from sysfs. Without the plugin dir
#                    hwloc prints nothing and works (checked in the guest).
#   --lib FILE       also bundle FILE (e.g. a library loaded with dlopen) and its deps
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --hwloc-plugins)
            f=/usr/lib/x86_64-linux-gnu/hwloc/hwloc_pci.so
            [ -e "$f" ] && EXTRA+=("$f")
            shift ;;
        --lib) EXTRA+=("$2"); shift 2 ;;
        -h|--help) usage ;;
        -*) echo "bundle.sh: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || usage
DEST=$1; shift
mkdir -p "$DEST/bin" "$DEST/sysroot"

# put SRC at DEST/sysroot/PATH (dereferenced), once
add_file() {
    local path=$1 src=${2:-$1}
    local dst=$DEST/sysroot$path
    [ -e "$dst" ] && return 0
    mkdir -p "${dst%/*}"
    cp -L "$src" "$dst"
}

# every library ldd lists for FILE, plus the loader
add_deps() {
    local file=$1 out line lib
    out=$(ldd "$file" 2>&1) || {
        case "$out" in
            *"not a dynamic executable"*|*"statically linked"*) return 0 ;;
        esac
        echo "bundle.sh: ldd $file failed: $out" >&2; return 1; }
    while IFS= read -r line; do
        case "$line" in
            *"not found"*)
                echo "bundle.sh: $file: unresolved: $line" >&2; return 1 ;;
            *"=> /"*)
                lib=${line#*=> }; lib=${lib%% (*}
                add_file "$lib" ;;
            *"linux-vdso"*|*"statically linked"*) ;;
            /*)
                lib=${line%% (*}; lib=${lib%%[[:space:]]*}
                add_file "$lib" ;;
            [[:space:]]/*)
                lib=${line#"${line%%[![:space:]]*}"}; lib=${lib%% (*}
                add_file "$lib" ;;
        esac
    done <<< "$out"
}

for prog in "$@"; do
    p=$prog
    [ -f "$p" ] || p=$(command -v "$prog") || { echo "bundle.sh: $prog not found" >&2; exit 1; }
    cp -L "$p" "$DEST/bin/${p##*/}"
    add_deps "$p"
done
for f in "${EXTRA[@]}"; do
    add_file "$(realpath -s "$f")" "$f"
    add_deps "$f"
done

# loader-based launcher (no install step needed)
LDSO=$(cd "$DEST/sysroot" && find . -name 'ld-linux*.so*' | head -n1)
LDSO=${LDSO#.}
LIBDIRS=$(cd "$DEST/sysroot" && find . -name '*.so*' ! -name 'ld-linux*' -printf '%h\n' | sort -u |
          sed 's|^\.||' | tr '\n' ':')
cat > "$DEST/ldso-run" <<EOF
#!/bin/sh
# Run a bundled program through the bundled dynamic loader.
D=\$(cd "\$(dirname "\$0")" && pwd)
LP=
for d in $(echo "${LIBDIRS%:}" | tr ':' ' '); do LP=\$LP\${LP:+:}\$D/sysroot\$d; done
exec "\$D/sysroot$LDSO" --library-path "\$LP" "\$@"
EOF
chmod 755 "$DEST/ldso-run"
