#!/usr/bin/env bash
# Installs what mycoll needs from Debian/Ubuntu packages (only what is
# missing). Needs root or sudo. CUDA is optional: with nvcc on PATH (or in
# /usr/local/cuda/bin) the GPU path is built too.
set -euo pipefail
# libucx-dev: the UCX transport is built when its headers are present (UCX
# itself is loaded at run time); CI checks that it was (test build_config).
# libibverbs-dev: verbs.h for the RDMA transport (libibverbs loaded at run time).
# python3: tools/flight/mycoll-flight (the flight recorder's analysis) and its test.
# libgloo-dev: mycoll-perf --vs gloo (the module mycoll-perf-gloo.so; Debian 12 has it).
# clang, libclang-rt-dev: the sanitizer stage (scripts/sanitize.sh) builds with clang;
# the second holds its sanitizer runtimes and libFuzzer.
pkgs=(cmake ninja-build g++ pkg-config libspdlog-dev libfmt-dev libgtest-dev
      libopenmpi-dev openmpi-bin libucx-dev libibverbs-dev iproute2 iputils-ping python3
      libgloo-dev clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
