#!/bin/sh
# Installs the build into a scratch prefix and builds a consumer of it twice:
# through find_package(mycoll) -> mycoll::mycoll, and through pkg-config.
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
