# Reproduction settings for the shipped model (included by scripts/repro/Makefile;
# pick another file with CONFIG=configs/NAME.mk, or override any variable on the
# make command line).
MODEL     ?= $(ASSETS)/models/stories260K.bin
TOK       ?= $(ASSETS)/models/tok512.bin
TEXT      ?= $(ASSETS)/text/tinystories_valid_a.txt
# the first NCALIB documents calibrate (SEQS of them), the rest evaluate
NCALIB    ?= 2000
SEQS      ?= 400
DENSITIES ?= 0.3 0.4 0.5 0.6 0.7
NEURON_METHODS ?= cats cats-threshold griffin-prefill claws oracle
