#!/usr/bin/env bash
# clang-tidy with the project's .clang-tidy over every .cc of kernels/, service/, client/ and bench/
# (the .cu files are nvcc's), using the build's compile_commands.json. Any finding fails.
#
# In a unity build (CMAKE_UNITY_BUILD, as scripts/test makes it) the compile commands name the
# unity sources, each of which includes a batch of those .cc files: clang-tidy then parses and
# matches the gRPC, protobuf and Abseil headers once a batch instead of once a file (on the 2-core
# machine 376 s became about a minute), and reports what it finds in the included .cc files,
# which .clang-tidy's HeaderFilterRegex names. Either way the check first makes sure that every
# .cc file is reached, through its own command or a unity source, so that none is left out.
#   clang_tidy_check.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
root=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
if ! command -v run-clang-tidy >/dev/null; then
  echo "clang_tidy_check: run-clang-tidy not found (scripts/install-deps installs it)" >&2
  exit 1
fi
cd "$root"
mapfile -t wanted < <(git ls-files 'kernels/*.cc' 'service/*.cc' 'client/*.cc' 'bench/*.cc')
# The translation units to run: each wanted .cc compiled on its own, and each unity source of
# the build (outside tests/) that includes one. Printed as "unit<TAB>covered file" lines.
mapfile -t pairs < <(/usr/bin/python3 - "$root" "$build" "${wanted[@]}" <<'PY'
import json
import os
import re
import sys

root, build, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3:])
commands = json.load(open(os.path.join(build, "compile_commands.json")))
for entry in commands:
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if rel in wanted:
        print(f"{path}\t{rel}")
    elif "/Unity/unity_" in path and not os.path.relpath(path, build).startswith("tests/"):
        for include in re.findall(r'#include "([^"]+)"', open(path).read()):
            inc = os.path.relpath(os.path.normpath(include), root)
            if inc in wanted:
                print(f"{path}\t{inc}")
PY
)
declare -A covered=() units=()
for pair in "${pairs[@]}"; do
  units[${pair%%$'\t'*}]=1
  covered[${pair#*$'\t'}]=1
done
missing=()
for f in "${wanted[@]}"; do
  [[ -n ${covered[$f]:-} ]] || missing+=("$f")
done
if ((${#missing[@]})); then
  echo "clang_tidy_check: no compile command reaches ${missing[*]} (is it built in $build?)" >&2
  exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The units as anchored regexes: run-clang-tidy takes each argument as a pattern.
patterns=()
for u in "${!units[@]}"; do
  patterns+=("^$(printf '%s' "$u" | sed 's/[.[\*^$()+?{|]/\\&/g')\$")
done
if run-clang-tidy -p "$build" -quiet -j "$(nproc)" "${patterns[@]}" >"$out" 2>&1; then
  echo "clang_tidy_check: ${#wanted[@]} files in ${#units[@]} translation units, no findings"
else
  grep -E "(warning|error):" "$out" | sort -u | head -n 50
  echo "clang_tidy_check: findings above (.clang-tidy says which checks run)" >&2
  exit 1
fi
