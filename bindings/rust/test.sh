#!/usr/bin/env bash
# Builds and tests the Rust bindings offline against LIBDIR/libsa.so.
#
#   bindings/rust/test.sh LIBDIR [TARGETDIR]
#
# Cargo's build output goes to TARGETDIR (default LIBDIR/rust-target), so nothing is written
# into the source tree. Set CARGO to use another cargo (e.g. CARGO=/usr/bin/cargo), SA_MODEL to
# test another model. Also checks that sa-sys/src/bindings.rs matches include/sa/sa.h when
# bindgen is installed, and runs clippy (warnings as errors) where it is installed. Exits 77
# (skipped) when cargo is missing, non-zero on any failure.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 LIBDIR [TARGETDIR]" >&2
  exit 2
fi
libdir=$(cd "$1" && pwd)
if [ ! -e "$libdir/libsa.so" ]; then
  echo "test.sh: no libsa.so in $libdir" >&2
  exit 2
fi
target=${2:-$libdir/rust-target}
here=$(cd "$(dirname "$0")" && pwd)
cargo=${CARGO:-cargo}
if ! command -v "$cargo" >/dev/null; then
  echo "test.sh: '$cargo' not found (install cargo); skipping the Rust bindings"
  exit 77
fi

if command -v bindgen >/dev/null; then
  "$here/regen.sh" --check
else
  echo "test.sh: bindgen is not installed: skipping regen.sh --check"
fi

cd "$here"
export SA_LIB_DIR="$libdir"
export CARGO_TARGET_DIR="$target"
"$cargo" --version
# --locked: the committed Cargo.lock is used as is and never rewritten.
"$cargo" test --offline --locked
if "$cargo" clippy --version >/dev/null 2>&1; then
  "$cargo" clippy --offline --locked --all-targets -- -D warnings
else
  echo "test.sh: clippy is not installed: skipping it"
fi
echo "test.sh: all Rust binding tests passed"
