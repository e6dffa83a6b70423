#!/usr/bin/env bash
# determinism.sh COMMITTED RERUN: what `git status` would show if RERUN (a copy of the
# committed results that `make check-determinism` re-ran `accuracy` into, from scratch,
# under another kernel set and checkout path) were the checkout's docs/results. Lists
# every file that differs, with the first differing line of a CSV or Markdown page;
# exit status 0 when none does. A page whose numbers agree keeps its bytes (tables.py
# write_text) and a plot whose script is unchanged is not redrawn (plots.sha256), so
# identical files mean the printed results agree at their printed precision.
set -u
a=$1 b=$2
same=0 fail=0
for f in $( (ls -A "$a"; ls -A "$b") | grep -v '^\.plots\.lock$' | sort -u); do
  if cmp -s "$a/$f" "$b/$f"; then
    same=$((same + 1))
    continue
  fi
  fail=$((fail + 1))
  if [ ! -e "$a/$f" ] || [ ! -e "$b/$f" ]; then
    echo "DIFFERENT: $f (only in $([ -e "$a/$f" ] && echo "$a" || echo "$b"))"
  else
    case $f in
      *.csv|*.md|*.sha256)
        echo "DIFFERENT: $f, first at:"
        diff "$a/$f" "$b/$f" | grep '^[<>]' | head -2 | cut -c1-160 | sed 's/^/    /' ;;
      *) echo "DIFFERENT: $f" ;;
    esac
  fi
done
if [ $fail = 0 ]; then
  echo "deterministic: all $same files identical ($a vs $b): git status would stay clean"
else
  echo "NOT deterministic: $fail of $((same + fail)) files differ ($a vs $b)"
fi
exit $((fail > 0))
