"""Every alert in the rules has a unit test where it fires and one where it does not, and a
runbook section in docs/operations.md that its runbook_url points at.

  rules_coverage.py RULES.yml TESTS.yml OPERATIONS.md
"""
import re
import sys

import yaml

rules_path, tests_path, doc_path = sys.argv[1:]
alerts = {r["alert"]: r for g in yaml.safe_load(open(rules_path))["groups"] for r in g["rules"]
          if "alert" in r}
fires, quiet = set(), set()
for test in yaml.safe_load(open(tests_path))["tests"]:
    for t in test.get("alert_rule_test", []):
        (fires if t.get("exp_alerts") else quiet).add(t["alertname"])

# GitHub's anchors: the heading in lower case, spaces to dashes, punctuation dropped.
anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+ (.*)$", open(doc_path).read(), re.M)}
failures = []
for name, rule in sorted(alerts.items()):
    if name not in fires:
        failures.append(f"{name}: no unit test where it fires")
    if name not in quiet:
        failures.append(f"{name}: no unit test where it does not fire")
    url = rule.get("annotations", {}).get("runbook_url", "")
    if not url.startswith("docs/operations.md#") or url.split("#")[1] not in anchors:
        failures.append(f"{name}: runbook_url {url!r} is no heading of docs/operations.md")
for f in failures:
    print(f"FAIL: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"{len(alerts)} alerts: each tested firing and not firing, each with a runbook section")
