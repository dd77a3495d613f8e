#!/bin/sh
# Installs the build into a scratch prefix and builds a consumer of it twice:
# through find_package(mycoll) -> mycoll::mycoll, and through pkg-config.
# Then the installed mycoll-perf: it starts from that prefix with no
# LD_LIBRARY_PATH (RPATH $ORIGIN/../lib), needs no libmpi, and with its MPI
# module removed `--vs mpi` says what it needs.
#   run.sh BUILD_DIR SOURCE_DIR
set -e
build=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$work/b" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/b" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/b/consumer"
flags=$(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs mycoll)
cc "$src/tests/install/consumer/main.c" $flags -o "$work/pc_consumer"
LD_LIBRARY_PATH="$work/prefix/lib" "$work/pc_consumer"

perf="$work/prefix/bin/mycoll-perf"
if [ -x "$perf" ]; then
  if readelf -d "$perf" | grep -q 'NEEDED.*libmpi'; then
    echo "FAIL: mycoll-perf needs libmpi (the MPI part belongs in mycoll-perf-mpi.so)"; exit 1
  fi
  env -u LD_LIBRARY_PATH "$perf" all_reduce --np 2 -b 8 -e 64 -f 8 -n 2 -w 1 -c 1 >"$work/perf.out" 2>&1 ||
    { cat "$work/perf.out"; echo "FAIL: installed mycoll-perf did not run"; exit 1; }
  rm -f "$work"/prefix/lib/mycoll/mycoll-perf-mpi.so
  rc=0
  env -u LD_LIBRARY_PATH "$perf" all_reduce --vs mpi >"$work/mpi.out" 2>&1 || rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q -- "--vs mpi needs" "$work/mpi.out"; then
    cat "$work/mpi.out"; echo "FAIL: --vs mpi without MPI: rc $rc, expected 2 and what it needs"; exit 1
  fi
  echo "installed mycoll-perf runs from $work/prefix; without MPI: $(cat "$work/mpi.out")"
fi
