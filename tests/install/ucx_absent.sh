#!/bin/sh
# One binary serves hosts with and without UCX: with a libucs/libucp that
# cannot be loaded first on the search path (what a host without UCX looks
# like to dlopen), the library still loads and runs over shm, and
# MYCOLL_TRANSPORT=ucx fails at init saying what to install.
#   ucx_absent.sh path/to/ring_allreduce
set -e
example=$1
fake=$(mktemp -d); trap 'rm -rf "$fake"' EXIT
echo "not a library" >"$fake/libucs.so.0"
cp "$fake/libucs.so.0" "$fake/libucp.so.0"
LD_LIBRARY_PATH="$fake" MYCOLL_TIMEOUT=60 "$example" --np 2 --count 100 >"$fake/ok.out" 2>&1 ||
  { cat "$fake/ok.out"; echo "FAIL: the library did not run where UCX cannot be loaded"; exit 1; }
rc=0
LD_LIBRARY_PATH="$fake" MYCOLL_TIMEOUT=60 MYCOLL_TRANSPORT=ucx "$example" --np 2 --count 100 \
  >"$fake/ucx.out" 2>&1 || rc=$?
cat "$fake/ucx.out"
if [ "$rc" -eq 0 ] || ! grep -q "libucs.so.0 could not be loaded" "$fake/ucx.out" ||
   ! grep -q "install UCX" "$fake/ucx.out"; then
  echo "FAIL: MYCOLL_TRANSPORT=ucx without a loadable UCX: rc $rc, expected an error naming what to install"
  exit 1
fi
