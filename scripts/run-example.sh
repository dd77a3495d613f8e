#!/usr/bin/env bash
# One command on a fresh machine: install what is missing, build, and run
# the ring all-reduce example with 4 local ranks (NP=... to change).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec "${BUILD_DIR:-build}/examples/ring_allreduce/ring_allreduce" --np "${NP:-4}" --count "${COUNT:-1000003}"
