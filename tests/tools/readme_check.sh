#!/usr/bin/env bash
# README.md against the binaries (issue 22, item 10): its "Server flags" table lists every flag
# that embedding-server defines under service/ (as `--helpfull` prints them) and no other, and
# where a row's default is a literal (`65536`, or none for an empty string) it is the binary's;
# and every field of `embedding-client bench --json` (nested ones too, but not the status codes
# under `codes`) is named in README's paragraph on it.
#   readme_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3
"$SERVER" --helpfull >"$WORK/help" 2>&1 || true  # Abseil exits 1 after printing help
start_server "$SERVER" --demo_table=1000x8 --drain_seconds=0
"$CLIENT" --target=127.0.0.1:$GRPC_PORT bench --requests=20 --warmup=0 --json \
  >"$WORK/bench.json" || fail "bench --json failed"
"$PY" - "$WORK/help" "$ROOT/README.md" "$WORK/bench.json" <<'PY' || fail "README drifted"
import json
import re
import sys

help_text, readme, bench = (open(p).read() for p in sys.argv[1:])
failures = []

# --helpfull: "  Flags from PATH:" headers, then "    --name (help...); default: VALUE;" entries
# that may run over several lines. Only the sections of files under service/.
defined, section = {}, None
for line in help_text.splitlines():
    m = re.match(r"^  Flags from (\S+):$", line)
    if m:
        section = m[1] if re.search(r"(^|/)service/", m[1]) else None
        continue
    m = re.match(r"^    --([a-z0-9_]+) \(", line)
    if m and section:
        name, text = m[1], line
        defined[name] = ""
    elif section and line.startswith("      ") and defined:
        text += " " + line.strip()
    else:
        continue
    d = re.search(r"; default: (.*);$", text)
    if d:
        value = d[1]
        defined[name] = value[1:-1] if value.startswith('"') else value
if len(defined) < 20:
    sys.exit(f"FAIL: read only {len(defined)} flags from --helpfull under service/")

# README's table: the rows between "## Server flags" and the next heading.
table = readme.split("\n## Server flags\n", 1)[1].split("\n## ", 1)[0]
rows = [[c.strip() for c in line.strip().strip("|").split("|")]
        for line in table.splitlines() if line.startswith("| `--")]
documented = {}
for cells in rows:
    name = re.match(r"`--([a-z0-9_]+)", cells[0])[1]
    if name in documented:
        failures.append(f"--{name} has two rows")
    documented[name] = cells[1]
for name in sorted(defined.keys() - documented.keys()):
    failures.append(f"--{name} (default {defined[name]!r}) is not in README's flag table")
for name in sorted(documented.keys() - defined.keys()):
    failures.append(f"--{name} is in README's flag table, but embedding-server has no such flag")
for name in sorted(defined.keys() & documented.keys()):
    cell = documented[name]
    literal = "" if cell == "none" else (cell[1:-1] if re.fullmatch(r"`[^`]*`", cell) else None)
    if literal is not None and literal != defined[name]:
        failures.append(f"--{name}: README says default {cell}, the binary {defined[name]!r}")

# bench --json: every key, nested ones too, but not the codes' names under `codes` and
# `first_messages` (data, not fields).
def keys(obj, under=""):
    for k, v in obj.items():
        yield k
        if isinstance(v, dict) and k not in ("codes", "first_messages"):
            yield from keys(v, k)
report = json.loads(bench)
# The paragraph that starts "`bench --json` prints" and runs to the next blank line.
m = re.search(r"^`bench --json` prints.*?(?=\n\n)", readme, re.M | re.S)
paragraph = m[0] if m else ""
if not paragraph:
    failures.append("README.md has no paragraph that starts \"`bench --json` prints\"")
for k in sorted(set(keys(report))):
    if f"`{k}`" not in paragraph:
        failures.append(f"bench --json field `{k}` is not named in README's paragraph on it")

for f in failures:
    print(f"FAIL: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"README: the flag table matches the {len(defined)} flags of embedding-server, "
      f"and names the {len(set(keys(report)))} fields of bench --json")
PY
