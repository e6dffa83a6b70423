#!/usr/bin/env bash
# CLAWS num/den from `sparsecal compute` against an independent PyTorch
# forward + backward (scripts/peers/torch_claws.py) on a small synthetic
# bf16 checkpoint. Skipped (exit 77) when Debian's python3-torch is absent:
# the C suite never needs it.
#   tests/oracle_torch_claws.sh path/to/sparsecal
set -euo pipefail
S=$1
here=$(cd "$(dirname "$0")/.." && pwd)
/usr/bin/python3 -c "import torch, numpy" 2>/dev/null || { echo "python3-torch not installed: skipped"; exit 77; }
command -v zstd >/dev/null || { echo "zstd not installed: skipped"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$S" synth --dim 128 --ffn 344 --layers 3 --heads 4 --kv-heads 2 --vocab 1000 --seq-len 256 \
  --token-seqs 3 --token-len 100 --dtype bf16 -o "$d/m" >/dev/null
"$S" compute -m "$d/m" --tokens "$d/m/tokens.txt" --method claws -o "$d/c.scal" 2>/dev/null
/usr/bin/python3 "$here/scripts/peers/torch_claws.py" -m "$d/m" --tokens "$d/m/tokens.txt" --scal "$d/c.scal" \
  --threads 1 --json 2>/dev/null >"$d/r.json"
cat "$d/r.json"
# Both sides compute in f32 from the same bf16 weights and accumulate in
# double; they differ in summation order (BLAS blocking vs torch's), so each
# of num and den is an f32 quantity with relative error ~sqrt(K) * 2^-24 per
# product (K <= 344) compounded over 3 layers forward and backward: a few
# 1e-7 (measured 4.6e-7). 1e-5 leaves a 20x margin; a wrong formula, token
# range or gradient scale is off by O(1).
/usr/bin/python3 - "$d/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["max_rel_diff_num"] < 1e-5 and r["max_rel_diff_den"] < 1e-5
print("claws num/den vs PyTorch:", "ok" if ok else "MISMATCH", r["max_rel_diff_num"], r["max_rel_diff_den"])
sys.exit(0 if ok else 1)
PY
