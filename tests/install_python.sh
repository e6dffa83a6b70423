#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then Python imports the installed
# sparsecal package with nothing pointing at the build tree: the package finds
# the installed libsparsert and sparsecal by itself (_where.py), and its greedy
# ids equal the installed `sparsecal run`'s on an artifact that sparsecal packed.
# Exit 77 (skipped) without python3-numpy.
#   tests/install_python.sh BUILD_DIR PYTHON3 PYTHON_DIR ASSETS_DIR [PRELOAD]
set -euo pipefail
B=$1 PY=$2 PYDIR=$3 A=${SPARSECAL_ASSETS:-$4} PRELOAD=${5:-}
fail() { echo "install_python: $*" >&2; exit 1; }
if ! "$PY" -c "import numpy" 2>/dev/null; then
  echo "SKIP: numpy is not installed for $PY (apt-get install python3-numpy)"
  exit 77
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
P=$d/prefix
cmake --install "$B" --prefix "$P" >/dev/null
[ -f "$P/$PYDIR/sparsecal/__init__.py" ] && [ -f "$P/$PYDIR/sparsecal/_where.py" ] || fail "no package in $P/$PYDIR"
S=$P/bin/sparsecal M=$A/models/stories260K.bin T=$A/models/tok512.bin X=$A/text/tinystories_valid_a.txt
[ -f "$M" ] || fail "assets not found in $A (set SPARSECAL_ASSETS)"
"$S" compute -m "$M" --tokenizer "$T" -f "$X" --max-docs 20 --method claws -o "$d/c.scal" -q
"$S" pack -m "$M" --tokenizer "$T" --calib "$d/c.scal" --layout kmi4 --method claws --density 0.5 -o "$d/m.spk" -q 2>/dev/null
want=$("$S" run --artifact "$d/m.spk" -p "Once upon a time" --steps 40 --temp 0 --threads 1 --json 2>/dev/null |
       grep -o '"tokens":\[[0-9,]*\]')
got=$(cd "$d" && env -u SPARSERT_LIB -u SPARSECAL_CLI -u SPARSECAL_BUILD LD_PRELOAD="$PRELOAD" PATH=/usr/bin:/bin \
      PYTHONPATH="$P/$PYDIR" "$PY" -c '
import os, sys, sparsecal
prefix = sys.argv[1]
assert sparsecal.__file__.startswith(prefix), sparsecal.__file__
assert sparsecal.cli.executable().startswith(prefix), sparsecal.cli.executable()
assert sparsecal._lib.lib()._name.startswith(prefix), sparsecal._lib.lib()._name
ids = sparsecal.tokenize("m.spk", "Once upon a time")
with sparsecal.Model("m.spk") as m:
    print("\"tokens\":[" + ",".join(map(str, m.generate(ids, steps=40, temperature=0))) + "]")
' "$P")
[ -n "$want" ] || fail "no tokens from sparsecal run"
[ "$got" = "$want" ] || fail "installed module: $got, sparsecal run: $want"
echo "installed module: $(tr -cd , <<<"$got" | wc -c) ids after BOS = sparsecal run's"
