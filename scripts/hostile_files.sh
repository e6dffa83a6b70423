#!/usr/bin/env bash
# Writes the hand-made regression inputs of tests/hostile/<target>/ (replayed by
# the normal suite through the fuzz harness of that name, test replay_<target>).
# Crashes found by scripts/fuzz.sh are added there as the files libFuzzer wrote.
#   scripts/hostile_files.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p tests/hostile/tokbin

# issue 16 item 4: a tokenizer.bin whose 512 pieces are all empty (the tokenizer computed NULL + 0);
# fuzz_tokbin's input: two bytes of (vocabulary size - 1), then the file
{
  printf '\xff\x01'                 # vocabulary 512
  printf '\x01\x00\x00\x00'         # max_token_length 1
  for _ in $(seq 512); do printf '\x00\x00\x00\x00\x00\x00\x00\x00'; done # score 0.0, length 0
} >tests/hostile/tokbin/all_pieces_empty.bin
