#!/usr/bin/env bash
# Installs what sparsecal needs from Debian 12 packages (only what is
# missing), then configures and builds it.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config libcjson-dev libopenblas-dev liblapacke-dev libzstd-dev libxxhash-dev
      libpcre2-dev libutf8proc-dev)
# ARM kernels are cross-compiled and tested under qemu-user; gnuplot draws the plots.
PKGS+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gnuplot-nox)
# OpenMPI: `mpirun -n N sparsecal compute` (optional at build time; CMake finds it).
PKGS+=(libopenmpi-dev openmpi-bin)
# the Python module (python/sparsecal: ctypes over libsparsert) and its tests
PKGS+=(python3 python3-numpy)
# the libFuzzer harnesses (tests/fuzz, scripts/fuzz.sh) build with clang and its fuzzer runtime
PKGS+=(clang libclang-rt-14-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

BUILD=${1:-build}
shift || true
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >&2
