#!/usr/bin/env bash
# GGML's own q4_0 GEMV beside `sparsecal bench`'s kernel rows, cold cache, in one run.
#
#   LLAMA_CPP_DIR=~/src/llama.cpp scripts/peers/ggml_gemv.sh
#
# LLAMA_CPP_DIR is a llama.cpp (or ggml) source checkout the user provides, built with its shared
# libraries in $LLAMA_CPP_DIR/build/bin (libggml*.so; scripts/peers/llamacpp_decode.sh builds it so);
# nothing is fetched or committed. scripts/peers/ggml_gemv.c, our program against GGML's public API, is
# compiled against that checkout's headers and times GGML's q4_0 GEMV in bench's regime (LAYERS separate
# matrices visited in turn, so the weights come from DRAM): plain q4_0 rows, and q4_0 in the CPU device's
# repacking buffer (q4_0_8x8 on x86), as llama.cpp holds the weights it loads. For REPS rounds, every
# thread count runs `sparsecal bench --runs 1` (stream floor, q4_0 rows, kmi4r and kmi4 dense and at
# SPARSITY, the bare live read) and then ggml_gemv, in turn; the table gives the medians of the rounds'
# medians, each row's ratio to the stream floor, and the load averages seen.
#
# Environment: SPARSECAL (default build/sparsecal), DIMS (IN:OUT, default 6144:1536), THREADS ("1 2"),
# REPS (3), LAYERS (35), PASSES (50), WARMUP (5), SPARSITY (0.5), OUT (build/peers).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LLAMA_CPP_DIR:?set LLAMA_CPP_DIR to a llama.cpp or ggml source checkout built with shared libraries}"
S=${SPARSECAL:-build/sparsecal}
DIMS=${DIMS:-6144:1536}
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-3}
LAYERS=${LAYERS:-35}
PASSES=${PASSES:-50}
WARMUP=${WARMUP:-5}
SPARSITY=${SPARSITY:-0.5}
OUT=${OUT:-build/peers}
IN=${DIMS%%:*} NOUT=${DIMS##*:}
mkdir -p "$OUT"
LIB=$LLAMA_CPP_DIR/build/bin
INC=$LLAMA_CPP_DIR/ggml/include
[[ -d $INC ]] || INC=$LLAMA_CPP_DIR/include # a ggml checkout
[[ -e $LIB/libggml-base.so || -e $LIB/libggml.so ]] || LIB=$LLAMA_CPP_DIR/build/src # ggml's own build
libs=(-lggml)
for l in ggml-base ggml-cpu; do [[ -e $LIB/lib$l.so ]] && libs+=(-l$l); done
GG=$OUT/ggml_gemv
cc -O2 -std=c11 -Wall -Wextra -Werror -I"$INC" scripts/peers/ggml_gemv.c -L"$LIB" "${libs[@]}" \
  -Wl,-rpath,"$LIB" -o "$GG"
[[ -x $S ]] || { echo "no $S: build sparsecal first (make)" >&2; exit 1; }

declare -A res
order=()
loads=()
for ((r = 1; r <= REPS; r++)); do
  for t in $THREADS; do
    csv=$OUT/ggml_gemv_bench.$t.csv
    "$S" bench --dims "$DIMS" --sparsity "$SPARSITY" -t "$t" --layers "$LAYERS" --passes "$PASSES" \
      --warmup "$WARMUP" --runs 1 --huge-pages --csv "$csv" >/dev/null
    # kernel,sparsity -> median µs (bench's CSV: in,out,layers,threads,kernel,sparsity,live,median_us,...)
    while IFS=, read -r _ _ _ _ k sp _ med _; do
      [[ $k == kernel || $k == f32_sgemv || $k == q4_0t_scatter || $k == zigzag || $k == mlp* ]] && continue
      [[ $sp != 0.00 && $k != kmi4 && $k != kmi4r_up && $k != kmi4_live_read ]] && continue
      key="sparsecal $k"
      [[ $sp != 0.00 ]] && key="$key d=$(awk -v s="$sp" 'BEGIN{printf "%.2f", 1 - s}')"
      res[$key,$t]+="$med "
      [[ $r == 1 && $t == "${THREADS%% *}" ]] && order+=("$key")
    done <"$csv"
    while IFS=$'\t' read -r label _ _ _ med _; do
      res[$label,$t]+="$med "
      [[ $r == 1 && $t == "${THREADS%% *}" ]] && order+=("$label")
    done < <("$GG" "$IN" "$NOUT" "$t" "$LAYERS" "$PASSES" "$WARMUP" 2>>"$OUT/ggml_gemv.log") # (GGML logs each repack)
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
    echo "round $r, $t thread(s) done (load ${loads[-1]})" >&2
  done
done
source scripts/peers/table.sh
print_machine
echo "GGML: $(git -C "$LLAMA_CPP_DIR" log -1 --format='%h %cs' 2>/dev/null || echo "$LLAMA_CPP_DIR")"
echo "1-minute load averages seen: ${loads[*]}"
echo "$IN -> $NOUT, $LAYERS matrices cycled, $PASSES passes after $WARMUP, median of $REPS rounds; sparsecal's"
echo "kmi4 'd=' rows at density 1 - sparsity with uniformly random live sets"
echo
print_header "µs per GEMV" "x floor"
for k in "${order[@]}"; do
  line="| $k |"
  for t in $THREADS; do
    m=$(median "${res[$k,$t]}")
    f=$(median "${res[sparsecal floor,$t]}")
    line+=" $(awk -v m="$m" 'BEGIN{printf "%.1f", m}') | $(awk -v m="$m" -v f="$f" 'BEGIN{printf "%.2f", m / f}') |"
  done
  echo "$line"
done
