#!/usr/bin/env bash
# llama.cpp's dense decode beside sparsecal's dense and sparse decode, on the same weights.
#
#   LLAMA_CPP_DIR=~/src/llama.cpp scripts/peers/llamacpp_decode.sh
#
# LLAMA_CPP_DIR is a llama.cpp source checkout the user provides (nothing is fetched or committed);
# llama-bench and llama-quantize are built into $LLAMA_CPP_DIR/build (GGML_NATIVE, Release) when missing.
# Steps: `sparsecal synth --gguf` writes a TinyLlama-1.1B-shaped model with random weights (F16 matrices,
# the Llama-2 vocabulary copied from the shipped vocab-only GGUF), llama-quantize makes it Q4_0, and
# `sparsecal pack` makes the q4_0 and kmi4 artifacts from the same F16 file. Then, for REPS rounds, every
# thread count and every configuration runs once per round in turn (interleaved, so machine noise hits
# them alike): llama-bench tg$NGEN, and `sparsecal run --json --no-mmap` generating $NGEN tokens after BOS
# with --ignore-eos (--no-mmap: the weights in anonymous memory, as llama.cpp's run-time repacked Q4_0
# weights are; NO_MMAP=0 reads sparsecal's from the file mapping instead) (dense on both artifacts; on kmi4 CATS top-K at densities 0.5 and 0.3, and CATS with the
# per-layer thresholds of a calibration at density 0.5 - the CATS paper's router, which costs a compare
# per neuron instead of a top-K selection). Prints the median tokens/s per configuration, its ratio to
# llama.cpp, and the load average seen during the runs.
#
# A third artifact, kmi4-in (attention and gate stored column-sparse), runs teal-cats: TEAL's calibrated input
# thresholds on attention and the gate combined with CATS top-K rows on up and down, one density for both.
# A fourth, zigzag (every linear layer column-sparse), runs TEAL alone at density 0.5 (configuration 12).
#
# Before the rounds the script prints how the peer was built (CMAKE_BUILD_TYPE, GGML_NATIVE from its
# CMakeCache.txt, the ISA the compiler saw) and how many tensors llama.cpp repacked at load (q4_0 -> q4_0_8x8):
# a peer built without them is not at its best.
#
# Environment: SPARSECAL (default build/sparsecal), SPARSECAL_ASSETS (default ../shared/assets),
# OUT (default build/peers), THREADS (default "1 2"), REPS (default 4), NGEN (default 128), CALIB_DOCS
# (stories of the shipped TinyStories text the CATS and TEAL thresholds are calibrated on, default 8: ~500
# tokens), SHAPE ("--dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4": TinyLlama-1.1B), SEED (1),
# CONFIGS (the configuration numbers to run, default all: 0 llama.cpp, 1-5 as above, 6-7 teal-cats at 0.5 and
# 0.3, 8 ik_llama.cpp, 12 TEAL on zigzag), IK_LLAMA_CPP_DIR (an ik_llama.cpp checkout with build/bin/llama-bench: its tg$NGEN
# with run-time repacking, -rtr 1, on the same Q4_0 GGUF; without it configuration 8 is skipped).
# The 8-bit table (not in the default CONFIGS): 9 llama.cpp on the F16 file quantised to Q8_0, 10 sparsecal's
# q8_0 artifact dense, 11 its kmi8 artifact (W_d neuron-major) with CATS top-K at 0.5; their "x llama.cpp"
# column is against configuration 9.
# PROMPT=N (default 0: decode) measures prefill instead, every configuration on an N-token prompt:
# llama-bench pp$N (-p N -n 0) against `sparsecal run -p TEXT -n 1`'s prompt_tokens_per_second, TEXT the
# first words of the shipped TinyStories text that make N tokens with BOS (N - 1 with the artifacts'
# tokenizer; llama-bench's prompt is N random ids: the same count, the same work per token).
# DEPTH=N (default 0) measures decode after a context of N tokens instead: `sparsecal run -p TEXT` (TEXT as
# for PROMPT) generating $NGEN tokens after it, against llama.cpp's llama-batched-bench -npp N -ntg $NGEN -npl 1
# (its S_TG; built when missing; its f16 key/value cache, as sparsecal's default; LLAMA_ARGS adds options, e.g.
# "-fa" for its flash attention). ik_llama.cpp (configuration 8) is skipped there.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to a llama.cpp source checkout}"
S=${SPARSECAL:-build/sparsecal}
A=${SPARSECAL_ASSETS:-../shared/assets}
OUT=${OUT:-build/peers}
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-4}
NGEN=${NGEN:-128}
SHAPE=${SHAPE:-"--dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4"}
SEED=${SEED:-1}
CALIB_DOCS=${CALIB_DOCS:-8}
NO_MMAP=${NO_MMAP:-1}
CONFIGS=${CONFIGS:-"0 1 2 3 4 5 6 7 8 12"}
PROMPT=${PROMPT:-0}
DEPTH=${DEPTH:-0}
LLAMA_ARGS=${LLAMA_ARGS:-}
((PROMPT > 1 && DEPTH > 1)) && { echo "llamacpp_decode: PROMPT and DEPTH are exclusive" >&2; exit 1; }
PLEN=$((PROMPT > 1 ? PROMPT : DEPTH)) # the prompt's tokens, BOS included
IK_LB=${IK_LLAMA_CPP_DIR:+$IK_LLAMA_CPP_DIR/build/bin/llama-bench}
VOCAB=$A/tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf
LB=$LLAMA_CPP_DIR/build/bin/llama-bench
LQ=$LLAMA_CPP_DIR/build/bin/llama-quantize
LBB=$LLAMA_CPP_DIR/build/bin/llama-batched-bench

