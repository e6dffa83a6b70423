#!/usr/bin/env bash
# Builds sparsecal twice (optimised, and with AddressSanitizer +
# UndefinedBehaviorSanitizer) and runs every test in both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPARSECAL_ASSETS=${SPARSECAL_ASSETS:-$(cd .. && pwd)/shared/assets}
JOBS=$(nproc)

scripts/setup.sh build
echo "== tests (release build)"
ctest --test-dir build --output-on-failure -j"$JOBS"

scripts/setup.sh build-asan -DSC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer build)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$JOBS"

# ARM (aarch64) kernels: cross-compiled and run under qemu-user. This proves
# correctness only; qemu timings mean nothing.
if [ -x scripts/test_arm.sh ]; then
  echo "== ARM kernel tests (aarch64 under qemu-user)"
  scripts/test_arm.sh
fi
