#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build only what
# the ring all-reduce example needs, and run it with 4 local ranks (NP=...
# to change). ALL=1 builds everything else afterwards (tests, tools).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
TARGETS=ring_allreduce scripts/build.sh
rc=0
"${BUILD_DIR:-build}/examples/ring_allreduce/ring_allreduce" --np "${NP:-4}" --count "${COUNT:-1000003}" || rc=$?
if [ "${ALL:-0}" = 1 ]; then
  echo "run-example.sh: building the rest (ALL=1)"
  scripts/build.sh
else
  echo "run-example.sh: built the example only; ALL=1 $0 (or scripts/build.sh) builds the rest"
fi
exit $rc
