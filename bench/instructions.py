#!/usr/bin/env python3
"""Instructions executed and code size, native against Kage, for the programs kage-bench has
built: a deterministic companion to kage-bench's wall-clock ratios on noisy shared machines.

For each program it runs the native build and the Kage build (of the tool given) under
`valgrind --tool=cachegrind --cache-sim=no` at the --medium sizes of `kage-bench --list
--medium` (or, with --full, at the full sizes kage-bench times), and reads the instructions executed (`I refs`); it also reads the size of each
program's object files' .text sections with `size -A` (its own code, not the runtime). Build the programs first with
`target/release/kage-bench --tool <tool> ...` (they are reused from target/kage-bench/).

Not for the working-set tool: Valgrind maps its own memory inside the range that tool's
shadow must have (docs/abi.md), so a working-set build stops at start-up under it.

Usage: bench/instructions.py --tool loops [--filter gemm,sort] [--full] [--output table.md]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "kage-bench")


def sizes(full):
    bench = os.path.join(ROOT, "target", "release", "kage-bench")
    size = [] if full else ["--medium"]
    out = subprocess.run([bench, "--list", *size], check=True, capture_output=True, text=True)
    sizes = {}
    for line in out.stdout.splitlines():
        name, _, args = line.partition("\t")
        sizes[name] = args.split() if args else []
    return sizes


def instructions(executable, args, cwd):
    # Valgrind 3.19 cannot read the DWARF 5 line tables kage-cc adds: run a copy without
    # debug information (the same code).
    stripped = os.path.join(cwd, os.path.basename(executable) + ".stripped")
    subprocess.run(["objcopy", "--strip-debug", executable, stripped], check=True)
    with tempfile.NamedTemporaryFile(dir=cwd, suffix=".cg") as out:
        result = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out.name}",
             stripped, *args],
            cwd=cwd, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"{executable} failed under cachegrind:\n{result.stderr[-2000:]}")
        match = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
        if not match:
            sys.exit(f"no instruction count for {executable}")
        return int(match.group(1).replace(",", "")), result.stdout


def text_size(objects_dir):
    """The program's own code: the .text sections of its object files (not the runtime)."""
    total = 0
    for name in sorted(os.listdir(objects_dir)):
        if not name.endswith(".o"):
            continue
        out = subprocess.run(["size", "-A", os.path.join(objects_dir, name)], check=True,
                             capture_output=True, text=True)
        for line in out.stdout.splitlines():
            fields = line.split()
            if fields and fields[0].startswith(".text"):
                total += int(fields[1])
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", required=True)
    parser.add_argument("--filter", default="")
    parser.add_argument("--output")
    parser.add_argument("--full", action="store_true",
                        help="the full sizes kage-bench times (slow under cachegrind), not --medium")
    options = parser.parse_args()
    if options.tool.split("+")[0] == "working-set":
        sys.exit("instructions.py: a working-set build cannot run under Valgrind (its shadow's "
                 "fixed range holds Valgrind's own memory); time it with kage-bench or "
                 "bench/alternate.py instead")
    wanted = [f for f in options.filter.split(",") if f]
    rows = []
    with tempfile.TemporaryDirectory() as cwd:
        for name, args in sizes(options.full).items():
            if wanted and name not in wanted:
                continue
            native = os.path.join(WORK, "native", name)
            kage = os.path.join(WORK, f"kage-{options.tool}", name)
            if not (os.path.exists(native) and os.path.exists(kage)):
                continue
            native_ir, native_out = instructions(native, args, cwd)
            kage_ir, kage_out = instructions(kage, args, cwd)
            rows.append((name, native_ir, kage_ir, native_out == kage_out,
                         text_size(native + ".obj"), text_size(kage + ".obj")))
            print(f"{name}: {kage_ir / native_ir:.3f}x instructions", file=sys.stderr)
    lines = [
        f"| program | native instructions | kage instructions | ratio | native .text KiB | kage .text KiB | code growth | outputs |",
        "|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    product, growth = 1.0, 1.0
    for name, n, k, same, nt, kt in rows:
        product *= k / n
        growth *= kt / nt if nt else 1
        lines.append(f"| {name} | {n:,} | {k:,} | {k / n:.3f}× | {nt / 1024:.1f} | {kt / 1024:.1f} | "
                     f"{kt / nt:.2f}× | {'match' if same else 'DIFFER'} |")
    if rows:
        lines.append(f"| **geometric mean** | | | {product ** (1 / len(rows)):.3f}× | | | "
                     f"{growth ** (1 / len(rows)):.2f}× | |")
    table = "\n".join(lines) + "\n"
    print(table)
    if options.output:
        with open(options.output, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
