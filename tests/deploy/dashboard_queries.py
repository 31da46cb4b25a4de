"""Against a live Prometheus that scrapes a loaded server (tests/deploy/grafana_live_check.sh):
every panel query of the dashboard, with $pod, $table (every value Prometheus knows, as Grafana's
"All") and $__rate_interval filled in, returns data with a number in it; so does every recording
rule (the error, shed and late-answer ratios too: 0 while no call fails, not empty), and
prometheus-adapter's rule.
Polls until all do or the deadline passes.

Metrics this server cannot export (NOT_HERE: a GPU server's device memory, the host tier's cache
of a GPU table larger than its GPU memory, the error that lost a GPU, dcgm-exporter's GPU
utilisation) leave their queries empty here. Such a query is checked otherwise, and only while
the live server lacks the metric: the live Prometheus must accept it; each of its metric names
must be one the server exports or one of NOT_HERE (whose embedding_* names must be defined in
service/); and `promtool test rules` evaluates it on synthetic series, the NOT_HERE metrics with
the target labels this server's series carry plus their own labels, the others as the live
Prometheus has them, and wants one series with a number per selected pod (decoys of other pods
left out). A metric name that is neither exported nor listed, as a typo would be, fails.

  dashboard_queries.py PROMETHEUS_URL ADAPTER_RULES.yaml RECORDING_RULES.yml DEADLINE_SECONDS
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../deploy/grafana"))
import render_dashboard as rd  # noqa: E402

RATE_INTERVAL = "10s"  # ten 1 s scrapes (Grafana: at least four scrape intervals)
SERVICE_DIR = os.path.join(HERE, "../../service")

# Metrics the dashboard charts that a CPU server (with no host tier, never losing a GPU) without
# dcgm-exporter has no series of:
# name -> (why, [the metric's own label sets, as its exporter gives them, for synthetic series]).
# dcgm-exporter's pod label: `pod` where it is scraped with honorLabels, `exported_pod` where the
# target's own pod label (dcgm-exporter's pod) took `pod`; both are tried, and a GPU of another
# pod and an idle one (no pod) must be left out.
DCGM_GPU = {"gpu": "0", "UUID": "GPU-00000000-0000-0000-0000-000000000000", "device": "nvidia0",
            "modelName": "NVIDIA H200", "Hostname": "gpu-node-1"}
GPU_ONLY = "GPU servers only (service/server)"
HOST_TIER = "GPU servers with a table in the host tier only (service/server/cache_metrics.cc)"
# One table, one the live server serves (so that $table selects it).
HOST_TIER_TABLE = [{"table": "demo"}]
NOT_HERE = {
    "embedding_device_memory_used_bytes": (GPU_ONLY, [{"device": "cuda:0"}]),
    "embedding_device_memory_total_bytes": (GPU_ONLY, [{"device": "cuda:0"}]),
    "embedding_cache_hits_total": (HOST_TIER, HOST_TIER_TABLE),
    "embedding_cache_misses_total": (HOST_TIER, HOST_TIER_TABLE),
    "embedding_cache_rows": (HOST_TIER, HOST_TIER_TABLE),
    "embedding_cache_capacity_rows": (HOST_TIER, HOST_TIER_TABLE),
    "embedding_host_read_bytes_total": (HOST_TIER, HOST_TIER_TABLE),
    "embedding_device_lost_error_info": (
        "after a lost GPU only (service/metrics/device_loss_metrics.h)",
        [{"device": "cuda:0", "error": "cudaErrorIllegalAddress"}]),
    "DCGM_FI_DEV_GPU_UTIL": ("NVIDIA dcgm-exporter, not the server", [DCGM_GPU]),
}
# The label that carries the GPU's pod in dcgm-exporter's series, one synthetic case each.
DCGM_VARIANTS = ["pod", "exported_pod"]
# dcgm-exporter's own target labels in the synthetic series.
DCGM_TARGET = {"job": "dcgm-exporter", "instance": "10.0.0.9:9400", "namespace": "gpu-operator"}

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "atan2", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL expression reads (functions, keywords, label names and strings
    left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w.:])[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        rest = text[m.end():].lstrip()
        if m[0].lower() in KEYWORDS or rest.startswith("("):
            continue
        names.add(m[0])
    return names


def defined_in_service(name):
    """Whether a source file under service/ spells the metric name as a string literal."""
    for root, _, files in os.walk(SERVICE_DIR):
        for f in files:
            if f.endswith((".cc", ".h")) and f'"{name}"' in open(os.path.join(root, f)).read():
                return True
    return False


def has_number(url, expr):
    result = rd.api(url, "query", query=expr)["result"]
    return any(not math.isnan(float(s["value"][1])) for s in result)


def series_text(name, labels):
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def synthetic_check(url, expr, absent, pods):
    """promtool evaluates EXPR (variables filled in) over synthetic series; None if it gives one
    series with a number per selected pod, else what went wrong."""
    targets = [s for s in rd.api(url, "series", **{"match[]": 'up{job="embedding-server"}'})]
    if not targets:
        return "no embedding-server target in the live Prometheus"
    cases = [[]]  # per case, the input series
    for name in sorted(metric_names(expr) - absent):  # live metrics, as Prometheus holds them
        for s in rd.api(url, "series", **{"match[]": name}):
            for case in cases:
                case.append((series_text(name, s), "1+0x60"))
    for name in sorted(absent):
        _, own_labels = NOT_HERE[name]
        variants = DCGM_VARIANTS if name.startswith("DCGM_") else [None]
        new_cases = []
        for case in cases:
            for variant in variants:
                series = list(case)
                for target in targets:
                    base = {k: v for k, v in target.items() if k != "__name__"}
                    for own in own_labels:
                        if variant is None:
                            series.append((series_text(name, {**base, **own}), "0+1x60"))
                            continue
                        # Our pod's GPU, another pod's and an idle one; the GPU's pod under
                        # `variant` (without honorLabels, `pod` is dcgm-exporter's own pod).
                        exporter = dict(DCGM_TARGET)
                        if variant == "exported_pod":
                            exporter["pod"] = "nvidia-dcgm-exporter-abcde"
                        gpus = [({variant: base["pod"], "gpu": "0"}, "50+0x60"),
                                ({variant: "someone-else-7f9c", "gpu": "1"}, "90+0x60"),
                                ({"gpu": "2"}, "0+0x60")]
                        for labels, values in gpus:
                            series.append((series_text(name, {**exporter, **own, **labels}),
                                           values))
                new_cases.append(series)
        cases = new_cases
    test = {"rule_files": [], "evaluation_interval": "1s", "tests": [
        {"interval": "1s",
         "input_series": [{"series": s, "values": v} for s, v in case],
         "promql_expr_test": [{"expr": f"count(({expr}) == ({expr}))", "eval_time": "60s",
                               "exp_samples": [{"labels": "{}", "value": pods}]}]}
        for case in cases]}
    with tempfile.NamedTemporaryFile("w", suffix=".test.yml", delete=False) as f:
        yaml.safe_dump(test, f)
    try:
        run = subprocess.run(["promtool", "test", "rules", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if run.returncode != 0:
        return f"promtool on synthetic series:\n{run.stdout}{run.stderr}"
    return None


def checks(url, adapter_rules, recording_rules, problems):
    """(what, function returning True once it holds) for everything to check; a check that can
    never hold (a query with an unknown metric name) adds to `problems` and returns True."""
    dashboard = json.load(open(rd.DASHBOARD))
    values = {}

    def variables():
        values.update(rd.resolve_variables(url, dashboard))
        return None not in values.values()

    yield "variables $pod and $table have values", variables

    for name, (why, _) in sorted(NOT_HERE.items()):
        if name.startswith("embedding_") and not defined_in_service(name):
            problems.append(f"NOT_HERE names {name} ({why}), which no file under service/ defines")

    def target_check(p, t):
        expr = rd.substitute(t["expr"], values, RATE_INTERVAL)
        if has_number(url, expr):
            return True
        live = set(rd.api(url, "label/__name__/values"))
        names = metric_names(expr)
        absent = {n for n in names if n in NOT_HERE and n not in live}
        unknown = names - live - set(NOT_HERE)
        if unknown or not absent:
            return False  # not scraped yet, or never: said at the deadline
        problem = synthetic_check(url, expr, absent, len(values["pod"].strip("()").split("|")))
        if problem:
            problems.append(f"panel '{p['title']}' {t['refId']} ({', '.join(sorted(absent))} "
                            f"absent here): {problem}")
        else:
            print(f"panel '{p['title']}' {t['refId']}: {', '.join(sorted(absent))} absent here "
                  "(" + "; ".join(NOT_HERE[n][0] for n in sorted(absent)) +
                  "): checked on synthetic series")
        return True

    for p in rd.panels(dashboard):
        for t in p["targets"]:
            yield f"panel '{p['title']}' {t['refId']}", lambda p=p, t=t: target_check(p, t)
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


def unknown_names(url):
    """At the deadline: the panel queries' metric names that are neither live nor NOT_HERE."""
    live = set(rd.api(url, "label/__name__/values"))
    dashboard = json.load(open(rd.DASHBOARD))
    return {f"panel '{p['title']}' {t['refId']}": sorted(metric_names(t["expr"]) - live -
                                                          set(NOT_HERE))
            for p in rd.panels(dashboard) for t in p["targets"]}


