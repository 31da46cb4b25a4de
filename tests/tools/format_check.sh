#!/usr/bin/env bash
# Every C++ and CUDA source is formatted as .clang-format says (clang-format 14, Debian's).
#   format_check.sh SOURCE_DIR
source "$(dirname "$0")/lib.sh"
cd "$1"
command -v clang-format >/dev/null || fail "clang-format is not installed"
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null ||
                     find kernels service client tests -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')
((${#files[@]} > 0)) || fail "no sources found"
clang-format --dry-run -Werror "${files[@]}" || fail "clang-format would change the files above"
echo "clang-format: ${#files[@]} files clean"
