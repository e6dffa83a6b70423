# table.sh - what the peer scripts print their results with (sourced, not run).
#
# median "v1 v2 ..."      the median of the numbers in a space-separated list
# print_machine           the CPU, its count and the date (UTC)
# print_header LABEL COLS the Markdown header of a table: LABEL, then for each thread count of
#                         $THREADS the columns "T thread(s) | COLS" (COLS: the ratio column's name)

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

print_machine() {
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $(date -u +%F)"
}

print_header() {
  local hdr="| $1 |" sep="|---|" t
  for t in $THREADS; do hdr+=" $t thread(s) | $2 |"; sep+="---:|---:|"; done
  echo "$hdr"
  echo "$sep"
}
