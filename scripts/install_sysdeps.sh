#!/usr/bin/env bash
# System packages the build needs: GoogleTest, CMake, Ninja, a C++ compiler,
# and clang with its sanitizer/fuzzer runtime for the libFuzzer harnesses.
# Installs only what is missing (apt as root; sudo otherwise).
set -euo pipefail
need=()
for pkg in libgtest-dev cmake ninja-build g++ clang libclang-rt-14-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