[[ -x $S ]] || { echo "llamacpp_decode: $S not found (build sparsecal first)" >&2; exit 1; }
[[ -f $VOCAB ]] || { echo "llamacpp_decode: $VOCAB not found (SPARSECAL_ASSETS)" >&2; exit 1; }
if [[ ! -x $LB || ! -x $LQ ]]; then
  echo "building llama-bench and llama-quantize in $LLAMA_CPP_DIR/build" >&2
  cmake -S "$LLAMA_CPP_DIR" -B "$LLAMA_CPP_DIR/build" -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF >/dev/null
  cmake --build "$LLAMA_CPP_DIR/build" --target llama-bench llama-quantize -j2 >/dev/null
fi
if ((DEPTH > 1)) && [[ ! -x $LBB ]]; then
  echo "building llama-batched-bench in $LLAMA_CPP_DIR/build" >&2
  cmake --build "$LLAMA_CPP_DIR/build" --target llama-batched-bench -j2 >/dev/null
fi
mkdir -p "$OUT"
# An artifact in OUT is reused only when it is newer than the sparsecal binary: one packed by an older build
# may hold another plan (the zigzag plan's f32 embedding before 2026-11-28), so it is packed again. The
# synthetic model, the GGUFs and the calibrations are reused as they are (delete OUT to remake them).
packed() {
  [[ -f $1 && ! $1 -ot $S ]] && return 0
  [[ -f $1 ]] && echo "packing $1 again: older than $S" >&2
  return 1
}
F16=$OUT/model-f16.gguf Q4=$OUT/model-q4_0.gguf
SPK_Q4=$OUT/model-q4_0.spk SPK_KMI4=$OUT/model-kmi4.spk SPK_IN=$OUT/model-kmi4-in.spk SPK_ZZ=$OUT/model-zigzag.spk
# shellcheck disable=SC2086
[[ -f $F16 ]] || "$S" synth $SHAPE --vocab 32000 --seed "$SEED" --dtype f16 --gguf --gguf-vocab "$VOCAB" -o "$F16"
[[ -f $Q4 ]] || "$LQ" "$F16" "$Q4" Q4_0 >"$OUT/quantize.log" 2>&1
packed "$SPK_Q4" || "$S" pack -m "$F16" --layout q4_0 -q -o "$SPK_Q4"
CAL=$OUT/cats.scal
[[ -f $CAL ]] || "$S" compute -m "$F16" -f "$A/text/tinystories_valid_a.txt" --max-docs "$CALIB_DOCS" --method cats \
                   -o "$CAL" 2>/dev/null
packed "$SPK_KMI4" || "$S" pack -m "$F16" --calib "$CAL" --layout kmi4 --method cats-threshold --density 0.5 -q \
                        -o "$SPK_KMI4"
