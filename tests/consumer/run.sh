#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds the consumer twice: with CMake's
# find_package(sa) and with pkg-config. Usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib64:${LD_LIBRARY_PATH:-}" "$work/cmake-build/consumer"
libdir=$(ls -d "$work"/prefix/lib*/pkgconfig | head -n1)
export PKG_CONFIG_PATH="$libdir"
cc -std=c99 -Wall -Wextra -Werror "$src/tests/consumer/consumer.c" -o "$work/pc-consumer" \
  $(pkg-config --cflags --libs sa)
LD_LIBRARY_PATH="$(dirname "$libdir")" "$work/pc-consumer"
