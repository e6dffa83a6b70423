#!/usr/bin/env bash
# scale.sh - the real-size path, measured: a synthetic bf16 checkpoint of a real
# model's shape goes through compute (CLAWS; CATS+LaRoSA+TEAL+CETT), eval, ppl,
# pack (q4_0, kmi4) and run, each under scripts/peakmem.sh (peak anonymous
# RSS: the mmapped weights' page cache is file-backed and not counted, see
# peakmem.sh). Prints a Markdown table with the budgets of the real-size issue
# (docs/SCALE.md) and writes every measurement as JSON lines.
#
# usage: scripts/scale.sh SHAPE [WORKDIR]
#   SHAPE     tiny (CI-sized check of this script), 1b (Llama-3.2-1B: 2048/8192/16 layers,
#             128256 vocab), 8b (Llama-3-8B: 4096/14336/32 layers, 128256 vocab)
#   WORKDIR   where the model and outputs go (default /tmp/sparsecal-scale-SHAPE; the 8b
#             model takes 16 GB of disk, its q4_0 and kmi4 artifacts about 5 GB each)
# environment: SEQ_LEN (tokens per sequence, default 2048), SEQS (sequences, default 2),
#              THREADS (default: all cores), STEPS (SHAPE-specific subset, e.g. "compute_claws ppl"),
#              SPARSECAL (the binary, default build/sparsecal)
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPE=${1:?usage: scripts/scale.sh tiny|1b|8b [WORKDIR]}
W=${2:-/tmp/sparsecal-scale-$SHAPE}
S=${SPARSECAL:-build/sparsecal}
SEQ_LEN=${SEQ_LEN:-2048}
SEQS=${SEQS:-2}
THREADS=${THREADS:-$(nproc)}
case $SHAPE in
  tiny) SHAPE_ARGS="--dim 256 --ffn 768 --layers 4 --heads 8 --kv-heads 4 --vocab 4096 --seq-len 2048"; PARAMS_B=0 ;;
  1b)   SHAPE_ARGS="--dim 2048 --ffn 8192 --layers 16 --heads 32 --kv-heads 8 --vocab 128256 --seq-len 8192"; PARAMS_B=1.5 ;;
  8b)   SHAPE_ARGS="--dim 4096 --ffn 14336 --layers 32 --heads 32 --kv-heads 8 --vocab 128256 --seq-len 8192"; PARAMS_B=8.0 ;;
  *) echo "scale.sh: unknown shape '$SHAPE' (tiny, 1b, 8b)" >&2; exit 2 ;;
esac
[ -x "$S" ] || { echo "scale.sh: $S not found; run scripts/setup.sh first" >&2; exit 2; }
mkdir -p "$W"
OUT=$W/results.jsonl
: > "$OUT"
M=$W/model
if [ ! -f "$M/model.safetensors" ] || [ "$(cat "$W/shape" 2>/dev/null)" != "$SHAPE_ARGS $SEQS $SEQ_LEN" ]; then
  echo "== synth $SHAPE ($SHAPE_ARGS, bf16) into $M" >&2
  rm -rf "$M"
  # shellcheck disable=SC2086
  "$S" synth -o "$M" $SHAPE_ARGS --dtype bf16 --token-seqs "$SEQS" --token-len "$SEQ_LEN" >&2
  echo "$SHAPE_ARGS $SEQS $SEQ_LEN" > "$W/shape"
fi
TOK=$M/tokens.txt

# budget in MiB of peak RssAnon for the 8B shape, scaled by parameters for the others
budget() { # name -> MiB (0: none)
  local gb
  case $1 in
    compute_claws|compute_cats_larosa_teal_cett) gb=6 ;;
    eval_cats|ppl) gb=4 ;;
    pack_q4_0|pack_kmi4) gb=2 ;;
    run_kmi4) gb=1 ;;
    *) gb=0 ;;
  esac
  awk -v g="$gb" -v p="$PARAMS_B" 'BEGIN { printf "%d", (p > 0 ? g * 1024 * p / 8.0 : 0) }'
}

