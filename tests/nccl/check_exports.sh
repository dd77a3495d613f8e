#!/bin/sh
# Compares the functions an nccl.h declares with what libnccl.so.2 exports:
# every declared function (nccl* and pnccl*) must be exported, every export
# must be nccl*/pnccl* with its twin, and exports nccl.h does not declare
# must be host functions of NCCL's device API (nccl_device/*.h next to
# nccl.h, when that exists).
#   check_exports.sh NCCL_H LIBRARY
set -eu
hdr=$1; lib=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# Declarations without comments: "name(" of every nccl/pnccl identifier.
gcc -fpreprocessed -dD -E -P -x c "$hdr" 2>/dev/null |
  grep -oE '(^|[^A-Za-z0-9_])p?nccl[A-Za-z0-9_]+[[:space:]]*\(' |
  sed -E 's/^[^A-Za-z0-9_]//; s/[[:space:]]*\($//' | sort -u > "$work/declared"
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > "$work/exported"

fail=0
n_decl=$(wc -l < "$work/declared")
[ "$n_decl" -ge 40 ] || { echo "only $n_decl functions found in $hdr"; fail=1; }
missing=$(comm -23 "$work/declared" "$work/exported")
[ -z "$missing" ] || { echo "declared in $hdr but not exported by $lib:"; echo "$missing"; fail=1; }
foreign=$(grep -vE '^p?nccl' "$work/exported" || true)
[ -z "$foreign" ] || { echo "exports that are not nccl*/pnccl*:"; echo "$foreign"; fail=1; }
for s in $(grep -E '^nccl' "$work/exported"); do
  grep -qx "p$s" "$work/exported" || { echo "$s has no pnccl twin"; fail=1; }
done
for s in $(grep -E '^pnccl' "$work/exported"); do
  grep -qx "${s#p}" "$work/exported" || { echo "$s has no nccl twin"; fail=1; }
done
extra=$(comm -13 "$work/declared" "$work/exported" | sed 's/^p//' | sort -u)
devdir=$(dirname "$hdr")/nccl_device
if [ -n "$extra" ] && [ -d "$devdir" ]; then
  cat "$devdir"/*.h | grep -E 'NCCL_EXTERN_C[[:space:]]+__host__' |
    grep -oE 'nccl[A-Za-z0-9_]+[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' | sort -u > "$work/device"
  unknown=$(printf '%s\n' "$extra" | comm -23 - "$work/device")
  [ -z "$unknown" ] || { echo "exported but declared neither in nccl.h nor nccl_device/:"; echo "$unknown"; fail=1; }
fi
[ $fail -eq 0 ] || exit 1
echo "nccl_exports: $n_decl functions of $hdr exported (with pnccl twins); device-API host functions: $(printf '%s\n' "$extra" | grep -c . || true)"
