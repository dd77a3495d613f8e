#!/bin/sh
# The shared library needs nothing but glibc and the C++ runtime (like
# libnccl.so.2): spdlog and fmt are compiled in, libibverbs and UCX are
# loaded at run time, CUDA's runtime is linked statically.
#   check_needed.sh path/to/libmycoll.so
set -e
lib=$1
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "no NEEDED entries read from $lib"; exit 1; }
bad=""
for n in $needed; do
  case "$n" in
    libc.so.*|libstdc++.so.*|libgcc_s.so.*|libm.so.*|ld-linux*.so.*) ;;
    libdl.so.*|librt.so.*|libpthread.so.*) ;;  # glibc before 2.34 splits these out
    *) bad="$bad $n" ;;
  esac
done
echo "$lib needs:" $needed
if [ -n "$bad" ]; then
  echo "FAIL: $lib needs libraries beyond glibc and the C++ runtime:$bad"
  exit 1
fi
