#!/bin/sh
# TEAL and CWIC on the shipped model: the numbers of docs/INPUT_SPARSITY.md.
#   scripts/repro/input_sparsity.sh [BUILD_DIR] [WORK_DIR]
# Calibration: 400 of the first 2,000 stories of tinystories_valid_a.txt;
# evaluation: the other stories (the split of the density sweep).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$ROOT/build}
W=${2:-$B/repro-input}
A=${SPARSECAL_ASSETS:-$ROOT/../shared/assets}
S=$B/sparsecal
M="-m $A/models/stories260K.bin -t $A/models/tok512.bin"
mkdir -p "$W"
awk 'BEGIN{RS="";ORS="\n\n"} NR<=2000' "$A/text/tinystories_valid_a.txt" > "$W/calib.txt"
awk 'BEGIN{RS="";ORS="\n\n"} NR>2000' "$A/text/tinystories_valid_a.txt" > "$W/eval.txt"
[ -f "$W/c.scal" ] || $S compute $M -f "$W/calib.txt" --seqs 400 --method teal,cwic -o "$W/c.scal" -q --json
ev() { $S eval $M -f "$W/eval.txt" --calib "$W/c.scal" -q --json "$@"; }
field() { python3 -c "import json,sys; j=json.load(sys.stdin); i=j.get('input_sparsity',{}); print('| ' + ' | '.join(str(round(v,4)) if isinstance(v,float) else str(v) for v in [$1]) + ' |')"; }
echo "| method | target sparsity | achieved | drift | ppl | APR |"
echo "|---|---:|---:|---:|---:|---:|"
ev --method dense | field "'dense', 0.0, 0.0, 0.0, j['ppl'], 1.0"
for s in 0.25 0.4 0.5 0.6; do
  d=$(python3 -c "print(1-$s)")
  for m in teal teal-greedy; do
    ev --method $m --density $d | field "'$m', i['target'], i['achieved'], i['drift'], j['ppl'], i['apr']"
  done
done
echo
echo "| cwic params | APR target | APR achieved | achieved sparsity | ppl |"
echo "|---|---:|---:|---:|---:|"
for p in apr=1.33 apr=1.67 apr=2 apr=2.5 apr=1.33,dist=laplace apr=1.67,dist=laplace apr=2,dist=laplace apr=2.5,dist=laplace apr=2,stripe=16 apr=2,stripe=16,dist=laplace apr=2,stats=ema; do
  ev --method cwic --params $p | field "'$p', i['apr_target'], i['apr'], i['achieved'], j['ppl']"
done
