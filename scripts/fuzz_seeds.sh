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
mkdir -p "$OUT"/{scal,spk,gguf,safetensors,tokbin,tokjson,spmodel,data,llama2c,hfdir,lora}
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
"$SC" pack -m "$A/models/stories260K.bin" --tokenizer "$A/models/tok512.bin" --layout q4_0 -o "$OUT/spk/stories_q4_0.spk" -q

# GGUF and safetensors: the small files the format tests write (tiny models in every dtype and
# family, vocabularies, crafted hostile headers), kept by SC_KEEP_TMP in a directory of our own
# (and tokenizer.json, tokenizer.model and data files from the tokenizer and data tests)
harvest() { # TEST EXTENSION TARGET
  mkdir -p "$T/h_$1"
  TMPDIR="$T/h_$1" SC_KEEP_TMP=1 SPARSECAL_ASSETS="$A" "$BUILD/$1" >/dev/null 2>&1 || true
  find "$T/h_$1" -name "*.$2" -size -128k -size +0 | while read -r f; do
    cp "$f" "$OUT/$3/$1_$(basename "$(dirname "$f")")_$(basename "$f")"
  done
}
harvest test_gguf gguf gguf
harvest test_safetensors safetensors safetensors
harvest test_tok_hf json tokjson
harvest test_tok_data json tokjson
harvest test_tok_spm model spmodel

# tokenizer.bin: two bytes of vocabulary size (minus one, little-endian), then the file
for v in 512 300; do
  printf "$(printf '\\x%02x\\x%02x' $(((v - 1) & 255)) $(((v - 1) >> 8)))" >"$OUT/tokbin/tok512_v$v.bin"
  cat "$A/models/tok512.bin" >>"$OUT/tokbin/tok512_v$v.bin"
done
# llama2.c checkpoints: a tiny one (dim 8, ffn 16, 1 layer, 2 heads, 2 kv heads, vocab 16, 8 positions;
# zero weights: only the layout is parsed): embedding 128, norms 3 x 8, q/k/v/o 4 x 64, w1/w2/w3
# 3 x 128, freq_cis 2 x 16 floats; untied (vocabulary -16) with a 128-float classifier after them
hdr='\x08\0\0\0\x10\0\0\0\x01\0\0\0\x02\0\0\0\x02\0\0\0'
{ printf "$hdr"'\x10\0\0\0\x08\0\0\0'; head -c $((824 * 4)) /dev/zero; } >"$OUT/llama2c/tiny_tied.bin"
{ printf "$hdr"'\xf0\xff\xff\xff\x08\0\0\0'; head -c $((952 * 4)) /dev/zero; } >"$OUT/llama2c/tiny_untied.bin"

# Hugging Face directories: two bytes of config.json length, config.json, model.safetensors
hf() { local n; n=$(stat -c %s "$1/config.json"); printf "$(printf '\\x%02x\\x%02x' $((n & 255)) $((n >> 8)))" >"$2"
  cat "$1/config.json" "$1/model.safetensors" >>"$2"; }
hf "$T/m" "$OUT/hfdir/synth_llama.bin"
hf "$T/mb" "$OUT/hfdir/synth_qwen2_bf16.bin"

# LoRA adapters (fuzz_lora.c): two bytes of adapter_config.json length, the config, the safetensors; the
# adapters the LoRA test writes (stories260K's shapes, which the harness's base model has)
mkdir -p "$T/h_lora"
TMPDIR="$T/h_lora" SC_KEEP_TMP=1 SPARSECAL_ASSETS="$A" "$BUILD/test_lora" >/dev/null 2>&1 || true
i=0
find "$T/h_lora" -name adapter_config.json | while read -r c; do
  d=$(dirname "$c"); n=$(stat -c %s "$c"); i=$((i + 1))
  [ -f "$d/adapter_model.safetensors" ] || continue
  printf "$(printf '\\x%02x\\x%02x' $((n & 255)) $((n >> 8)))" >"$OUT/lora/test_lora_$i.bin"
  cat "$c" "$d/adapter_model.safetensors" >>"$OUT/lora/test_lora_$i.bin"
done

# data files: one option byte (fuzz_data.c), then the file
prefixed() { printf "$(printf '\\x%02x' "$1")" >"$3"; cat "$2" >>"$3"; }
prefixed 0 "$A/text/tinystories_sample.txt" "$OUT/data/text_auto.txt"
prefixed 4 "$A/text/tinystories_sample.txt" "$OUT/data/text_sep.txt"
prefixed 16 "$A/text/tinystories_sample.txt" "$OUT/data/text_pack.txt"
printf '{"text": "Once upon a time"}\n{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n' >"$T/chat.jsonl"
prefixed 2 "$T/chat.jsonl" "$OUT/data/chat.jsonl"
prefixed 34 "$T/chat.jsonl" "$OUT/data/chat_llama3.jsonl"
head -c 400 "$T/m/tokens.txt" >"$T/ids.txt"
prefixed 128 "$T/ids.txt" "$OUT/data/ids.txt"

echo "fuzz seeds in $OUT: $(find "$OUT" -type f | wc -l) files"
