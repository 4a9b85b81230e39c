#!/usr/bin/env bash
# Builds every Kage crate in release mode: target/release/ then holds `kage`, `kage-cc`,
# `kage-cxx` (and the `kage-c++` link to it), libkage_pass.so and libkage_rt.o, side by side
# as the wrappers expect.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "build: cargo build --release --workspace"
cargo build --release --workspace
ln -sf kage-cxx target/release/kage-c++
# CMake reads the "kage-" of kage-cc as a toolchain prefix and looks for kage-llvm-ar and
# kage-llvm-ranlib next to the compiler; without them it takes the system's unversioned
# llvm-ar, which may be an older LLVM that cannot read clang 22's bitcode (an -flto build of
# a static library then fails). These are clang 22's own tools.
for tool in ar ranlib nm; do
  ln -sf /usr/lib/llvm-22/bin/llvm-$tool target/release/kage-llvm-$tool
done

# The runtime kage-cc links into every instrumented program, as one object: cargo's
# libkage_rt.a (the runtime with all of std and its crates) reduced to what the runtime's
# entry points (every `__kage_*` and `kage_*` symbol it defines, and the `sigaction` and
# `signal` functions it puts in place of the C library's: crates/kage-rt/src/handlers.rs)
# and its start-up sections
# reach, with `ld -r --gc-sections`: a quarter of the text, a megabyte less resident.
rt=target/release/libkage_rt.a
if [ ! target/release/libkage_rt.o -nt "$rt" ]; then
  echo "build: target/release/libkage_rt.o from $rt"
  roots=$(nm -g --defined-only "$rt" 2>/dev/null | awk '$3 ~ /^(__kage_|kage_|sigaction$|signal$|bsd_signal$|sysv_signal$)/ { print "--undefined=" $3 }' | sort -u)
  ld -r --gc-sections $roots --whole-archive "$rt" -o target/release/libkage_rt.o.tmp
  mv -f target/release/libkage_rt.o.tmp target/release/libkage_rt.o
fi
# The same runtime as a shared object, which `kage run` preloads into a program not linked
# by kage-cc (a test driver, python) so that the instrumented libraries it loads are
# measured. A shared object cannot have `.preinit_array`: the working-set shadow's early
# reservation becomes an ordinary constructor.
if [ ! target/release/libkage_rt.so -nt target/release/libkage_rt.o ]; then
  echo "build: target/release/libkage_rt.so from target/release/libkage_rt.o"
  objcopy --rename-section .preinit_array=.init_array \
    target/release/libkage_rt.o target/release/libkage_rt_shared.o
  cc -shared -o target/release/libkage_rt.so.tmp target/release/libkage_rt_shared.o \
    -lpthread -ldl -lm -lrt -lgcc_s
  rm -f target/release/libkage_rt_shared.o
  mv -f target/release/libkage_rt.so.tmp target/release/libkage_rt.so
fi
# The clang plugin that reads `#pragma kage profile` and `versions` (kage-cc loads it for
# KAGE_TOOL=loops, interpolate, dependences, select),
# built against clang 22's headers like any clang plugin.
pragma=crates/kage-pass/pragma/kage_pragma.cpp
if [ ! target/release/libkage_pragma.so -nt "$pragma" ]; then
  echo "build: target/release/libkage_pragma.so from $pragma"
  # shellcheck disable=SC2046 # llvm-config prints several flags
  clang++-22 -shared -fPIC -O2 $(/usr/lib/llvm-22/bin/llvm-config --cxxflags) "$pragma" \
    -o target/release/libkage_pragma.so.tmp
  mv -f target/release/libkage_pragma.so.tmp target/release/libkage_pragma.so
fi
echo "build: done; the tools are in $(pwd)/target/release"