step() { # name, then the command
  local name=$1; shift
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then return 0; fi
  echo "== $name: $*" >&2
  local rc=0
  PEAKMEM_JSON=1 PEAKMEM_OUT=$W/peak_$name.json scripts/peakmem.sh "$@" > "$W/out_$name.json" || rc=$?
  python3 - "$name" "$W/peak_$name.json" "$W/out_$name.json" "$rc" "$(budget "$name")" >> "$OUT" <<'EOF'
import json, sys
name, peak, out, rc, budget = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
p = json.load(open(peak))
try:
    o = json.load(open(out))
except Exception:
    o = {}
tok_s = None
for k in ("tokens_per_second", "tok_per_s", "tokens_per_s"):
    if isinstance(o.get(k), (int, float)): tok_s = o[k]
if tok_s is None and isinstance(o.get("n_tokens"), (int, float)) and o.get("seconds"):
    tok_s = o["n_tokens"] / o["seconds"]
MiB = 1 << 20
print(json.dumps({"step": name, "rc": rc, "wall_s": p.get("wall_seconds"),
                  "peak_rss_anon_mib": p.get("peak_rss_anon_bytes", 0) / MiB,
                  "peak_vmrss_mib": p.get("peak_vm_rss_bytes", 0) / MiB, "budget_mib": budget, "tokens_per_s": tok_s,
                  "load_start": p.get("loadavg_start", [None])[0], "load_end": p.get("loadavg_end", [None])[0]}))
EOF
  [ "$rc" -eq 0 ] || echo "scale.sh: $name failed (exit $rc); see $W/out_$name.json" >&2
}

T=(--threads "$THREADS")
step compute_claws "$S" compute -m "$M" --tokens "$TOK" --ctx-size "$SEQ_LEN" --method claws -o "$W/claws.scal" "${T[@]}" --json
# TEAL's greedy allocation re-runs a layer on its sample ~100 times per projection (hours per
# layer at 8B on 2 cores): the statistics are measured here, the allocation is left out
step compute_cats_larosa_teal_cett "$S" compute -m "$M" --tokens "$TOK" --ctx-size "$SEQ_LEN" \
  --method cats,larosa,teal,cett --params teal_greedy=0 -o "$W/stats.scal" "${T[@]}" --json
step eval_cats "$S" eval -m "$M" --tokens "$TOK" --ctx-size "$SEQ_LEN" --method cats --density 0.5 "${T[@]}" --json
step ppl "$S" ppl -m "$M" --tokens "$TOK" --ctx-size "$SEQ_LEN" "${T[@]}" --json
step pack_q4_0 "$S" pack -m "$M" --layout q4_0 -o "$W/model-q4_0.spk" "${T[@]}" --json
step pack_kmi4 "$S" pack -m "$M" --layout kmi4 --calib "$W/claws.scal" --method claws --density 0.5 \
  -o "$W/model-kmi4.spk" "${T[@]}" --json
step run_kmi4 "$S" run -m "$W/model-kmi4.spk" -n 64 --temp 0 --seed 1 "${T[@]}" --json

echo
echo "| step | exit | wall s | tokens/s | peak RssAnon MiB | budget MiB | peak VmRSS MiB | load |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
python3 - "$OUT" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    b = r["budget_mib"]
    ok = "" if not b else (" (within)" if (r["peak_rss_anon_mib"] or 0) <= b else " (OVER)")
    ts = "" if r["tokens_per_s"] is None else "%.2f" % r["tokens_per_s"]
    print("| %s | %d | %.1f | %s | %.0f%s | %s | %.0f | %s -> %s |" % (r["step"], r["rc"], r["wall_s"] or 0, ts,
          r["peak_rss_anon_mib"] or 0, ok, b or "-", r["peak_vmrss_mib"] or 0, r["load_start"], r["load_end"]))
EOF
