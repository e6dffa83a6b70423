# Reproduction settings for the shipped model (included by scripts/repro/Makefile;
# pick another file with CONFIG=configs/NAME.mk, or override any variable on the
# make command line, e.g. make -C scripts/repro MODEL=... TOK=... CALIB=a.txt EVAL=b.txt).
MODEL     ?= $(ASSETS)/models/stories260K.bin
# empty TOK: the tokenizer the model carries (GGUF vocabulary, tokenizer.json beside an HF dir)
TOK       ?= $(ASSETS)/models/tok512.bin
# CALIB and EVAL (calibration and evaluation text) default to a split of TEXT by
# documents: the first NCALIB documents calibrate (SEQS of them), the rest evaluate.
TEXT      ?= $(ASSETS)/text/tinystories_valid_a.txt
NCALIB    ?= 2000
SEQS      ?= 400
# Settings that land target-driven methods at a density are chosen on the first
# TUNE_DOCS documents of the calibration text, never on the evaluation text.
TUNE_DOCS ?= 100

# --- density sweep (the CLAWS paper Table 6, Figure 2) ----------------------------------
DENSITIES ?= 0.3 0.4 0.5 0.6 0.7
# MLP neuron routers: --density is the fraction of MLP neurons kept per token
NEURON_METHODS ?= cats cats-threshold griffin-prefill claws oracle
# input-side methods that take --density directly (parameter-weighted accounting)
DIRECT_METHODS ?= larosa teal teal-greedy
# methods whose density is reached through a tuned setting:
#   larosa-grid  LaRoSA with the split chosen by its own grid search (grid=1) on the tuning text
#   cett, clada  CETT target (CLADA at CLADA_SWEEP_PARAMS) interpolated from MAP_GRID_cett/clada
#   cwic         CWIC APR (CWIC_SWEEP_PARAMS, 16-row stripes) interpolated from MAP_GRID_cwic
TUNED_METHODS ?= larosa-grid cett clada cwic
LAROSA_GRID_SEQS ?= 32
CLADA_SWEEP_PARAMS ?= lambda=0.8,gamma=0.12
CWIC_SWEEP_PARAMS ?= stripe=16
# the grids measured on the tuning text; the sweep interpolates the setting for each density
MAP_GRID_cett  ?= 0.04 0.07 0.11 0.15 0.2 0.25 0.3 0.36 0.44
MAP_GRID_clada ?= 0.03 0.06 0.1 0.14 0.19 0.24 0.29 0.35 0.42
MAP_GRID_cwic  ?= 1.2 1.35 1.5 1.65 1.8 2 2.2 2.45 2.7 3

# --- CETT, CLADA, TEAL, CWIC tables ------------------------------------------------
CETT_TARGETS ?= 0.02 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.5
CLADA_TARGET ?= 0.2
# lambda:gamma pairs, both signs (0:0 is CETT itself)
CLADA_LG ?= 0.8:0.12 0.8:-0.12 0.8:0 0.4:0.06 0:0.12 0:0 0:-0.12 -0.4:-0.06 -0.8:0.12 -0.8:0 -0.8:-0.12
# TEAL at sparsity 1 - density: 0.25 0.4 0.5 0.6
TEAL_DENSITIES ?= 0.75 0.6 0.5 0.4
CWIC_RUNS ?= apr=1.33 apr=1.67 apr=2 apr=2.5 apr=1.33,dist=laplace apr=1.67,dist=laplace \
  apr=2,dist=laplace apr=2.5,dist=laplace apr=2,stripe=16 apr=2,stripe=16,dist=laplace apr=2,stats=ema

# --- diagnostics (the CLAWS paper Tables 5, 7) --------------------------------------------
DIAG_DOCS ?= 200

# --- kernels (timings; not deterministic) ------------------------------------------
# the CLAWS paper Tables 3, 9-11: the Gemma-4-E2B down projection, random and clustered live sets
BENCH_DIMS     ?= 6144:1536
BENCH_SPARSITY ?= 0.3,0.5,0.6,0.7
BENCH_THREADS  ?= 1,2
BENCH_RUNS     ?= 1
BENCH_PASSES   ?= 20
BENCH_WARMUP   ?= 3
# the SpQt paper Figures 8-9: down projections (ffn -> dim) of Llama-3-8B, Llama-2-13B, Llama-2-70B
LLAMA_DIMS     ?= 14336:4096 13824:5120 28672:8192
LLAMA_SPARSITY ?= 0.25,0.4,0.5
LLAMA_LAYERS   ?= 8
LLAMA_MEM_GIB  ?= 4
LLAMA_PASSES   ?= 20
# 1 thread: at 2 threads a shared 2-core machine turns these long GEMVs into scheduler ticks
LLAMA_THREADS  ?= 1

# --- decode (sparsecal run) ----------------------------------------------------------
# routers timed on the packed shipped model; run --method must accept each. larosa (a
# binary whose run and pack have --method larosa) runs on its own folded artifact in LAROSA_LAYOUT
DECODE_METHODS ?= dense cats claws cats-threshold cett clada larosa
LAROSA_LAYOUT  ?= zigzag
DECODE_DENSITY ?= 0.5
DECODE_LAYOUT  ?= kmi4
DECODE_STEPS   ?= 256
DECODE_THREADS ?= 1 2
DECODE_REPS    ?= 3
# a synthetic model of paper-like MLP width, packed with and without --permute
SYNTH_ARGS     ?= --dim 2048 --ffn 8192 --layers 4 --vocab 32000
# (larosa here adds a larosa calibration of the synthetic model and its folded artifact)
SYNTH_METHODS  ?= dense cats larosa
SYNTH_STEPS    ?= 128
SYNTH_CALIB_SEQS ?= 2
SYNTH_CALIB_LEN  ?= 256

# --- recovery training (make train, docs/TRAIN.md) --------------------------------------
TRAIN_METHODS   ?= claws-lora cats-lora
TRAIN_DENSITIES ?= 0.3 0.5
# the paper's lr (1e-5) is for 2,500 steps on a 2B model; 400 steps on this model need more
TRAIN_ARGS      ?= -n 400 --batch 8 --lr 3e-3 --shuffle-seed 1 --seed 1
# CWIC threshold learning: APR target 2 in 16-row stripes (the sweep's CWIC stripes), 300 steps;
# the training-free fit is evaluated at these APR targets and interpolated at the learned APR
TRAIN_CWIC_ARGS ?= --apr 2 --stripe 16 -n 300 --batch 8 --lr 3e-3 --shuffle-seed 1 --seed 1
TRAIN_CWIC_FIT  ?= 1.5 1.6 1.7 1.8
TRAIN_CWIC_FIT_PARAMS ?= stripe=16
# what trains beside theta in the learned rows (train --train): theta only, + LoRA on W_d, + every linear weight
TRAIN_CWIC_TRAIN ?= thresholds lora all
