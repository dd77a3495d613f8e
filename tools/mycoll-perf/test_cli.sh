#!/bin/sh
# CLI tests of mycoll-perf's run-time behaviour (2 ranks, host memory, tiny
# sizes). Usage: test_cli.sh MYCOLL_PERF CASE [CMAKE COMMIT_CMAKE]
#   register      -R 0/1/2 as nccl-tests takes them (1 and 2: one stderr line,
#                 nothing changes), -R 3 refused naming -B, -B/--best_of K accepted
#   commit        the -J document's metadata and the header name the build commit
#   commit_no_git commit.cmake outside a git checkout writes "unknown" (needs
#                 CMAKE and COMMIT_CMAKE)
#   no_progress   stderr not a terminal: nothing on stderr, no \r on stdout
#   progress_tty  stderr a terminal (script(1)'s pty): the progress line
#   colls         "a,b" runs those collectives in that order; an unknown or
#                 empty name in the list is refused (exit 2) naming it
# Prints "SKIP: ..." when a tool the case needs is missing.
set -eu
perf=$1
case_=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/mycoll-cli.XXXXXX")
trap 'rm -rf "$dir"' EXIT
run() {  # run NAME ARGS...: stdout to $dir/NAME.out, stderr to $dir/NAME.err, status to $rc
  name=$1
  shift
  rc=0
  "$perf" all_reduce --np 2 -b 8 -e 4K -f 8 -n 2 -w 0 "$@" > "$dir/$name.out" 2> "$dir/$name.err" ||
    rc=$?
}
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
  exit 1
}

case $case_ in
  register)
    for v in 0 1 2; do
      run r$v -R "$v"
      [ "$rc" = 0 ] || fail "-R $v: exit status $rc"
      grep -q "^# Out of bounds values : 0 OK" "$dir/r$v.out" || fail "-R $v: no clean table"
    done
    [ ! -s "$dir/r0.err" ] || fail "-R 0 wrote to stderr"
    for v in 1 2; do
      [ "$(wc -l < "$dir/r$v.err")" = 1 ] || fail "-R $v: not exactly one stderr line"
      grep -q -- "-R $v .*changes nothing: mycoll has no buffer registration" "$dir/r$v.err" ||
        fail "-R $v: stderr does not say registration changes nothing"
    done
    run long --local_register=1
    [ "$rc" = 0 ] && grep -q "changes nothing" "$dir/long.err" || fail "--local_register=1"
    run r3 -R 3
    [ "$rc" = 2 ] || fail "-R 3 (the old best-of spelling): exit status $rc, want 2"
    grep -q "the fastest of K batches is -B K" "$dir/r3.err" || fail "-R 3: no hint naming -B"
    run best -B 2
    [ "$rc" = 0 ] && grep -q " -B 2 " "$dir/best.out" || fail "-B 2"
    run bestlong --best_of 3
    [ "$rc" = 0 ] && grep -q " -B 3 " "$dir/bestlong.out" || fail "--best_of 3"
    ;;
  commit)
    run doc -J "$dir/r.json" -B 2
    [ "$rc" = 0 ] || fail "-J run: exit status $rc"
    pattern='[0-9a-f]{4,40}(-dirty)?|unknown'
    grep -Eq "\"commit\": \"($pattern)\"" "$dir/r.json" || fail "no commit in -J metadata"
    commit=$(sed -n 's/.*"commit": "\([^"]*\)".*/\1/p' "$dir/r.json")
    grep -q "^# mycoll-perf (nccl-tests style): .*, commit $commit, host memory" "$dir/doc.out" ||
      fail "the header does not name commit $commit"
    grep -q '"best_of": 2, "local_register": 0' "$dir/r.json" || fail "no best_of/local_register"
    ;;
  commit_no_git)
    cmake=$3
    script_=$4
    mkdir "$dir/src"
    # A tarball unpacked anywhere, even inside a git checkout: not its top level.
    "$cmake" -DSOURCE_DIR="$dir/src" -DOUT="$dir/c.cc" -P "$script_" ||
      fail "commit.cmake failed outside git"
    grep -q 'return "unknown";' "$dir/c.cc" || fail "commit.cmake outside git: not \"unknown\""
    ;;
  no_progress)
    "$perf" all --np 2 -b 8 -e 4K -f 8 -n 1 -w 0 > "$dir/all.out" 2> "$dir/all.err" ||
      fail "run failed"
    [ ! -s "$dir/all.err" ] || fail "stderr is not a terminal, yet mycoll-perf wrote to it"
    if grep -q "$(printf '\r')" "$dir/all.out"; then fail "a carriage return on stdout"; fi
    ;;
  progress_tty)
    command -v script > /dev/null 2>&1 || { echo "SKIP: script(1) not found"; exit 0; }
    # stdout to a file, stderr to script's pty: what reaches the pty is the progress.
    script -qec "'$perf' all_reduce --np 2 -b 8 -e 4K -f 8 -n 1 -w 0 > '$dir/tty.out'" \
      /dev/null > "$dir/tty.log" 2>&1 < /dev/null || fail "run under script(1) failed"
    grep -q "all_reduce 8 B (1/4)" "$dir/tty.log" || fail "no progress line on a terminal"
    grep -q "all_reduce 4 KiB (4/4)" "$dir/tty.log" || fail "progress does not reach 4/4"
    if grep -q "(1/4)" "$dir/tty.out"; then fail "progress reached stdout"; fi
    ;;
  colls)
    "$perf" sendrecv,all_reduce,sendrecv --np 2 -b 8 -e 64 -f 8 -n 2 -w 0 > "$dir/list.out" \
      2> "$dir/list.err" || fail "sendrecv,all_reduce,sendrecv: exit status $?"
    order=$(sed -n 's/^# \([a-z_]*\)$/\1/p' "$dir/list.out" | tr '\n' ' ')
    [ "$order" = "sendrecv all_reduce sendrecv " ] || fail "tables in order '$order'"
    [ "$(grep -c '^ *64 ' "$dir/list.out")" = 3 ] || fail "not one 64 B row per table"
    grep -q "^# Out of bounds values : 0 OK" "$dir/list.out" || fail "list: no clean result"
    for bad in all_reduce,bogus all_reduce, ,sendrecv; do
      rc=0
      "$perf" "$bad" --np 2 -b 8 -e 8 -n 1 -w 0 > "$dir/bad.out" 2> "$dir/bad.err" || rc=$?
      [ "$rc" = 2 ] || fail "'$bad': exit status $rc, want 2"
      name=${bad#all_reduce,}
      name=${name%,sendrecv}
      grep -q "unknown collective '$name'" "$dir/bad.err" || fail "'$bad': error does not name '$name'"
    done
    ;;
  *)
    echo "test_cli.sh: unknown case $case_" >&2
    exit 2
    ;;
esac
echo "$case_: OK"
