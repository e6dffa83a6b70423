#!/usr/bin/env bash
# peakmem.sh - run a command and report its wall time and peak memory (for
# benchmarks; the tests never time anything).
#
# usage: scripts/peakmem.sh CMD [ARGS...]
#   PEAKMEM_JSON=1       print a JSON object instead of the one-line summary
#   PEAKMEM_OUT=FILE     write the summary to FILE instead of stderr
#   PEAKMEM_INTERVAL=S   seconds between samples (default 0.025; 0.005..1)
#
# e.g.  scripts/peakmem.sh build-dev/sparsecal compute -m /tmp/tl --tokens /tmp/tl/tokens.txt \
#           --method cats -o /tmp/tl.scal --threads 2
#
# The command runs as this script's direct child with the script's stdin,
# stdout and stderr: bash forks and the child execs the command, so the PID
# watched is the command's own (no wrapper shell in between), and the script
# exits with the command's status (128+N when signal N ended it). TERM and
# HUP sent to the script are passed on, and INT as TERM: bash starts
# background commands with SIGINT ignored. Every interval it reads
# /proc/PID/status of the command and of all its descendants (found through
# /proc/PID/task/*/children, else `ps`), so forked workers and mpirun's ranks
# count too; threads share their process's memory and are not added again.
# It sums RssAnon and VmRSS over the tree and keeps the largest sums.
#
# Why RssAnon. sparsecal maps model weights straight from the file (mmap).
# Those pages sit in the page cache: file-backed, shared with every other
# reader of the file, dropped by the kernel under memory pressure and read
# again on the next touch. VmRSS counts them as soon as they are touched, so
# a 4.4 GB f32 model shows up to 4.4 GB of VmRSS however little the tool
# itself allocates. RssAnon counts only the anonymous memory the process
# allocated (heap, workspaces, activations, weights converted to f32 from
# bf16, key/value caches): what the tool needs on top of the file, and what
# can push a machine into swap or the OOM killer. Both are reported; VmHWM is
# the kernel's own peak of VmRSS for the command's main process, as last read
# before it exited.
#
# Limits: the peaks are the largest samples, so a spike shorter than the
# interval can be missed, and a command that ends within the first interval
# reports zeros. Linux only (/proc).
set -u

if [ $# -lt 1 ]; then
    echo "usage: scripts/peakmem.sh CMD [ARGS...] (see --help)" >&2
    exit 2
fi
if [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
fi
if [ ! -r /proc/self/status ]; then
    echo "peakmem.sh: /proc/self/status is not readable (Linux only)" >&2
    exit 2
fi
interval=${PEAKMEM_INTERVAL:-0.025}
if ! [[ $interval =~ ^[0-9]*\.?[0-9]+$ ]] || ! awk -v s="$interval" 'BEGIN { exit !(s >= 0.005 && s <= 1) }'; then
    echo "peakmem.sh: PEAKMEM_INTERVAL=$interval is not a number of seconds in 0.005..1" >&2
    exit 2
fi

read -r la1 la5 la15 _ </proc/loadavg
load_start=("$la1" "$la5" "$la15")
t_start=$EPOCHREALTIME

# a timer that needs no fork per sample: read with a timeout on a pipe that never gets data
if { exec {tick}<> <(:); } 2>/dev/null; then
    pause() { read -r -t "$interval" -u "$tick" _ || true; }
else
    pause() { sleep "$interval"; }
fi

"$@" <&0 &
pid=$!
trap "kill -s TERM $pid 2>/dev/null" INT TERM
trap "kill -s HUP $pid 2>/dev/null" HUP

# the descendants of $1 (not $1 itself), appended to the array `tree`
if [ -e "/proc/$$/task/$$/children" ]; then
    add_children() {
        local p=$1 c kids f
        for f in /proc/"$p"/task/*/children; do
            kids=()
            read -r -a kids 2>/dev/null <"$f" # no newline at the end: read "fails" but fills kids
            for c in "${kids[@]}"; do
                tree+=("$c")
                add_children "$c"
            done
        done
    }
else
    add_children() {
        local p=$1 c
        for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do
            tree+=("$c")
            add_children "$c"
        done
    }
fi

peak_anon=0 peak_rss=0 hwm=0 max_procs=0 samples=0
while :; do
    tree=("$pid")
    add_children "$pid"
    sum_anon=0 sum_rss=0 alive=0
    for p in "${tree[@]}"; do
        anon=0 rss=0 state=
        while read -r key val _; do
            case $key in
            State:) state=$val ;;
            RssAnon:) anon=$val ;;
            VmRSS:) rss=$val ;;
            VmHWM:) [ "$p" = "$pid" ] && hwm=$val ;;
            esac
        done 2>/dev/null <"/proc/$p/status"
        [ -z "$state" ] || [ "$state" = Z ] && continue
        alive=$((alive + 1))
        sum_anon=$((sum_anon + anon))
        sum_rss=$((sum_rss + rss))
    done
    [ "$alive" -eq 0 ] && break
    samples=$((samples + 1))
    ((sum_anon > peak_anon)) && peak_anon=$sum_anon
    ((sum_rss > peak_rss)) && peak_rss=$sum_rss
    ((alive > max_procs)) && max_procs=$alive
    pause
done
while :; do # a trapped signal ends `wait` early
    wait "$pid"
    rc=$?
    kill -0 "$pid" 2>/dev/null || break
done
t_end=$EPOCHREALTIME
read -r la1 la5 la15 _ </proc/loadavg
load_end=("$la1" "$la5" "$la15")
trap - INT TERM HUP

wall=$(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.3f", b - a }')
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

json_str() { # a JSON string literal for $1
    local s=$1 out= i c o
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
        '"') out+='\"' ;;
        '\') out+='\\' ;;
        *)
            printf -v o '%d' "'$c"
            if ((o >= 0 && o < 32)); then printf -v c '\\u%04x' "$o"; fi
            out+=$c
            ;;
        esac
    done
    printf '"%s"' "$out"
}

if [ "${PEAKMEM_JSON:-0}" = 1 ]; then
    cmd_json=
    for a in "$@"; do cmd_json+="${cmd_json:+,}$(json_str "$a")"; done
    summary=$(printf '{"command":[%s],"wall_seconds":%s,"exit_code":%d,"peak_rss_anon_bytes":%d,"peak_vm_rss_bytes":%d,"vm_hwm_bytes":%d,"max_processes":%d,"samples":%d,"interval_seconds":%s,"loadavg_start":[%s,%s,%s],"loadavg_end":[%s,%s,%s]}' \
        "$cmd_json" "$wall" "$rc" $((peak_anon * 1024)) $((peak_rss * 1024)) $((hwm * 1024)) "$max_procs" "$samples" \
        "$interval" "${load_start[@]}" "${load_end[@]}")
else
    summary="peakmem: wall $wall s, exit $rc, peak RssAnon $(mib "$peak_anon") MiB, peak VmRSS $(mib "$peak_rss") MiB, VmHWM $(mib "$hwm") MiB, $max_procs process(es), $samples samples, load ${load_start[0]} -> ${load_end[0]} (1 min avg): $*"
fi
if [ -n "${PEAKMEM_OUT:-}" ]; then
    printf '%s\n' "$summary" >"$PEAKMEM_OUT" || exit 2
else
    printf '%s\n' "$summary" >&2
fi
exit "$rc"