Q8=$OUT/model-q8_0.gguf SPK_Q8=$OUT/model-q8_0.spk SPK_KMI8=$OUT/model-kmi8.spk
if [[ " $CONFIGS " == *" 9 "* || " $CONFIGS " == *" 10 "* || " $CONFIGS " == *" 11 "* ]]; then
  [[ -f $Q8 ]] || "$LQ" "$F16" "$Q8" Q8_0 >"$OUT/quantize_q8.log" 2>&1
  packed "$SPK_Q8" || "$S" pack -m "$F16" --layout q8_0 -q -o "$SPK_Q8"
  packed "$SPK_KMI8" || "$S" pack -m "$F16" --layout kmi8 --method cats --density 0.5 -q -o "$SPK_KMI8"
fi
TCAL=$OUT/teal.scal
if [[ " $CONFIGS " == *" 6 "* || " $CONFIGS " == *" 7 "* || " $CONFIGS " == *" 12 "* ]]; then
  [[ -f $TCAL ]] || "$S" compute -m "$F16" -f "$A/text/tinystories_valid_a.txt" --max-docs "$CALIB_DOCS" --method teal \
                     --params teal_greedy=0 -o "$TCAL" 2>/dev/null
fi
if [[ " $CONFIGS " == *" 6 "* || " $CONFIGS " == *" 7 "* ]]; then
  packed "$SPK_IN" || "$S" pack -m "$F16" --calib "$TCAL" --layout kmi4-in --method teal-cats --density 0.5 -q \
                        -o "$SPK_IN"
fi
if [[ " $CONFIGS " == *" 12 "* ]]; then
  packed "$SPK_ZZ" || "$S" pack -m "$F16" --calib "$TCAL" --layout zigzag --method teal --density 0.5 -q -o "$SPK_ZZ"
fi

# the peer's build: Release, native ISA, q4_0 repacked at load
CACHE=$LLAMA_CPP_DIR/build/CMakeCache.txt
echo "llama.cpp build: $(grep -h '^CMAKE_BUILD_TYPE:' "$CACHE" 2>/dev/null | cut -d= -f2) \
GGML_NATIVE=$(grep -h '^GGML_NATIVE:' "$CACHE" 2>/dev/null | cut -d= -f2); compiler sees: \
$(cc -march=native -dM -E - </dev/null | grep -oE '__(AVX2|AVX512F|AVX512VNNI|AVX512BW|AVXVNNI)__' | tr '\n' ' ')"
echo "llama.cpp q4_0 tensors repacked at load: $("$LB" -m "$Q4" -p 0 -n 1 -r 1 -t 1 -v 2>&1 | grep -c 'repack tensor')"

