#!/usr/bin/env bash
# The main job, end to end: build Kage, build the bundled example with kage-cc, run it under
# the count tool, and show the report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
bin=target/release
out=target/demo
mkdir -p "$out"
echo "demo: $bin/kage-cc -O2 examples/stencil.c -o $out/stencil"
"$bin/kage-cc" -O2 examples/stencil.c -o "$out/stencil"
echo "demo: $bin/kage run --tool count -o $out/stencil.json -- $out/stencil 256 20"
"$bin/kage" run --tool count -o "$out/stencil.json" -- "$out/stencil" 256 20
echo "demo: $bin/kage report $out/stencil.json"
"$bin/kage" report "$out/stencil.json"
