"""Against a live Prometheus that scrapes a loaded server (tests/deploy/grafana_live_check.sh):
every panel query of the dashboard, with $pod, $table (every value Prometheus knows, as Grafana's
"All") and $__rate_interval filled in, returns data with a number in it; so does every recording
rule (the error and shed ratios too: 0 while no call fails, not empty), and prometheus-adapter's
rule.
Polls until all do or the deadline passes.

  dashboard_queries.py PROMETHEUS_URL ADAPTER_RULES.yaml RECORDING_RULES.yml DEADLINE_SECONDS
"""
import json
import math
import os
import sys
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../deploy/grafana"))
import render_dashboard as rd  # noqa: E402

RATE_INTERVAL = "10s"  # ten 1 s scrapes (Grafana: at least four scrape intervals)


def has_number(url, expr):
    result = rd.api(url, "query", query=expr)["result"]
    return any(not math.isnan(float(s["value"][1])) for s in result)


def checks(url, adapter_rules, recording_rules):
    """(what, function returning True once it holds) for everything to check."""
    dashboard = json.load(open(rd.DASHBOARD))
    values = {}

    def variables():
        values.update(rd.resolve_variables(url, dashboard))
        return None not in values.values()

    yield "variables $pod and $table have values", variables
    for p in rd.panels(dashboard):
        for t in p["targets"]:
            yield (f"panel '{p['title']}' {t['refId']}",
                   lambda t=t: has_number(url, rd.substitute(t["expr"], values, RATE_INTERVAL)))
    for rule in recording_rules:
        yield f"recording rule {rule}", lambda rule=rule: has_number(url, rule)
    for r in adapter_rules:
        series = r["seriesQuery"].strip("'")
        yield "prometheus-adapter seriesQuery", lambda s=series: bool(
            rd.api(url, "series", **{"match[]": s}))
        # As the adapter fills it in for the HPA's pods (the $pod values, once resolved).
        query = (r["metricsQuery"].replace("<<.Series>>", "embedding_queue_wait_seconds_sum")
                 .replace("<<.LabelMatchers>>", 'namespace="test",pod=~"$pod"')
                 .replace("<<.GroupBy>>", "pod"))
        yield "prometheus-adapter metricsQuery", lambda q=query: has_number(
            url, rd.substitute(q, values, ""))


def main():
    url, adapter_path, rules_path, deadline = sys.argv[1:]
    adapter_rules = yaml.safe_load(open(adapter_path))["rules"]
    recording = [r["record"] for g in yaml.safe_load(open(rules_path))["groups"]
                 for r in g["rules"] if "record" in r]
    pending = list(checks(url, adapter_rules, recording))
    total, end = len(pending), time.monotonic() + float(deadline)
    while pending and time.monotonic() < end:
        # In order: the variables first, as the queries use them.
        while pending and pending[0][1]():
            pending.pop(0)
        if pending:
            time.sleep(0.5)  # poll: Prometheus' next scrape or rule evaluation
    for what, _ in pending:
        print(f"FAIL: no data: {what}", file=sys.stderr)
    if pending:
        sys.exit(1)
    print(f"live Prometheus: all {total} checks return data (panels, recording rules, adapter)")


main()