# a prompt (PROMPT or DEPTH): the first words of the text that make PLEN - 1 tokens (bisection on the word count)
PTEXT=
if ((PLEN > 1)); then
  mapfile -t words < <(tr -s ' \n' '\n\n' <"$A/text/tinystories_valid_a.txt" | grep . | head -n $((2 * PLEN)))
  ntok() { "$S" tokenize -m "$SPK_KMI4" -p "${words[*]:0:$1}" | wc -w; }
  lo=1 hi=${#words[@]}
  while ((lo < hi)); do
    mid=$(((lo + hi + 1) / 2))
    if (($(ntok "$mid") <= PLEN - 1)); then lo=$mid; else hi=$((mid - 1)); fi
  done
  PTEXT="${words[*]:0:$lo}"
  if ((PROMPT > 1)); then
    echo "prefill: a prompt of $(($(ntok "$lo") + 1)) tokens with BOS against llama-bench pp$PROMPT"
  else
    echo "decode after a context: a prompt of $(($(ntok "$lo") + 1)) tokens with BOS, then $NGEN generated, against" \
         "llama-batched-bench -npp $DEPTH -ntg $NGEN"
  fi
fi
GEN=(-p 0 -n "$NGEN") RUNGEN=(-n $((NGEN + 1)) --ignore-eos) KEY=tokens_per_second LBT=tg$NGEN
if ((PROMPT > 1)); then GEN=(-p "$PROMPT" -n 0) RUNGEN=(-p "$PTEXT" -n 1) KEY=prompt_tokens_per_second LBT=pp$PROMPT; fi
LBN=llama-bench
if ((DEPTH > 1)); then RUNGEN=(-p "$PTEXT" -n $((NGEN + 1)) --ignore-eos) LBN=llama-batched-bench LBT="tg$NGEN after $DEPTH"; fi

# name | command printing tokens/s (one number)
configs=("llama.cpp q4_0 ($LBN $LBT)" "sparsecal q4_0 artifact, dense" "sparsecal kmi4 artifact, dense"
         "sparsecal kmi4, CATS top-K d=0.5" "sparsecal kmi4, CATS top-K d=0.3" "sparsecal kmi4, CATS thresholds d=0.5"
         "sparsecal kmi4-in, teal-cats d=0.5" "sparsecal kmi4-in, teal-cats d=0.3"
         "ik_llama.cpp q4_0 -rtr 1 (llama-bench $LBT)" "llama.cpp q8_0 ($LBN $LBT)"
         "sparsecal q8_0 artifact, dense" "sparsecal kmi8, CATS top-K d=0.5" "sparsecal zigzag, TEAL d=0.5")
run_configs=()
for c in $CONFIGS; do
  [[ $c == 8 && ( -z $IK_LB || $DEPTH -gt 1 ) ]] && continue
  run_configs+=("$c")
done
tps_of() { # config index, threads
  local out
  case $1 in
    0 | 8 | 9) local lb=$LB rtr=() gguf=$Q4
       [[ $1 == 8 ]] && lb=$IK_LB rtr=(-rtr 1)
       [[ $1 == 9 ]] && gguf=$Q8
       if ((DEPTH > 1)); then # S_TG, the 8th column of its table's row
         # shellcheck disable=SC2086
         "$LBB" -m "$gguf" -c $((DEPTH + NGEN + 16)) -npp "$DEPTH" -ntg "$NGEN" -npl 1 -t "$2" $LLAMA_ARGS 2>/dev/null |
           awk -F'|' -v pp="$DEPTH" '$2 + 0 == pp && NF > 9 {gsub(/ /, "", $9); print $9; exit}'
         return
       fi
       out=$("$lb" -m "$gguf" "${GEN[@]}" -t "$2" -r 1 "${rtr[@]}" -o json 2>/dev/null)
       # avg_ts by name (ik_llama.cpp's CSV has other columns, some holding quoted commas)
       grep -o '"avg_ts": *[0-9.e+-]*' <<<"$out" | head -1 | cut -d: -f2 | tr -d ' ' ;;
    *) local art=$SPK_KMI4 meth=(--dense)
       [[ $1 == 1 ]] && art=$SPK_Q4
       [[ $1 == 3 ]] && meth=(--method cats --density 0.5)
       [[ $1 == 4 ]] && meth=(--method cats --density 0.3)
       [[ $1 == 5 ]] && meth=(--method cats-threshold --density 0.5)
       [[ $1 == 6 ]] && art=$SPK_IN meth=(--method teal-cats --density 0.5)
       [[ $1 == 7 ]] && art=$SPK_IN meth=(--method teal-cats --density 0.3)
       [[ $1 == 10 ]] && art=$SPK_Q8
       [[ $1 == 11 ]] && art=$SPK_KMI8 meth=(--method cats --density 0.5)
       [[ $1 == 12 ]] && art=$SPK_ZZ meth=(--method teal --density 0.5)
       [[ $NO_MMAP == 1 ]] && meth+=(--no-mmap)
       out=$("$S" run -m "$art" "${RUNGEN[@]}" --temp 0 --threads "$2" "${meth[@]}" --json)
       grep -o "\"$KEY\":[0-9.e+-]*" <<<"$out" | cut -d: -f2 ;;
  esac
}
declare -A res
loads=()
for ((r = 1; r <= REPS; r++)); do
  for t in $THREADS; do
    for c in "${run_configs[@]}"; do
      v=$(tps_of "$c" "$t")
      res[$c,$t]+="$v "
      echo "round $r, $t thread(s): ${configs[$c]}: $v tok/s" >&2
    done
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  done
done
source scripts/peers/table.sh
print_machine
echo "1-minute load averages seen: ${loads[*]}"
echo
what="decode tokens/s"
((PROMPT > 1)) && what="prefill tokens/s ($PROMPT-token prompt)"
((DEPTH > 1)) && what="decode tokens/s after a $DEPTH-token context"
print_header "$what (median of $REPS)" "x llama.cpp"
for c in "${run_configs[@]}"; do
  line="| ${configs[$c]} |"
  for t in $THREADS; do
    b=0
    [[ $c -ge 9 && $c -le 11 ]] && b=9 # the 8-bit rows against llama.cpp's Q8_0
    m=$(median "${res[$c,$t]}") base=$(median "${res[$b,$t]:-0}") # no peer row in CONFIGS: no ratio
    line+=" $(printf '%.1f' "$m") | $(awk -v a="$m" -v b="$base" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}') |"
  done
  echo "$line"
done
