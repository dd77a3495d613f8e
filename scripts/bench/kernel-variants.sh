#!/usr/bin/env bash
# Variants of one source file of the library, each built into its own
# libmycoll.so against an existing build, to be measured side by side in one
# run (scripts/bench/gpu-sweep.sh: mycoll-perf's RUNPATH lets
# LD_LIBRARY_PATH pick the library).
#
#   scripts/bench/kernel-variants.sh BUILD_DIR SOURCE VARIANT_FILE...
#
# SOURCE is the file the variants replace, as a path in the tree
# (kernels/colls/ring.cu); each VARIANT_FILE (any path, NAME.cu) is compiled
# with the build's own command for SOURCE, all in parallel (a kernel file
# with every dtype x op instantiation takes minutes), swapped into a copy of
# libmycoll_internal.a and linked to BUILD_DIR/variants/NAME/libmycoll.so.0.
# A variant already linked there is kept (rerun after a cut-short call).
# Prints one gpu-sweep setting per variant, e.g.
#   scripts/bench/gpu-sweep.sh out ring-variants "" \
#     $(scripts/bench/kernel-variants.sh build-gpu kernels/colls/ring.cu /tmp/v/*.cu) \
#     -- all_reduce --mem cuda -t 4 -b 8M -e 128M -n 20 -w 5 -c 0
# (the "" setting is the build as it is). Logs: BUILD_DIR/variants/NAME/.
set -uo pipefail
usage="usage: scripts/bench/kernel-variants.sh BUILD_DIR SOURCE VARIANT_FILE..."
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd) || exit 2
src=$2
shift 2
obj=CMakeFiles/mycoll_internal.dir/$src.o
cmds=$(cd "$build" && ninja -t commands libmycoll.so.0.1.0) || exit 1
compile=$(grep -F -- "-o $obj" <<<"$cmds" | head -1)
link=$(tail -1 <<<"$cmds")
if [ -z "$compile" ] || [ -z "$link" ]; then
  echo "kernel-variants: no build command for $src in $build (is it a CUDA build?)" >&2
  exit 1
fi
for v in "$@"; do
  name=$(basename "$v" .cu)
  d=$build/variants/$name
  mkdir -p "$d"
  [ -e "$d/libmycoll.so.0" ] && continue
  vsrc=$(cd "$(dirname "$v")" && pwd)/$(basename "$v")
  c=${compile//"$root/$src"/"$vsrc"}
  c=${c//"-o $obj"/"-o $d/$(basename "$obj")"}
  c=${c//"-MF $obj.d"/"-MF $d/dep.d"}
  (cd "$build" && eval "$c") > "$d/compile.log" 2>&1 &
done
wait
rc=0
for v in "$@"; do
  name=$(basename "$v" .cu)
  d=$build/variants/$name
  if [ ! -e "$d/libmycoll.so.0" ]; then
    if [ ! -f "$d/$(basename "$obj")" ]; then
      echo "kernel-variants: $name did not compile (see $d/compile.log)" >&2
      rc=1
      continue
    fi
    l=${link//" libmycoll_internal.a "/" $d/libmycoll_internal.a "}
    l=${l//"-o libmycoll.so.0.1.0"/"-o $d/libmycoll.so.0.1.0"}
    if ! { cp "$build/libmycoll_internal.a" "$d/" &&
        ar r "$d/libmycoll_internal.a" "$d/$(basename "$obj")" &&
        (cd "$build" && eval "$l") > "$d/link.log" 2>&1 &&
        ln -sf libmycoll.so.0.1.0 "$d/libmycoll.so.0"; }; then
      echo "kernel-variants: $name did not link (see $d/link.log)" >&2
      rc=1
      continue
    fi
  fi
  echo "LD_LIBRARY_PATH=$d"
done
exit $rc
