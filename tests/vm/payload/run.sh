# Guest side of tests/vm/numabind_vm_test.sh: runs in the test guest under busybox sh
# (see tests/vm/README.md, "The payload contract"). Everything it prints is tagged so
# that tests/vm/check_bindings.py can parse it on the host:
#
#   @@FACTS ... @@END             guest-facts.sh (kernel view, no numabind/hwloc)
#   @@TOPO MATCH ... @@END        numabind topo --json --device-match MATCH
#   @@PLAN ID ... @@END           numabind plan --json --ntasks N ARGS
#   @@RUN ID RANK ... @@END       numabind run --local-rank RANK --ntasks N ARGS -- probe MIB
#                                 (probe output and numabind's stderr, 2>&1)
#   @@RC N                        exit status of the command above (inside its block)
#   @@ERR line                    stderr of plan/topo
#   @@API ID ... @@END            nb_api_probe --threads T [--touch-mib M --touch-node K] OPTIONS
#                                 (a C program calling numabind_bind; its output, 2>&1)
#   @@TIME NAME SECONDS           guest time of a step
#
#   @@CPUSET CPUS MEMS EFF_CPUS EFF_MEMS   the cases below run in a cpuset cgroup
#                                 (EFF_*: cpuset.{cpus,mems}.effective read back)
#
# $PAYLOAD/cases.txt, one case per line:  ID|NTASKS|PROBE_MIB|ARGS...  (# comments);
# a line "@cpuset CPUS MEMS" runs the cases after it in a cgroup v2 cpuset ("- -": root).
# $PAYLOAD/topo.txt, one device-match spec per line for `numabind topo --json`.
# $PAYLOAD/api.txt (optional, with bin/nb_api_probe): ID|THREADS|TOUCH_MIB|TOUCH_NODE|OPTIONS
# (numabind_options KEY=VALUE; TOUCH_NODE "-": no touch); these run first, in the root cgroup.
P=$PAYLOAD
# Programs run from the RAM file system: exec from the 9p share (cache=none) rereads
# the binary each time and costs ~3x more under TCG.
B=/tmp/bin
mkdir -p "$B"
cp "$P/bin/numabind" "$P/bin/probe" "$B/"
[ -f "$P/api.txt" ] && cp "$P/bin/nb_api_probe" "$P/api.txt" /tmp/
up() { cut -d' ' -f1 /proc/uptime; }
t_all=$(up)
echo "@@GUEST_UPTIME $t_all"

echo "@@FACTS"
sh "$P/guest-facts.sh"
echo "@@END"

cp "$P/cases.txt" /tmp/cases.txt
cp "$P/topo.txt" /tmp/topo.txt

while IFS= read -r match; do
    [ -n "$match" ] || continue
    echo "@@TOPO $match"
    a=$(up)
    "$B/numabind" topo --json --device-match "$match" 2> /tmp/err
    echo "@@RC $?"
    sed 's/^/@@ERR /' /tmp/err
    echo "@@END"
    echo "@@TIME topo $(awk -v a="$a" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }')"
done < /tmp/topo.txt

# C API: numabind_bind from inside a process that already runs threads and touched memory
if [ -f /tmp/api.txt ]; then
    a_api=$(up)
    while IFS='|' read -r id threads mib node opts; do
        case "$id" in ''|'#'*) continue ;; esac
        echo "@@API $id"
        if [ "$node" = - ]; then touch=; else touch="--touch-mib $mib --touch-node $node"; fi
        # shellcheck disable=SC2086 # TOUCH and OPTIONS are split on purpose
        /tmp/nb_api_probe --threads "$threads" $touch $opts < /dev/null 2>&1
        echo "@@RC $?"
        echo "@@END"
    done < /tmp/api.txt
    echo "@@TIME api $(awk -v a="$a_api" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }')"
fi

nruns=0
t_runs=0
# cpuset CPUS MEMS: move this shell (and so every later command) into a cgroup v2
# cpuset with those CPUs and memory nodes; "cpuset - -" moves it back to the root.
cpuset() {
    G=/sys/fs/cgroup
    if [ ! -f $G/cgroup.procs ]; then
        mount -t cgroup2 none $G || return 1
    fi
    if [ "$1" = - ]; then
        echo $$ > $G/cgroup.procs || return 1
        echo "@@CPUSET - - $(awk '/^Cpus_allowed_list/ { c = $2 } /^Mems_allowed_list/ { m = $2 } END { print c, m }' /proc/self/status)"
        return 0
    fi
    [ -d $G/nbvm ] || { echo +cpuset > $G/cgroup.subtree_control && mkdir $G/nbvm; } || return 1
    echo "$1" > $G/nbvm/cpuset.cpus && echo "$2" > $G/nbvm/cpuset.mems && echo $$ > $G/nbvm/cgroup.procs || return 1
    # what the kernel made of it: the effective sets (read back, not assumed)
    echo "@@CPUSET $1 $2 $(cat $G/nbvm/cpuset.cpus.effective) $(cat $G/nbvm/cpuset.mems.effective)"
}

while IFS='|' read -r id ntasks mib args; do
    case "$id" in
        '@cpuset '*)
            # shellcheck disable=SC2086
            cpuset ${id#@cpuset } || echo "@@CPUSET_FAILED $id"
            continue ;;
        ''|'#'*) continue ;;
    esac
    echo "@@PLAN $id"
    # shellcheck disable=SC2086 # ARGS are split on purpose
    "$B/numabind" plan --json --ntasks "$ntasks" $args 2> /tmp/err
    echo "@@RC $?"
    sed 's/^/@@ERR /' /tmp/err
    echo "@@END"
    r=0
    while [ "$r" -lt "$ntasks" ]; do
        echo "@@RUN $id $r"
        a=$(up)
        # shellcheck disable=SC2086
        "$B/numabind" run --local-rank "$r" --ntasks "$ntasks" $args -- "$B/probe" "$mib" 2>&1
        echo "@@RC $?"
        echo "@@END"
        b=$(up)
        t_runs=$(awk -v t="$t_runs" -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", t + b - a }')
        nruns=$((nruns + 1))
        r=$((r + 1))
    done
done < /tmp/cases.txt
echo "@@TIME runs $t_runs ($nruns numabind run + probe)"
echo "@@TIME payload $(awk -v a="$t_all" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }')"
echo "@@DONE"
exit 0
