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

# Which regions could run in parallel: hierarchical critical path analysis on an example
# with an obviously parallel loop and an obviously serial one; the report starts with the
# plan (the serial loop is not in it).
echo "demo: KAGE_TOOL=hcpa $bin/kage-cc -O2 -g examples/parallel.c -o $out/parallel"
KAGE_TOOL=hcpa "$bin/kage-cc" -O2 -g examples/parallel.c -o "$out/parallel"
echo "demo: $bin/kage run --tool hcpa -o $out/parallel.json -- $out/parallel 20000"
"$bin/kage" run --tool hcpa -o "$out/parallel.json" -- "$out/parallel" 20000
echo "demo: $bin/kage report $out/parallel.json --cores 8"
"$bin/kage" report "$out/parallel.json" --cores 8
