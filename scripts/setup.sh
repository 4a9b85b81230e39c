#!/usr/bin/env bash
# Installs what Kage needs on a Debian 12 machine that has only Rust, gcc and Python:
# clang 22 (the real compiler the wrappers run; it matches rustc's LLVM 22), LLVM 22's
# development files (the pass plugin links libLLVM), lld 22, LLVM's OpenMP runtime, make, and
# the build systems the tests drive the wrappers through (cmake, autoconf).
set -euo pipefail

need=()
command -v clang-22 >/dev/null 2>&1 || need+=(clang-22)
command -v opt-22 >/dev/null 2>&1 && [ -x /usr/lib/llvm-22/bin/llvm-config ] || need+=(llvm-22-dev)
command -v ld.lld-22 >/dev/null 2>&1 || need+=(lld-22)
# clang's headers, for the `#pragma kage profile` plugin (crates/kage-pass/pragma).
[ -f /usr/lib/llvm-22/include/clang/Lex/Pragma.h ] || need+=(libclang-22-dev)
# OpenMP's runtime and omp.h, for the tests of programs built with -fopenmp.
[ -f /usr/lib/llvm-22/lib/libomp.so ] || need+=(libomp-22-dev)
command -v make >/dev/null 2>&1 || need+=(make)
# Build systems the end-to-end tests drive the wrappers through.
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v autoconf >/dev/null 2>&1 || need+=(autoconf)

if [ ${#need[@]} -eq 0 ]; then
  echo "setup: clang-22, llvm-22-dev, libclang-22-dev, lld-22, libomp-22-dev, make, cmake and autoconf are installed"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root to install ${need[*]}: run as root or install sudo" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "setup: installing ${need[*]} (apt-get update, then apt-get install)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
  echo "setup: installed ${need[*]}"
fi

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found: install Rust (rustup) first" >&2; exit 1; }
