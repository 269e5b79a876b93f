#!/usr/bin/env bash
# tests/fault/engine_loader_test.sh STANDIN PLUGIN GEN_TOPOLOGY [NUMABIND]
# The front (spank_numabind.so) loads its step engine (numabind_stepd.so) only from beside
# its own real file, through every directory up to / being root's and closed to others'
# writes (sticky allowed), and only a root-owned regular file closed to group/other writes,
# loaded through the descriptor it checked (SECURITY.md rule 7). Each case copies the built
# pair into a private directory and runs one step in the slurmstepd stand-in
# (stepd_standin.c): the tasks must be bound (engine loaded) or the step must say, in one
# line naming the file or directory, why the engine was not loaded. Root only (exit 77).
# With NUMABIND: in every case `numabind check --plugstack` on the same front must give the
# verdict the loader gave (step engine OK exactly when the tasks were bound), and its plugin
# row must FAIL a front another user could change. Files of another user belong to the
# unprivileged user nbtest (created when missing).
set -uo pipefail
standin=$1 plugin=$2 gen=$3 nb=${4:-}
# shellcheck source=tests/lib/checks.sh
. "$(dirname "$0")/../lib/checks.sh"
[ "$(id -u)" = 0 ] || skip "needs root"
engine=$(dirname "$plugin")/numabind_stepd.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
python3 "$gen" -o "$work/topo.xml" --gpu machine --gpu machine >/dev/null || exit 1
site=(default=exclusive fallback=warn mem=bind devices=10de "topology=$work/topo.xml")
id nbtest >/dev/null 2>&1 || useradd -r -M nbtest || skip "cannot create user nbtest"
user=$(id -u nbtest)

install_pair() {  # DIR: a fresh root-owned copy of front and engine
  rm -rf "$1" && mkdir -p "$1" && cp "$plugin" "$1/spank_numabind.so" && cp "$engine" "$1/numabind_stepd.so" &&
    chmod 0755 "$1" "$1/spank_numabind.so" "$1/numabind_stepd.so"
}
step() {  # FRONT: one step; sets OUT (the stand-in's summary) and ERR (its log lines)
  timeout 120 "$standin" "$1" slurm --only 0 -v -- "${site[@]}" >"$work/out" 2>"$work/err"
  OUT=$(head -1 "$work/out")
  ERR=$(grep -h 'slurm_error' "$work/err" | head -3)
}
# check_row FRONT: STATUS of check's "step engine" row for a plugstack line naming FRONT
check_row() {
  timeout 60 env PATH=/usr/bin:/bin NUMABIND_CHECK_NVML=none "$nb" check --json --topology "$work/topo.xml" \
    --plugstack "required $1 ${site[*]}" >"$work/check.json" 2>"$work/check.err"
  python3 -c 'import json,sys
rows=[r for r in json.load(open(sys.argv[1]))["rows"] if r["item"]==sys.argv[2]]
print(rows[0]["status"] if rows else "none")' "$work/check.json" "${2:-step engine}"
}
# agrees LABEL FRONT LOADED(yes|no): check's step-engine verdict is the loader's
agrees() {
  [ -n "$nb" ] || return 0
  local want=FAIL got
  [ "$3" = yes ] && want=OK
  got=$(check_row "$2")
  check_eq "$1: numabind check's step engine row agrees with the loader" "$want" "$got"
}
bound() {  # LABEL FRONT
  step "$2"
  if [[ $OUT == *"bound 2,"* ]] && [ -z "$ERR" ]; then pass "$1: engine loaded, tasks bound"
  else fail "$1: engine not loaded: $OUT ${ERR:-}"; fi
  agrees "$1" "$2" "$([[ $OUT == *"bound 2,"* ]] && echo yes || echo no)"
}
refused() {  # LABEL FRONT REGEX
  step "$2"
  if [[ $OUT == *"bound 0,"* ]] && grep -qE "$3" <<<"$ERR"; then pass "$1: refused ($(sed 's/.*numabind: node [^:]*: //' <<<"$ERR" | head -1))"
  else fail "$1: expected a refusal matching '$3': $OUT ${ERR:-no error}"; fi
  agrees "$1" "$2" "$([[ $OUT == *"bound 2,"* ]] && echo yes || echo no)"
}

real=$work/real
install_pair "$real"
bound "the pair in a root-owned directory" "$real/spank_numabind.so"

