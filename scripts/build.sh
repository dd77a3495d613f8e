#!/usr/bin/env bash
# Configures and builds mycoll into ${BUILD_DIR:-build} (Release with debug info).
#   scripts/build.sh [CMAKE_ARGS...]   TARGETS="a b" builds only those ninja targets.
# Prints CMake's summary of what was enabled (CUDA, UCX, verbs, MPI, nccl.h);
# CMake's whole output is in $BUILD_DIR/cmake-configure.log (shown on failure).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
build=${BUILD_DIR:-build}
mkdir -p "$build"
log="$build/cmake-configure.log"
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >"$log" 2>&1; then
  cat "$log" >&2
  echo "build.sh: CMake failed (log: $log)" >&2
  exit 1
fi
sed -n 's/^-- mycoll summary: /  /p' "$log"
# shellcheck disable=SC2086
ninja -C "$build" -j "${JOBS:-$(nproc)}" ${TARGETS:-}
