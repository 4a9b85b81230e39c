#!/usr/bin/env bash
# The whole test suite: unit, IR-level (opt-22 with the plugin), end-to-end C/C++ programs,
# and the Lua interpreter built with kage-cc.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
echo "test: cargo test --release --workspace"
cargo test --release --workspace
