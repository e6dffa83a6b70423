#!/usr/bin/env bash
# Builds sparsecal twice (optimised, and with AddressSanitizer +
# UndefinedBehaviorSanitizer) and runs every test in both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPARSECAL_ASSETS=${SPARSECAL_ASSETS:-$(cd .. && pwd)/shared/assets}
JOBS=$(nproc)

scripts/setup.sh build

# OpenBLAS 0.3.21 does not know every new CPU: on an Emerald Rapids it picks Prescott's SSE3
# kernels. sparsecal then runs with the widest set the CPU takes (cli_blas_fix_kernels; --version
# says "set by sparsecal"), but the test binaries link OpenBLAS without that step, so with
# OPENBLAS_CORETYPE unset they would test (slowly) a kernel set sparsecal never uses. Unset, the
# tests get what sparsecal would choose (auto); the release and sanitizer runs obey a set
# OPENBLAS_CORETYPE as given (here), the numerics runs below take auto and the second set.
native_core=$(env -u OPENBLAS_CORETYPE build/sparsecal --version | sed -n 's/^blas .*, \([A-Za-z0-9]*\) kernels .*/\1/p')
auto=(env -u OPENBLAS_CORETYPE)
if env -u OPENBLAS_CORETYPE build/sparsecal --version | grep -q '^blas .*(set by sparsecal'; then
  auto=(env OPENBLAS_CORETYPE="$native_core")
fi
here=("${auto[@]}")
[ -n "${OPENBLAS_CORETYPE:-}" ] && here=(env OPENBLAS_CORETYPE="$OPENBLAS_CORETYPE")

echo "== tests (release build)"
"${here[@]}" ctest --test-dir build --output-on-failure -j"$JOBS"

# The numerics tests again under other kernel choices: OpenBLAS picks its
# kernel set from the CPU (Cooperlake/SkylakeX on AVX-512 machines, Haswell on
# AVX2 ones, or whatever OPENBLAS_CORETYPE forces), and the runtime picks its
# ISA (SPARSECAL_ISA forces one). Every test must hold under each: every
# runtime ISA this CPU can run with the default set (as sparsecal would run it:
# see above), then Haswell (or Sandybridge when the CPU's own set is Haswell)
# with the best ISA. The two choices touch different code (calibration's BLAS
# products, the runtime's kernels), so each is varied with the other held.
# `sparsecal --version` names both.
echo "== numerics tests under every OpenBLAS kernel set and every runtime ISA"
build/sparsecal --version
second_core=Haswell
[ "$native_core" = Haswell ] && second_core=Sandybridge
isas=$(build/sparsecal --version | sed -n 's/^kernels *\(.*\) available;.*/\1/p')
best_isa=${isas##* }
for isa in $isas; do
  echo "-- OPENBLAS_CORETYPE=<unset: $native_core> SPARSECAL_ISA=$isa"
  "${auto[@]}" SPARSECAL_ISA="$isa" ctest --test-dir build -L numerics --output-on-failure -j"$JOBS"
done
echo "-- OPENBLAS_CORETYPE=$second_core SPARSECAL_ISA=$best_isa"
OPENBLAS_CORETYPE="$second_core" SPARSECAL_ISA="$best_isa" ctest --test-dir build -L numerics --output-on-failure -j"$JOBS"

scripts/setup.sh build-asan -DSC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer build)"
"${here[@]}" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$JOBS"

# ARM (aarch64) kernels: cross-compiled and run under qemu-user. This proves
# correctness only; qemu timings mean nothing.
if [ -x scripts/test_arm.sh ]; then
  echo "== ARM kernel tests (aarch64 under qemu-user)"
  scripts/test_arm.sh
fi
