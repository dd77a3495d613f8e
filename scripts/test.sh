#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build, and run the
# whole test suite with ctest (GPU tests skip where no GPU exists).
# LABEL=unit|e2e|gpu|example restricts to one label.
# Then the sanitizer stage (scripts/sanitize.sh: ASan + UBSan with the wire
# fuzz target, TSan), by default only under CI (CI=true); SANITIZE=1 runs it
# anywhere, SANITIZE=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
sanitize=${SANITIZE:-$([ -n "${CI:-}" ] && [ "${CI}" != false ] && echo 1 || echo 0)}
args=(--output-on-failure --timeout 1800 -j "${TEST_JOBS:-2}")
[ -n "${LABEL:-}" ] && args+=(-L "$LABEL")
rc=0
t0=$(date +%s)
(cd "${BUILD_DIR:-build}" && ctest "${args[@]}") || rc=$?
echo "test.sh: ctest took $(($(date +%s) - t0)) s"
if [ "$sanitize" = 1 ]; then
  scripts/sanitize.sh || rc=1
fi
exit $rc
