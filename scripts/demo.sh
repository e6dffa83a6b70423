#!/usr/bin/env bash
# The main job end to end on the shipped model (stories260K), in under a
# minute: calibrate CLAWS (and CATS) on one part of the shipped TinyStories
# text, measure perplexity dense vs CATS vs CLAWS at half the MLP neurons on a
# held-out part, pack the model into the kmi4 layout with the CLAWS router,
# and decode from the artifact dense and sparse with the runtime kernels.
#
#   scripts/demo.sh                 # MODEL=, TOK=, TEXT=, DENSITY= override the defaults
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ASSETS=${SPARSECAL_ASSETS:-../shared/assets}
MODEL=${MODEL:-$ASSETS/models/stories260K.bin}
TOK=${TOK:-$ASSETS/models/tok512.bin}
TEXT=${TEXT:-$ASSETS/text/tinystories_valid_a.txt}
DENSITY=${DENSITY:-0.5}
NCAL=${NCAL:-600}   # documents to calibrate on
NEVAL=${NEVAL:-400} # held-out documents after them
SC=build/sparsecal
OUT=$(mktemp -d "${TMPDIR:-/tmp}/sparsecal-demo.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
t0=$(date +%s.%N)

echo "== 1. the model"
$SC info -m "$MODEL" --tokenizer "$TOK"

echo
echo "== 2. calibrate: CLAWS saliency (forward + backward) and CATS statistics on the first $NCAL documents"
$SC compute -m "$MODEL" --tokenizer "$TOK" -f "$TEXT" --max-docs "$NCAL" --method claws,cats -o "$OUT/model.scal"

echo
echo "== 3. evaluate on the next $NEVAL (held-out) documents: dense, CATS and CLAWS at density $DENSITY"
$SC eval -m "$MODEL" --tokenizer "$TOK" -f "$TEXT" --skip-docs "$NCAL" --max-docs "$NEVAL" --method dense 2>/dev/null
for m in cats claws; do
  $SC eval -m "$MODEL" --tokenizer "$TOK" -f "$TEXT" --skip-docs "$NCAL" --max-docs "$NEVAL" --calib "$OUT/model.scal" \
    --method "$m" --density "$DENSITY" 2>/dev/null
done

echo
echo "== 4. pack: kmi4 (4-bit, row-sparse friendly) with the CLAWS router at density $DENSITY"
$SC pack -m "$MODEL" --tokenizer "$TOK" --calib "$OUT/model.scal" --layout kmi4 --method claws --density "$DENSITY" \
  -o "$OUT/model.spk" 2>&1 | tail -1
$SC ppl -m "$OUT/model.spk" -f "$TEXT" --skip-docs "$NCAL" --max-docs "$NEVAL" 2>/dev/null | sed 's/^/artifact, dense: /'

echo
echo "== 5. run: decode up to 500 tokens from the artifact, dense and with the CLAWS router (greedy, 1 thread, best of 3)"
for m in dense claws; do
  best=""
  for i in 1 2 3; do
    line=$($SC run -m "$OUT/model.spk" -p "Once upon a time" --method "$m" --density "$DENSITY" -n 500 -t 1 \
           --temp 0 2>&1 >/dev/null | grep '^run:')
    rate=$(sed -n 's/.*(\([0-9.]*\) tok\/s).*/\1/p' <<<"$line")
    if [ -z "$best" ] || awk "BEGIN{exit !($rate > $best)}"; then best=$rate; bestline=$line; fi
  done
  echo "$bestline"
done
echo "(stories260K's MLP has 172 neurons: at this size choosing them costs about what skipping them saves;"
echo " real-shape decode speed, dense and sparse, is in docs/PERFORMANCE.md and docs/RUN.md)"

echo
echo "== 6. the sparse artifact writes (CLAWS, density $DENSITY, greedy)"
$SC run -m "$OUT/model.spk" -p "Once upon a time" --method claws --density "$DENSITY" -n 96 --temp 0 2>/dev/null
echo
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "demo finished in %.1f s\n", b - a}'
