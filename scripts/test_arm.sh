#!/usr/bin/env bash
# Cross-compiles the runtime's kernels (libc, libm and pthreads only) and the
# kernel tests for aarch64 with Debian's gcc-aarch64-linux-gnu, then runs the
# tests under qemu-user on three CPUs: qemu's "max" (NEON, dotprod and i8mm, so
# the scalar, neon, dotprod and i8mm tables are all exercised), a Cortex-A76
# (dotprod without i8mm) and a Cortex-A72 (NEON without dotprod), and checks
# that detection offers exactly the ISAs each CPU has. This checks correctness
# only: qemu timings mean nothing.
#   scripts/test_arm.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build-arm}
CC=${CC_AARCH64:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
for tool in "$CC" "$QEMU"; do
  command -v "$tool" >/dev/null || { echo "test_arm: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done
mkdir -p "$OUT"

CFLAGS=(-std=c11 -O2 -g -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Werror
        -Ikernels -Itests/support)
RUNTIME=(kernels/srt_cpu.c kernels/srt_core.c kernels/srt_pool.c kernels/srt_layout.c kernels/srt_gemv.c
         kernels/srt_select.c kernels/ref/ref_kernels.c kernels/arm/gemv_neon.c kernels/arm/kmi4_neon.c)
objs=()
for src in "${RUNTIME[@]}"; do
  obj="$OUT/$(basename "${src%.c}").o"
  extra=()
  [[ $src == kernels/ref/* ]] && extra=(-ffp-contract=off)
  "$CC" "${CFLAGS[@]}" "${extra[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
# the dotprod and i8mm files alone get their ISA flags (as CMakeLists.txt sets them)
"$CC" "${CFLAGS[@]}" -march=armv8.2-a+dotprod -c kernels/arm/kmi4_dotprod.c -o "$OUT/kmi4_dotprod.o"
"$CC" "${CFLAGS[@]}" -march=armv8.2-a+dotprod+i8mm -c kernels/arm/rows_i8mm.c -o "$OUT/rows_i8mm.o"
objs+=("$OUT/kmi4_dotprod.o" "$OUT/rows_i8mm.o")
"$CC" "${CFLAGS[@]}" -c tests/support/testing.c -o "$OUT/testing.o"

for t in tests/test_kernels.c tests/test_kernels_layouts.c tests/test_prefetch.c; do
  "$CC" "${CFLAGS[@]}" "$t" "$OUT/testing.o" "${objs[@]}" -lm -lpthread -o "$OUT/$(basename "${t%.c}")"
done
# every (test, CPU) run under qemu, one per core at a time (qemu-user runs each test's threads on the
# host's; the runs are independent), then their outputs in order
runs=()
for name in test_kernels test_kernels_layouts test_prefetch; do
  for cpu in max cortex-a76 cortex-a72; do
    runs+=("$name $cpu")
    if SRT_TEST_QUICK=1 "$QEMU" -cpu "$cpu" -L "$SYSROOT" "$OUT/$name" >"$OUT/$name.$cpu.log" 2>&1; then
      echo 0
    else
      echo 1
    fi >"$OUT/$name.$cpu.rc" &
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  done
done
wait
fail=0
for r in "${runs[@]}"; do
  read -r name cpu <<<"$r"
  echo "== $name (aarch64, qemu -cpu $cpu)"
  cat "$OUT/$name.$cpu.log"
  [ "$(cat "$OUT/$name.$cpu.rc")" = 0 ] || fail=1
  # test_kernels names the ISAs detection offers: exactly those of the CPU
  case $cpu in
    max) want="scalar neon dotprod i8mm" ;;
    cortex-a76) want="scalar neon dotprod" ;;
    *) want="scalar neon" ;;
  esac
  if [[ $name == test_kernels ]] && ! grep -qx "cpu: .*; ISAs: $want" "$OUT/$name.$cpu.log"; then
    echo "test_arm: on $cpu detection should offer exactly: $want" >&2
    fail=1
  fi
done
exit $fail
