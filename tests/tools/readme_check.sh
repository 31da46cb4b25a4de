#!/usr/bin/env bash
# README.md and docs/*.md against the binaries and the tree (issue 22, item 10; issue 40, item 3):
# - docs/flags.md's "Server flags" table lists every flag that embedding-server defines under
#   service/ (as `--helpfull` prints them) and no other, and where a row's default is a literal
#   (`65536`, or none for an empty string) it is the binary's;
# - every field of `embedding-client bench --json` (nested ones too, but not the status codes under
#   `codes`) is named in docs/clients.md's paragraph on it;
# - docs/metrics.md's table, both ways: every embedding_* family a running server exports (after a
#   lookup, a refused one, on two devices) or its source defines is a row, and every row is
#   exported, or, for a row that says "GPU only", "host tier only", "once the device is lost" or
#   "once a feature fails",
#   defined in service/; the `reason` values named for embedding_rejected_ids_total are the
#   kReject* values of service/rpc/request_validation.h;
# - every relative link in README.md and docs/*.md names a file or folder of the repository;
# - every code block after a `<!-- readme_check: ... -->` comment runs (readme_samples.py): its
#   embedding-client commands against the demo table of scripts/serve, or against the servers its
#   own `scripts/serve` lines start, and the output lines shown under each command (`# ...`) are
#   in its output, in order (a line ending in `...` as a prefix).
#   readme_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3
"$SERVER" --helpfull >"$WORK/help" 2>&1 || true  # Abseil exits 1 after printing help
# Two parts on one device (--device=cpu,cpu) export the embedding_part_* families.
start_server "$SERVER" --demo_table=1000x8 --drain_seconds=0 --device=cpu,cpu
"$CLIENT" --target=127.0.0.1:$GRPC_PORT bench --requests=20 --warmup=0 --json \
  >"$WORK/bench.json" || fail "bench --json failed"
"$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup 1 >/dev/null || fail "lookup failed"
! "$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup 1000 >/dev/null 2>&1 || fail "id 1000 accepted"
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics" || fail "no /metrics"
"$PY" - "$ROOT" "$WORK/help" "$WORK/bench.json" "$WORK/metrics" <<'PY' || fail "the docs drifted"
import glob
import json
import os
import re
import sys

root, help_path, bench_path, metrics_path = sys.argv[1:]
read = lambda p: open(p).read()
help_text, bench, exposition = read(help_path), read(bench_path), read(metrics_path)
flags_page, clients_page, metrics_page = (read(os.path.join(root, "docs", p))
                                          for p in ("flags.md", "clients.md", "metrics.md"))
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

# docs/flags.md's table: the rows between "## Server flags" and the next heading.
table = flags_page.split("\n## Server flags\n", 1)[1].split("\n## ", 1)[0]
rows = [[c.strip() for c in line.strip().strip("|").split("|")]
        for line in table.splitlines() if line.startswith("| `--")]
documented = {}
for cells in rows:
    name = re.match(r"`--([a-z0-9_]+)", cells[0])[1]
    if name in documented:
        failures.append(f"--{name} has two rows")
    documented[name] = cells[1]
for name in sorted(defined.keys() - documented.keys()):
    failures.append(f"--{name} (default {defined[name]!r}) is not in docs/flags.md's table")
for name in sorted(documented.keys() - defined.keys()):
    failures.append(f"--{name} is in docs/flags.md's table, but embedding-server has no such flag")
for name in sorted(defined.keys() & documented.keys()):
    cell = documented[name]
    literal = "" if cell == "none" else (cell[1:-1] if re.fullmatch(r"`[^`]*`", cell) else None)
    if literal is not None and literal != defined[name]:
        failures.append(f"--{name}: docs/flags.md says default {cell}, the binary {defined[name]!r}")

# bench --json: every key, nested ones too, but not the codes' names under `codes` and
# `first_messages` (data, not fields).
def keys(obj, under=""):
    for k, v in obj.items():
        yield k
        if isinstance(v, dict) and k not in ("codes", "first_messages"):
            yield from keys(v, k)
report = json.loads(bench)
# The paragraph that starts "`bench --json` prints" and runs to the next blank line.
m = re.search(r"^`bench --json` prints.*?(?=\n\n)", clients_page, re.M | re.S)
paragraph = m[0] if m else ""
if not paragraph:
    failures.append("docs/clients.md has no paragraph that starts \"`bench --json` prints\"")
for k in sorted(set(keys(report))):
    if f"`{k}`" not in paragraph:
        failures.append(f"bench --json field `{k}` is not named in docs/clients.md's paragraph")

# Metrics: the table's rows ("| `name`, `name` | type | labels | meaning |").
table_rows = {}
for line in metrics_page.splitlines():
    if line.startswith("| `"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            if name in table_rows:
                failures.append(f"metric {name} has two rows in docs/metrics.md")
            table_rows[name] = cells[3]
exported = set(re.findall(r"^# TYPE (embedding_[a-z_]+) ", exposition, re.M))
source = set()
for path in glob.glob(os.path.join(root, "service", "**", "*.cc"), recursive=True):
    source |= set(re.findall(r'"(embedding_[a-z_]+)"', read(path)))
if len(exported) < 20 or len(source) < len(exported):
    failures.append(f"read {len(exported)} exported and {len(source)} defined families: too few")
docs = {n for n in table_rows if n.startswith("embedding_")}
for name in sorted((exported | source) - docs):
    failures.append(f"metric {name} is exported or defined, but not in docs/metrics.md")
for name in sorted(docs - exported):
    conditional = re.match(r"(GPU only|host tier only|once the device is lost|once a feature fails)", table_rows[name])
    if not conditional:
        failures.append(f"metric {name} is in docs/metrics.md, but the server does not export it")
    elif name not in source:
        failures.append(f"metric {name} is in docs/metrics.md, but service/ does not define it")
# The rejection reasons: the kReject* values, and those named in the row.
header = read(os.path.join(root, "service", "rpc", "request_validation.h"))
reasons = set(re.findall(r'kReject\w+ = "([a-z_]+)"', header))
row = table_rows.get("embedding_rejected_ids_total", "")
named = set(re.findall(r"`([a-z_]+)`", row))
if len(reasons) < 10:
    failures.append(f"read only {len(reasons)} kReject* values from request_validation.h")
for r in sorted(reasons - named):
    failures.append(f"rejection reason {r} is not named in docs/metrics.md")
for r in sorted(named - reasons):
    failures.append(f"docs/metrics.md names rejection reason {r}, which the server has not")

# Relative links of README.md and docs/*.md: [text](path) and ![alt](path), outside code blocks.
pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
links = 0
for page in pages:
    text = re.sub(r"^```.*?^```", "", read(page), flags=re.M | re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        links += 1
        path = os.path.normpath(os.path.join(os.path.dirname(page), target.split("#")[0]))
        if not path.startswith(root + os.sep) or not os.path.exists(path):
            failures.append(f"{os.path.relpath(page, root)}: link {target} is not a file of the "
                            "repository")

for f in failures:
    print(f"FAIL: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"docs: the flag table matches the {len(defined)} flags of embedding-server, the "
      f"{len(set(keys(report)))} fields of bench --json are named, the metrics table matches the "
      f"{len(exported)} families exported and {len(source)} defined and the {len(reasons)} "
      f"rejection reasons, and {links} links resolve")
PY
# The samples: README's and the docs' marked code blocks, run.
"$PY" "$(dirname "$0")/readme_samples.py" "$ROOT" "$SERVER" "$CLIENT" "$WORK/samples" ||
  fail "a sample in README.md or docs/ no longer matches what the binaries print"
