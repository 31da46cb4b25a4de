"""Every alert in the rules has a unit test where it fires and one where it does not, and a
runbook section in docs/operations.md that its runbook_url points at: an absolute http(s) URL
(Alertmanager's receivers open it as it is), the same base for every alert (set-runbook-url sets
them together), with the alert's name in lower case as the fragment, a heading of operations.md.

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
failures, bases = [], set()
for name, rule in sorted(alerts.items()):
    if name not in fires:
        failures.append(f"{name}: no unit test where it fires")
    if name not in quiet:
        failures.append(f"{name}: no unit test where it does not fire")
    url = rule.get("annotations", {}).get("runbook_url", "")
    base, _, fragment = url.partition("#")
    bases.add(base)
    if not re.fullmatch(r"https?://[^\s#]+", base):
        failures.append(f"{name}: runbook_url {url!r} is not an absolute http(s) URL")
    if fragment != name.lower() or fragment not in anchors:
        failures.append(f"{name}: runbook_url {url!r} does not end in #{name.lower()}, "
                        "a heading of docs/operations.md")
if len(bases) > 1:
    failures.append(f"the runbook_urls have several bases: {sorted(bases)}")
for f in failures:
    print(f"FAIL: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"{len(alerts)} alerts: each tested firing and not firing, each with a runbook section "
      f"at {bases.pop()}#...")