# A symlink to the front elsewhere: the engine is the one beside the real front, and a
# library planted beside the link is never loaded (its constructor would leave a marker).
mkdir -p "$work/link" && chmod 0755 "$work/link"
ln -s "$real/spank_numabind.so" "$work/link/spank_numabind.so"
bound "front reached through a symlink in another directory (no engine there)" "$work/link/spank_numabind.so"
if command -v "${CC:-cc}" >/dev/null; then
  printf '#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void planted(void) { close(open("%s", O_CREAT | O_WRONLY, 0644)); }\n' \
    "$work/planted-ran" >"$work/planted.c"
  "${CC:-cc}" -shared -fPIC -o "$work/link/numabind_stepd.so" "$work/planted.c" && chmod 0755 "$work/link/numabind_stepd.so"
  bound "front through a symlink, another library planted beside the link" "$work/link/spank_numabind.so"
  if [ -e "$work/planted-ran" ]; then fail "the library beside the symlink was loaded (its constructor ran)"
  else pass "the library beside the symlink was not loaded"; fi
else
  skip_case "no C compiler: the planted-library case"
fi

chmod 0777 "$real"
refused "engine directory writable by others" "$real/spank_numabind.so" "directory $real is writable by group or others"
chmod 0775 "$real"
refused "engine directory writable by group" "$real/spank_numabind.so" "directory $real is writable by group or others"
chmod 1777 "$real"
bound "engine directory world-writable but sticky (like /tmp)" "$real/spank_numabind.so"
chmod 0755 "$real"

chown nbtest "$real"
refused "engine directory owned by another user" "$real/spank_numabind.so" "directory $real is owned by uid $user"
chown 0 "$real"
# a directory higher up the chain counts too
mkdir -p "$work/up/down" && install_pair "$work/up/down" && chmod 0757 "$work/up"
refused "a parent directory writable by others" "$work/up/down/spank_numabind.so" "directory $work/up is writable by group or others"

chown nbtest "$real/numabind_stepd.so"
refused "engine owned by another user" "$real/spank_numabind.so" "numabind_stepd.so is owned by uid $user, not root"
chown 0 "$real/numabind_stepd.so"
chmod 0775 "$real/numabind_stepd.so"
refused "engine writable by group" "$real/spank_numabind.so" "numabind_stepd.so is writable by group or others"
chmod 0755 "$real/numabind_stepd.so"

mv "$real/numabind_stepd.so" "$work/engine-elsewhere.so"
ln -s "$work/engine-elsewhere.so" "$real/numabind_stepd.so"
refused "engine is a symlink (to a good file)" "$real/spank_numabind.so" "numabind_stepd.so is a symlink"
rm "$real/numabind_stepd.so" && mkfifo "$real/numabind_stepd.so"
refused "engine is a FIFO (never waited on)" "$real/spank_numabind.so" "numabind_stepd.so is not a regular file"
rm "$real/numabind_stepd.so"
refused "no engine" "$real/spank_numabind.so" "cannot find the step engine $real/numabind_stepd.so"

# A front and engine another user owns, in a directory that user owns: the loader refuses the
# engine, and check fails the front too (Slurm dlopen()s it as root).
own=$work/users && install_pair "$own" && chown -R nbtest "$own"
refused "front and engine owned by another user, in that user's directory" "$own/spank_numabind.so" "directory $own is owned by uid $user"
if [ -n "$nb" ]; then
  check_eq "another user's front: check's plugin row FAILs" FAIL "$(check_row "$own/spank_numabind.so" plugin)"
  check_eq "root's front: check's plugin row is OK" OK "$(check_row "$real/spank_numabind.so" plugin)"
fi

# device_files= naming a missing file: the engine notes it and binds; check must not FAIL it.
install_pair "$real"
site+=("device_files=$work/missing-0,$work/missing-1")
bound "device_files= naming missing files" "$real/spank_numabind.so"
if [ -n "$nb" ]; then
  check_row "$real/spank_numabind.so" >/dev/null
  got=$(python3 -c 'import json,sys
print(",".join(sorted({r["status"] for r in json.load(open(sys.argv[1]))["rows"] if r["item"].startswith("device_files[")})))' "$work/check.json")
  [[ $OUT == *"bound 2,"* ]] && want=WARN || want=FAIL
  check_eq "device_files= missing: check's rows are WARN, as the engine binds" "$want" "$got"
fi

finish
