#!/usr/bin/env bash
# clang-tidy with the project's .clang-tidy over every .cc of kernels/, service/ and client/ (the
# .cu files are nvcc's), using the build's compile_commands.json. Any finding fails.
#   clang_tidy_check.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
root=$1 build=$2
if ! command -v run-clang-tidy >/dev/null; then
  echo "clang_tidy_check: run-clang-tidy not found (scripts/install-deps installs clang-tidy)" >&2
  exit 1
fi
cd "$root"
mapfile -t files < <(git ls-files 'kernels/*.cc' 'service/*.cc' 'client/*.cc' 'bench/*.cc')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if run-clang-tidy -p "$build" -quiet -j "$(nproc)" "${files[@]/#/$root/}" >"$out" 2>&1; then
  echo "clang_tidy_check: ${#files[@]} files, no findings"
else
  grep -E "(warning|error):" "$out" | sort -u | head -n 50
  echo "clang_tidy_check: findings above (.clang-tidy says which checks run)" >&2
  exit 1
fi
