#!/usr/bin/env bash
# deploy/prometheus passes promtool: `check rules` (and with --lint=all --lint-fatal), `check
# config` of the scrape config, and `test rules` (the unit tests of every alert); each alert is
# tested firing and not firing and has its runbook in docs/operations.md.
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
