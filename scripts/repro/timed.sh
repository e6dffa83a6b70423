#!/bin/sh
# timed.sh WORKDIR LOADFILE CMD [ARGS...]: runs CMD alone among the timed jobs
# (flock on WORKDIR/.timing.lock, whatever make -j says) and writes the machine's
# load during it to LOADFILE as one line
#   load1_at_start load1_at_end cores
# (1-minute load averages from /proc/loadavg; the CPUs this process may use), so
# that the timing tables report the load of each measurement and flag those made
# while other work competed for the cores. The exit status is CMD's.
set -u
w=$1 loadfile=$2
shift 2
exec flock "$w/.timing.lock" sh -c '
  f=$1; shift
  a=$(cut -d" " -f1 /proc/loadavg 2>/dev/null || echo nan)
  "$@"; rc=$?
  b=$(cut -d" " -f1 /proc/loadavg 2>/dev/null || echo nan)
  echo "$a $b $(nproc)" > "$f"
  exit $rc' sh "$loadfile" "$@"
