#!/usr/bin/env bash
# Builds every Kage crate in release mode: target/release/ then holds `kage`, `kage-cc`,
# `kage-cxx` (and the `kage-c++` link to it), libkage_pass.so and libkage_rt.a, side by side
# as the wrappers expect.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "build: cargo build --release --workspace"
cargo build --release --workspace
ln -sf kage-cxx target/release/kage-c++
echo "build: done; the tools are in $(pwd)/target/release"
