#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build, and run the
# whole test suite with ctest (GPU tests skip where no GPU exists).
# LABEL=unit|e2e|gpu|example restricts to one label.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
args=(--output-on-failure --timeout 1800 -j "${TEST_JOBS:-2}")
[ -n "${LABEL:-}" ] && args+=(-L "$LABEL")
exec ctest "${args[@]}"
