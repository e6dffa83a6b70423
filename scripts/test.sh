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

# The numerics tests again under other kernel choices: OpenBLAS picks its
# kernel set from the CPU (Cooperlake/SkylakeX on AVX-512 machines, Haswell on
# AVX2 ones, or whatever OPENBLAS_CORETYPE forces), and the runtime picks its
# ISA (SPARSECAL_ISA forces one). Every test must hold under each: the default
# set, Haswell (or Sandybridge when the CPU's own set is Haswell), times every
# runtime ISA this CPU can run. `sparsecal --version` names both.
echo "== numerics tests under every OpenBLAS kernel set x runtime ISA"
build/sparsecal --version
native_core=$(env -u OPENBLAS_CORETYPE build/sparsecal --version | sed -n 's/^blas .*, \([A-Za-z0-9]*\) kernels .*/\1/p')
second_core=Haswell
[ "$native_core" = Haswell ] && second_core=Sandybridge
isas=$(build/sparsecal --version | sed -n 's/^kernels *\(.*\) available;.*/\1/p')
for core in "" "$second_core"; do
  for isa in $isas; do
    echo "-- OPENBLAS_CORETYPE=${core:-<unset: $native_core>} SPARSECAL_ISA=$isa"
    if [ -z "$core" ]; then set -- env -u OPENBLAS_CORETYPE; else set -- env OPENBLAS_CORETYPE="$core"; fi
    "$@" SPARSECAL_ISA="$isa" ctest --test-dir build -L numerics --output-on-failure -j"$JOBS"
  done
done

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
