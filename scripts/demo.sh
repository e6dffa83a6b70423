#!/usr/bin/env bash
# The main job end to end on the shipped default model (stories260K):
# build, describe the model, measure perplexity on held-out TinyStories, and
# generate text greedily from BOS.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ASSETS=${SPARSECAL_ASSETS:-../shared/assets}
MODEL=${MODEL:-$ASSETS/models/stories260K.bin}
TOK=${TOK:-$ASSETS/models/tok512.bin}
EVAL=${EVAL:-$ASSETS/text/tinystories_valid_a.txt}
SC=build/sparsecal

echo "== sparsecal info"
$SC info -m "$MODEL" -t "$TOK"
echo "== sparsecal ppl (held-out TinyStories, $(basename "$EVAL"))"
$SC ppl -m "$MODEL" -t "$TOK" -f "$EVAL"
echo "== sparsecal generate (greedy, from BOS)"
$SC generate -m "$MODEL" -t "$TOK" --temperature 0
while IFS= read -r prompt; do
  echo "== sparsecal generate -p \"$prompt\" (sampled, seed 1)"
  $SC generate -m "$MODEL" -t "$TOK" -p "$prompt" -n 96 --seed 1
done < data/prompts.txt
