#!/usr/bin/env bash
# The sanitizer stage of CI (scripts/test.sh runs it after the main suite;
# docs/reliability.md says what it covers and what it costs). Host only
# (no CUDA), clang, each build in its own directory:
#   asan  ASan + UBSan (every UBSan error fatal): the unit, e2e and e2e_netns
#         labels (e2e_netns: ranks on several "hosts" in network namespaces,
#         over sockets and UCX), and the wire fuzz target (tests/fuzz) for
#         FUZZ_SECONDS (default 60) from its committed corpus; then the verbs
#         suite (tests/rdma) inside the Soft-RoCE VM (NO_SOFTROCE=1 skips it)
#   tsan  TSan: the unit, e2e and e2e_netns labels (TSAN_FILTER=REGEX, as
#         ctest -R, narrows it for a quick local run, and skips the VM);
#         then the verbs suite inside the Soft-RoCE VM (NO_SOFTROCE=1 skips it)
# STAGES="asan tsan" picks stages; BUILD_PREFIX (default build-) names the
# directories (build-asan, build-tsan); JOBS, TEST_JOBS as in test.sh.
# Any sanitizer report fails the stage, also one from a forked rank whose
# exit code its test ignores: every process writes its reports to
# <build>/sanitizer-logs/, which must stay empty.
set -euo pipefail
cd "$(dirname "$0")/.."

# Packaging tests check the plain build (installed files, NEEDED entries, a
# libucs that does not load), not code: a sanitizer build has nothing to
# add there and links the sanitizer runtimes, which they rightly refuse.
NOT_HERE='^(install_consumer|library_needed|ucx_absent_at_run_time|nccl_exports)$'

stage_build() {  # dir, cmake args...
  local dir=$1
  shift
  local log="$dir/cmake-configure.log"
  mkdir -p "$dir"
  if ! CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMYCOLL_ENABLE_CUDA=OFF -DMYCOLL_BUILD_TOOLS=OFF "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "sanitize.sh: CMake failed in $dir" >&2
    return 1
  fi
  sed -n 's/^-- mycoll summary: build /  /p' "$log"
}

# Prints every report in a log directory; false when there was one.
no_reports() {  # logs dir, what ran
  compgen -G "$1/*" >/dev/null || return 0
  echo "sanitize.sh: sanitizer reports from $2 (the process id ends each file name):" >&2
  for f in "$1"/*; do
    echo "==== $f" >&2
    head -c 20000 "$f" >&2
  done
  return 1
}

# Runs ctest in dir with args; fails on a failed test or on any report in
# the sanitizer logs.
stage_test() {  # dir, ctest args...
  local dir=$1
  shift
  local logs="$dir/sanitizer-logs"
  rm -rf "$logs"
  mkdir -p "$logs"
  local rc=0
  (cd "$dir" && ctest --output-on-failure --timeout 900 \
      -j "${TEST_JOBS:-2}" "$@") || rc=$?
  no_reports "$logs" "$dir" || rc=1
  return $rc
}

# Every ASan and UBSan error is fatal (halt_on_error), leaks are reported
# at exit, TSan reports every race and goes on (the test fails on the log
# file); every report is a file in the stage's log directory, report.PID
# (one log_path for all: the runtimes of a process share it, the last
# variable read wins). No suppressions: nothing has needed one
# (docs/reliability.md).
export_sanitizer_env() {  # logs dir
  local log=$1/report
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:log_path=$log"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$log"
  export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:die_after_fork=0:log_path=$log"
}

# The verbs suite (tests/rdma) under a sanitizer inside the Soft-RoCE VM
# (scripts/softroce/softroce.sh, the rdma_softroce test's VM): the guest
# sees the host's / read-only and its own /tmp, so the binary and the
# report directory live in the VM's work directory, which it shares
# read-write. Fails on a failed test, a VM that gives no result, or any
# report.
vm_rdma() {  # build dir, stage name (asan, tsan)
  local dir=$1 stage=$2 work=/var/tmp/mycoll-softroce
  local logs=$work/$stage-logs-$$ bin=$work/bin/mycoll_rdma_tests_$stage rc=0 opts
  case $stage in
    asan) opts="ASAN_OPTIONS='halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:log_path=$logs/report' UBSAN_OPTIONS='halt_on_error=1:print_stacktrace=1:log_path=$logs/report'" ;;
    tsan) opts="TSAN_OPTIONS='halt_on_error=0:second_deadlock_stack=1:die_after_fork=0:log_path=$logs/report'" ;;
  esac
  rm -rf "$logs"
  mkdir -p "$logs" "$work/bin" && cp -f "$dir/tests/mycoll_rdma_tests" "$bin" || return 1
  SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-1200} scripts/softroce/softroce.sh -w "$work" -- /bin/bash -c \
    "export $opts; exec $bin --gtest_brief=1" || rc=$?
  [ $rc -eq 0 ] || echo "sanitize.sh: the verbs suite under $stage in the Soft-RoCE VM failed (exit $rc)" >&2
  no_reports "$logs" "the verbs suite under $stage in the Soft-RoCE VM" || rc=1
  rm -rf "$logs" "$bin"
  return $rc
}

prefix=${BUILD_PREFIX:-build-}
jobs=${JOBS:-$(nproc)}
rc=0
for stage in ${STAGES:-asan tsan}; do
  t0=$(date +%s)
  dir="$prefix$stage"
  echo "sanitize.sh: stage $stage in $dir"
  case $stage in
    asan)
      stage_build "$dir" -DMYCOLL_SANITIZE=address,undefined -DMYCOLL_FUZZ=ON \
        -DMYCOLL_FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
      ninja -C "$dir" -j "$jobs" mycoll_unit_tests mycoll_e2e_tests mycoll_netns_tests \
        mycoll_rdma_tests mycoll_fuzz_wire mycoll_nccl nccl_api_test
      t1=$(date +%s)
      export_sanitizer_env "$(pwd)/$dir/sanitizer-logs"
      stage_test "$dir" -L '^(unit|e2e|e2e_netns|fuzz)$' -E "$NOT_HERE" || rc=1
      [ -n "${NO_SOFTROCE:-}" ] || vm_rdma "$dir" asan || rc=1
      ;;
    tsan)
      stage_build "$dir" -DMYCOLL_SANITIZE=thread
      ninja -C "$dir" -j "$jobs" mycoll_unit_tests mycoll_e2e_tests mycoll_netns_tests mycoll_nccl \
        nccl_api_test mycoll_rdma_tests
      t1=$(date +%s)
      export_sanitizer_env "$(pwd)/$dir/sanitizer-logs"
      stage_test "$dir" -L '^(unit|e2e|e2e_netns)$' -E "$NOT_HERE" ${TSAN_FILTER:+-R "$TSAN_FILTER"} || rc=1
      [ -n "${NO_SOFTROCE:-}" ] || [ -n "${TSAN_FILTER:-}" ] || vm_rdma "$dir" tsan || rc=1
      ;;
    *)
      echo "sanitize.sh: unknown stage '$stage' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  t2=$(date +%s)
  echo "sanitize.sh: stage $stage took $((t2 - t0)) s (build $((t1 - t0)) s, tests $((t2 - t1)) s)"
done
exit $rc
