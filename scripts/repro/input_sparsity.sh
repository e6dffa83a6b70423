#!/bin/sh
# TEAL and CWIC on the shipped model (docs/INPUT_SPARSITY.md): now the `teal` and `cwic`
# targets of scripts/repro/Makefile; this wrapper runs them and prints both tables.
#   scripts/repro/input_sparsity.sh [BUILD_DIR]
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
B=${1:-$HERE/../../build}
make -C "$HERE" BUILD="$(realpath -m "$B")" teal cwic >&2
cat "$HERE/../../docs/results/teal.md" "$HERE/../../docs/results/cwic.md"
