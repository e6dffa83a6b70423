#!/usr/bin/env bash
# Writes seed corpora for the libFuzzer harnesses (tests/fuzz) into OUT/<target>/,
# made from the shipped assets and from files sparsecal itself writes (a tiny
# synthetic model, its calibration files and artifacts in every layout, and
# the tiny and hostile GGUF / safetensors files the test programs craft).
# Nothing third-party is committed: everything is regenerated here.
#   scripts/fuzz_seeds.sh BUILD_DIR OUT_DIR   (an ordinary build: sparsecal and the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: fuzz_seeds.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: fuzz_seeds.sh BUILD_DIR OUT_DIR}
SC=$BUILD/sparsecal
A=${SPARSECAL_ASSETS:-$(cd .. && pwd)/shared/assets}
mkdir -p "$OUT"/{scal,spk,gguf,safetensors,tokbin}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# a tiny model with a tokens file, in f32 and bf16
"$SC" synth -o "$T/m" --dim 32 --ffn 64 --layers 2 --heads 2 --kv-heads 1 --vocab 64 --seq-len 32 \
  --token-seqs 4 --token-len 16 >/dev/null 2>&1
"$SC" synth -o "$T/mb" --dim 32 --ffn 64 --layers 1 --heads 2 --kv-heads 1 --vocab 48 --seq-len 32 --dtype bf16 \
  --family qwen2 --token-seqs 1 --token-len 8 >/dev/null 2>&1
cp "$T/m/model.safetensors" "$OUT/safetensors/synth_f32.safetensors"
cp "$T/mb/model.safetensors" "$OUT/safetensors/synth_bf16.safetensors"

# calibration files: one per method, and all of them at once
for m in cats claws larosa cett clada teal cwic coact; do
  "$SC" compute -m "$T/m" --tokens "$T/m/tokens.txt" --method "$m" -o "$OUT/scal/$m.scal" -q >/dev/null 2>&1 ||
    echo "fuzz_seeds: compute --method $m failed" >&2
done
"$SC" compute -m "$T/m" --tokens "$T/m/tokens.txt" --method cats,claws,cett,clada,coact,cwic --compress 0 \
  -o "$T/all.scal" -q
cp "$T/all.scal" "$OUT/scal/all_raw.scal"

# artifacts: every layout, routing data from the calibration, and one with a vocabulary
for l in f32 q8_0 q4_0 kmi4 zigzag; do
  "$SC" pack -m "$T/m" --layout "$l" -o "$OUT/spk/synth_$l.spk" -q
done
"$SC" pack -m "$T/m" --layout kmi4 --calib "$T/all.scal" --method cett -o "$OUT/spk/synth_cett.spk" -q
"$SC" pack -m "$T/m" --layout zigzag --calib "$OUT/scal/larosa.scal" --method larosa -o "$OUT/spk/synth_larosa.spk" -q
"$SC" pack -m "$A/models/stories260K.bin" -t "$A/models/tok512.bin" --layout q4_0 -o "$OUT/spk/stories_q4_0.spk" -q

# GGUF and safetensors: the small files the format tests write (tiny models in every dtype and
# family, vocabularies, crafted hostile headers), kept by SC_KEEP_TMP in a directory of our own
for t in gguf safetensors; do
  mkdir -p "$T/$t"
  TMPDIR="$T/$t" SC_KEEP_TMP=1 SPARSECAL_ASSETS="$A" "$BUILD/test_$t" >/dev/null 2>&1 || true
  find "$T/$t" -name "*.$t" -size -128k -size +0 | while read -r f; do cp "$f" "$OUT/$t/$(basename "$f")"; done
done

# tokenizer.bin: two bytes of vocabulary size (minus one, little-endian), then the file
for v in 512 300; do
  printf "$(printf '\\x%02x\\x%02x' $(((v - 1) & 255)) $(((v - 1) >> 8)))" >"$OUT/tokbin/tok512_v$v.bin"
  cat "$A/models/tok512.bin" >>"$OUT/tokbin/tok512_v$v.bin"
done
echo "fuzz seeds in $OUT: $(find "$OUT" -type f | wc -l) files"