def main():
    url, adapter_path, rules_path, deadline = sys.argv[1:]
    adapter_rules = yaml.safe_load(open(adapter_path))["rules"]
    recording = [r["record"] for g in yaml.safe_load(open(rules_path))["groups"]
                 for r in g["rules"] if "record" in r]
    problems = []
    pending = list(checks(url, adapter_rules, recording, problems))
    total, end = len(pending), time.monotonic() + float(deadline)
    while pending and time.monotonic() < end and not problems:
        # In order: the variables first, as the queries use them.
        while pending and not problems and pending[0][1]():
            pending.pop(0)
        if pending and not problems:
            time.sleep(0.5)  # poll: Prometheus' next scrape or rule evaluation
    # At the deadline, each check left once more, out of order: report only those that fail
    # on their own, not the ones queued behind the first failure.
    pending = [(what, check) for what, check in pending if not check()]
    unknown = unknown_names(url) if pending else {}
    for what, _ in pending:
        names = unknown.get(what)
        print(f"FAIL: no data: {what}" +
              (f" (metrics neither exported here nor in NOT_HERE: {', '.join(names)})"
               if names else ""), file=sys.stderr)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if pending or problems:
        sys.exit(1)
    print(f"live Prometheus: all {total} checks hold (panels, recording rules, adapter)")


if __name__ == "__main__":
    main()
