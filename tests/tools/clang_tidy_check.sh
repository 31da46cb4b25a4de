#!/usr/bin/env bash
# clang-tidy with the project's .clang-tidy over every .cc of kernels/, service/, client/ and bench/
# (the .cu files are nvcc's), using the build's compile_commands.json. Any finding fails.
#
# In a unity build (CMAKE_UNITY_BUILD, as scripts/test makes it) the compile commands name the
# unity sources, each of which includes a batch of those .cc files: clang-tidy then parses and
# matches the gRPC, protobuf and Abseil headers once a batch instead of once a file (on the 2-core
# machine 376 s became about a minute), and reports what it finds in the included .cc files,
# which .clang-tidy's HeaderFilterRegex names. The unity sources of one target are checked as one
# unit (25 units instead of 30: 236 CPU-s became 208 on the 2-core machine). Either way the check
# first makes sure that every .cc file is reached, through its own command or a unity source, so
# that none is left out (in a build without the CUDA backend, all but that backend's files).
#   clang_tidy_check.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
root=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
if ! command -v run-clang-tidy >/dev/null; then
  echo "clang_tidy_check: run-clang-tidy not found (scripts/install-deps installs it)" >&2
  exit 1
fi
cd "$root"
mapfile -t wanted < <(git ls-files 'kernels/*.cc' 'service/*.cc' 'client/*.cc' 'bench/*.cc')
# The translation units to run: each wanted .cc compiled on its own, and for each target of the
# build (outside tests/) whose unity sources include one, a unit of its own that includes all of
# them, so that a target's headers are parsed and matched once, not once a batch (CMake makes
# batches of 8 sources). Those units and their compile commands (each the command of the target's
# first unity source) go to a compile database in TIDY_DB. Printed as "unit<TAB>covered file".
TIDY_DB=$(mktemp -d)
mapfile -t pairs < <(/usr/bin/python3 - "$root" "$build" "$TIDY_DB" "${wanted[@]}" <<'PY'
import json
import os
import re
import sys

root, build, db, wanted = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4:])
commands = json.load(open(os.path.join(build, "compile_commands.json")))
entries, targets = [], {}  # targets: unity folder -> [(unity source, entry, covered files)]
for entry in commands:
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if rel in wanted:
        entries.append(entry)
        print(f"{path}\t{rel}")
    elif "/Unity/unity_" in path and not os.path.relpath(path, build).startswith("tests/"):
        covered = [os.path.relpath(os.path.normpath(i), root)
                   for i in re.findall(r'#include "([^"]+)"', open(path).read())]
        covered = [c for c in covered if c in wanted]
        if covered:
            targets.setdefault(os.path.dirname(path), []).append((path, entry, covered))
for n, (folder, sources) in enumerate(sorted(targets.items())):
    sources.sort()
    unit = os.path.join(db, f"tidy_{n}_{os.path.basename(os.path.dirname(folder))}.cxx")
    with open(unit, "w") as f:
        f.writelines(f'#include "{path}"\n' for path, _, _ in sources)
    first_path, first, _ = sources[0]
    entry = dict(first, file=unit)
    for key in ("command", "arguments"):
        if key in first:
            entry[key] = (first[key].replace(first["file"], unit) if key == "command"
                          else [unit if a == first["file"] else a for a in first[key]])
    entries.append(entry)
    for _, _, covered in sources:
        for c in covered:
            print(f"{unit}\t{c}")
json.dump(entries, open(os.path.join(db, "compile_commands.json"), "w"), indent=1)
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
  # A build without the CUDA backend compiles none of its host files: those are checked where
  # nvcc is found (CI). A build with it must reach every file.
  if grep -q '\.cu"' "$build/compile_commands.json"; then
    echo "clang_tidy_check: no compile command reaches ${missing[*]} (is it built in $build?)" >&2
    exit 1
  fi
  echo "clang_tidy_check: ${#missing[@]} files not built here (no CUDA backend), not checked"
fi
out=$(mktemp)
trap 'rm -rf "$out" "$TIDY_DB"' EXIT
# The units as anchored regexes: run-clang-tidy takes each argument as a pattern.
patterns=()
for u in "${!units[@]}"; do
  patterns+=("^$(printf '%s' "$u" | sed 's/[.[\*^$()+?{|]/\\&/g')\$")
done
# The configuration given, not looked up beside each unit: a unity source lives in the build
# folder, which may be outside the source tree. bugprone-suspicious-include would report every
# line of a unity source (each includes .cc files): the same rule, a .cc, .cpp or .cu file
# included, is checked here on the sources themselves instead.
if included=$(grep -nE '^\s*#\s*include\s*[<"][^>"]*\.(cc|cpp|cxx|cu)[>"]' "${wanted[@]}"); then
  echo "$included"
  echo "clang_tidy_check: the lines above include an implementation file (bugprone-suspicious-include)" >&2
  exit 1
fi
config=$(sed -E 's/^(WarningsAsErrors:)/  -bugprone-suspicious-include,\n\1/' "$root/.clang-tidy")
# Its findings, less one kind: google-global-names-in-headers takes every file a unit includes
# for a header, also the .cc files a unity source includes; a .cc is none.
run-clang-tidy -p "$TIDY_DB" -quiet -j "$(nproc)" -config "$config" "${patterns[@]}" >"$out" 2>&1 ||
  true
findings=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -E "(warning|error):" |
  grep -vE '^[^:]+\.cc:[0-9]+:[0-9]+: (warning|error): .*\[google-global-names-in-headers' |
  sort -u || true)
if [[ -z $findings ]] && grep -q "clang-tidy" "$out"; then
  echo "clang_tidy_check: $((${#wanted[@]} - ${#missing[@]})) files in ${#units[@]} translation units, no findings"
else
  echo "${findings:-$(tail -n 20 "$out")}" | head -n 50
  echo "clang_tidy_check: findings above (.clang-tidy says which checks run)" >&2
  exit 1
fi
