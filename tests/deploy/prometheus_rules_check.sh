#!/usr/bin/env bash
# deploy/prometheus passes promtool: `check rules` (and with --lint=all --lint-fatal), `check
# config` of the scrape config, and `test rules` (the unit tests of every alert, and of the error
# and shed ratios, 0 where no call failed); each alert is tested firing and not firing and has
# its runbook in docs/operations.md at an absolute URL; set-runbook-url, on a copy, moves every
# runbook_url (rules, unit tests, PrometheusRule) to another base, and the copy still passes.
#   prometheus_rules_check.sh
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null || fail "promtool is not installed (Debian's prometheus; scripts/install-deps)"
cd "$ROOT/deploy/prometheus"
rules=rules/embedding-server.rules.yml
promtool check rules "$rules" || fail "promtool check rules"
promtool check rules --lint=all --lint-fatal "$rules" || fail "promtool check rules --lint=all"
promtool check config prometheus.yml || fail "promtool check config"
promtool test rules tests/*.test.yml || fail "promtool test rules"
"$PY" "$ROOT/tests/deploy/rules_coverage.py" "$rules" tests/embedding-server.test.yml \
  "$ROOT/docs/operations.md" || fail "see above"

# set-runbook-url on a copy of deploy/prometheus and deploy/k8s (same layout).
mkdir -p "$WORK/copy/deploy"
cp -r "$ROOT/deploy/prometheus" "$ROOT/deploy/k8s" "$WORK/copy/deploy/"
url=https://runbooks.test.example/embedding-server/operations
"$WORK/copy/deploy/prometheus/set-runbook-url" "$url" >/dev/null || fail "set-runbook-url failed"
cd "$WORK/copy/deploy/prometheus"
promtool test rules tests/*.test.yml >/dev/null || fail "promtool test rules after set-runbook-url"
"$PY" "$ROOT/tests/deploy/rules_coverage.py" "$rules" tests/embedding-server.test.yml \
  "$ROOT/docs/operations.md" | grep -qF "at $url#" || fail "set-runbook-url left another base"
n=$(grep -c "runbook_url: $url#" "$WORK/copy/deploy/k8s/base/prometheus-rule.yaml")
((n == $(grep -c "alert:" "$rules"))) || fail "the PrometheusRule has $n runbook_urls at $url"
echo "set-runbook-url: rules, unit tests and the PrometheusRule moved to $url, tests pass"
