#!/usr/bin/env bash
# clang-tidy with the project's .clang-tidy over every .cc of kernels/, service/, client/ and bench/
# (the .cu files are nvcc's), using the build's compile_commands.json. Any finding fails.
#
# In a unity build (CMAKE_UNITY_BUILD, as scripts/test makes it) the compile commands name the
# unity sources, each of which includes a batch of those .cc files: clang-tidy then parses and
# matches the gRPC, protobuf and Abseil headers once a batch instead of once a file, and reports
# what it finds in the included .cc files, which .clang-tidy's HeaderFilterRegex names. Two thirds
# of a unit's time is matching, over those headers as much as over our code, so the fewer units
# the better: the unity sources of every library target (no main) are checked as one unit, with
# the include folders and definitions of all of them, and each program's as a unit of its own
# (programs each have a main and their own flags). On the 2-core machine: 26 units, one a
# target, took 189 CPU-s; 12 take 104. Should the libraries ever not compile as one unit (two
# files defining one name outside a namespace of their own), the check says so and checks them one
# target a unit instead. Either way it first makes sure that every .cc file is reached, through its
# own command or a unity source, so that none is left out (in a build without the CUDA backend,
# all but that backend's files).
#   clang_tidy_check.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
root=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
if ! command -v run-clang-tidy >/dev/null; then
  echo "clang_tidy_check: run-clang-tidy not found (scripts/install-deps installs it)" >&2
  exit 1
fi
cd "$root"
mapfile -t wanted < <(git ls-files 'kernels/*.cc' 'service/*.cc' 'client/*.cc' 'bench/*.cc')
# The translation units to run: each wanted .cc compiled on its own, and the unity sources (one a
# target, or more where a target asks for batches) of the build's targets outside tests/ that
# include one: those of the libraries in one unit (in one unit a target when SPLIT is 1), each
# program's in a unit of its own. The units and their compile commands go to a compile database in
# TIDY_DB; a merged unit's command is its first source's with the -I, -isystem and -D flags of all
# its sources. Printed as "unit<TAB>covered file".
# make_units SPLIT: writes TIDY_DB and prints the pairs.
make_units() {
  rm -rf "$TIDY_DB"
  mkdir -p "$TIDY_DB"
  /usr/bin/python3 - "$root" "$build" "$TIDY_DB" "$1" "${wanted[@]}" <<'PY'
import json
import os
import re
import shlex
import sys

root, build, db = sys.argv[1], sys.argv[2], sys.argv[3]
split, wanted = sys.argv[4] == "1", set(sys.argv[5:])
commands = json.load(open(os.path.join(build, "compile_commands.json")))
entries, targets = [], {}  # targets: target name -> [(unity source, argv, entry, covered files)]
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
            argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
            target = re.search(r"CMakeFiles/([^/]+)\.dir/", path).group(1)
            targets.setdefault(target, []).append((path, argv, entry, covered))

def is_program(sources):
    return any(re.search(r"^int main\(", open(os.path.join(root, c)).read(), re.M)
               for _, _, _, covered in sources for c in covered)

def flags_and_rest(argv):  # (-I/-isystem/-D flags, the rest less -o and -c and their values)
    flags, rest, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "-isystem":
            flags.append((a, argv[i + 1]))
            i += 2
        elif a.startswith(("-I", "-D")):
            flags.append((a,))
            i += 1
        elif a in ("-o", "-c"):
            i += 2
        else:
            rest.append(a)
            i += 1
    return flags, rest

units = []  # lists of sources checked as one unit
libraries = []
for name in sorted(targets):
    sources = sorted(targets[name])
    if split or is_program(sources):
        units.append(sources)
    else:
        libraries.extend(sources)
if libraries:
    units.append(libraries)
for n, sources in enumerate(units):
    name = re.search(r"CMakeFiles/([^/]+)\.dir/", sources[0][0]).group(1)
    unit = os.path.join(db, f"tidy_{n}_{name}.cxx")
    with open(unit, "w") as f:
        f.writelines(f'#include "{path}"\n' for path, _, _, _ in sources)
    flags = []
    for _, argv, _, _ in sources:
        flags += [f for f in flags_and_rest(argv)[0] if f not in flags]
    rest = flags_and_rest(sources[0][1])[1]
    argv = rest[:1] + [a for f in flags for a in f] + rest[1:] + ["-c", unit]
    entries.append({"directory": sources[0][2]["directory"], "file": unit, "arguments": argv})
    for _, _, _, covered in sources:
        for c in covered:
            print(f"{unit}\t{c}")
json.dump(entries, open(os.path.join(db, "compile_commands.json"), "w"), indent=1)
PY
}
TIDY_DB=$(mktemp -d)
out=$(mktemp)
trap 'rm -rf "$out" "$TIDY_DB"' EXIT
mapfile -t pairs < <(make_units 0)
# read_pairs: the units and covered files of the pairs printed by make_units.
declare -A covered=() units=()
read_pairs() {
  covered=() units=()
  local pair
  for pair in "${pairs[@]}"; do
    units[${pair%%$'\t'*}]=1
    covered[${pair#*$'\t'}]=1
  done
}
read_pairs
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
# run_tidy: clang-tidy over the units; sets findings, less one kind: google-global-names-in-headers
# takes every file a unit includes for a header, also the .cc files a unity source includes; a
# .cc is none.
run_tidy() {
  local patterns=() u  # the units as anchored regexes: run-clang-tidy takes each as a pattern
  for u in "${!units[@]}"; do
    patterns+=("^$(printf '%s' "$u" | sed 's/[.[\*^$()+?{|]/\\&/g')\$")
  done
  run-clang-tidy -p "$TIDY_DB" -quiet -j "$(nproc)" -config "$config" "${patterns[@]}" >"$out" 2>&1 ||
    true
  findings=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -E "(warning|error):" |
    grep -vE '^[^:]+\.cc:[0-9]+:[0-9]+: (warning|error): .*\[google-global-names-in-headers' |
    sort -u || true)
}
run_tidy
if [[ $findings == *clang-diagnostic-error* ]]; then
  echo "$findings" | grep clang-diagnostic-error | head -n 5
  echo "clang_tidy_check: the libraries do not compile as one unit (above); checking them one target a unit"
  mapfile -t pairs < <(make_units 1)
  read_pairs
  run_tidy
fi
if [[ -z $findings ]] && grep -q "clang-tidy" "$out"; then
  echo "clang_tidy_check: $((${#wanted[@]} - ${#missing[@]})) files in ${#units[@]} translation units, no findings"
else
  echo "${findings:-$(tail -n 20 "$out")}" | head -n 50
  echo "clang_tidy_check: findings above (.clang-tidy says which checks run)" >&2
  exit 1
fi
