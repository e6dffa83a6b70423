#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz (clang, AddressSanitizer + UBSan).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Default: 600 s per target, every target (scal spk gguf safetensors tokbin tokjson spmodel data llama2c hfdir lora).
# .ci/run calls it with a short time as a smoke run. It builds build-fuzz/
# (CC=clang, -DSC_FUZZ=ON), makes seed corpora (scripts/fuzz_seeds.sh, from an
# ordinary build in build/, made if missing) and keeps the growing corpora in
# fuzz-out/corpus/<target>/. A crash leaves fuzz-out/crashes/<target>-crash-*
# and a non-zero exit: minimise it (build-fuzz/fuzz_<target> -minimize_crash=1
# FILE), fix the bug, and add the file to tests/hostile/<target>/, which the
# normal test suite replays (test replay_<target>).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-600}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(scal spk gguf safetensors tokbin tokjson spmodel data llama2c hfdir lora)
export SPARSECAL_ASSETS=${SPARSECAL_ASSETS:-$(cd .. && pwd)/shared/assets}
command -v clang >/dev/null || { echo "fuzz: clang not found (scripts/setup.sh installs it)" >&2; exit 1; }
JOBS=$(nproc)

[ -x build/sparsecal ] && [ -x build/test_gguf ] || scripts/setup.sh build
CC=clang cmake -S . -B build-fuzz -DSC_FUZZ=ON -DSC_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$JOBS" --target fuzz_all >&2

OUT=fuzz-out
mkdir -p "$OUT/crashes"
rm -rf "$OUT/seeds"
scripts/fuzz_seeds.sh build "$OUT/seeds"
# one fuzzer per core at a time (each is one single-threaded process): the smoke run in CI takes
# SECS x targets / cores instead of SECS x targets
fuzz_one() {
  local t=$1
  mkdir -p "$OUT/corpus/$t"
  # -max_len: the largest seed (a packed artifact or a GGUF with its vocabulary) must fit whole
  if ! build-fuzz/fuzz_"$t" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2560 -max_len=1500000 \
      -print_final_stats=1 -artifact_prefix="$OUT/crashes/$t-" "$OUT/corpus/$t" "$OUT/seeds/$t" \
      >"$OUT/fuzz_$t.log" 2>&1; then
    echo "fuzz_$t FAILED: see $OUT/fuzz_$t.log and $OUT/crashes/" >&2
    tail -30 "$OUT/fuzz_$t.log" >&2
    touch "$OUT/failed_$t"
  fi
}
rm -f "$OUT"/failed_*
for t in "${TARGETS[@]}"; do
  echo "== fuzz_$t for ${SECS} s"
  fuzz_one "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
wait
fail=0
for t in "${TARGETS[@]}"; do
  [ -e "$OUT/failed_$t" ] && fail=1
  echo "fuzz_$t: $(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$OUT/fuzz_$t.log" | tr '\n' ' ')"
done
exit $fail
