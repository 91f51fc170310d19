#!/usr/bin/env bash
# Installs what building and testing sa needs on Debian 12 / Ubuntu (run as root or via sudo).
# The Vulkan packages build the Vulkan backend and run its tests on Mesa's lavapipe (a CPU
# Vulkan driver) under the validation layer; cargo, bindgen and Mono build and test the Rust and
# C# bindings (bindings/), Qt 6 the desktop app (apps/sa-desktop; its screenshot script also
# wants xvfb and imagemagick, which CI does not run), clang with libFuzzer the fuzz targets.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config git \
  libgtest-dev libcxxopts-dev libstb-dev libsqlite3-dev wamerican \
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers \
  cargo rustc rust-clippy bindgen mono-devel qt6-base-dev clang >/dev/null
# libFuzzer for tools/fuzz.sh (CI runs each fuzz target): Debian 12 ships it apart from clang.
$SUDO apt-get install -y -qq --no-install-recommends libclang-rt-dev >/dev/null 2>&1 || true
