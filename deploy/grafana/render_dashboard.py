#!/usr/bin/env python3
"""Draws the dashboard's panels from a live Prometheus into one PNG, as Grafana would show them
(no Grafana server installs here): docs/dashboard.png is made this way. Also the library that
tests/deploy/dashboard_queries.py uses to fill in the dashboard's variables and queries.

  deploy/grafana/render_dashboard.py PROMETHEUS_URL OUT.png [--minutes=M] [--rate_interval=I]

Needs Debian's python3-matplotlib (run it with /usr/bin/python3). $pod and $table take every
value Prometheus knows (Grafana's "All"), $__rate_interval the given interval (default 1m).
The PNG carries what it drew as a text chunk (PNG_KEY): per panel its title, type, unit and
queries as the dashboard JSON has them, and the series drawn; tests/deploy/dashboard_png.py
compares that with the JSON, so that a picture of another dashboard is caught.
"""
import argparse
import json
import math
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards",
                         "embedding-server.json")
PNG_KEY = "embedding-server dashboard"  # the PNG text chunk holding what was drawn (JSON)


def panel_facts(p):
    """What the picture of panel p must agree with the dashboard JSON on."""
    return {"title": p["title"], "type": p["type"],
            "unit": p["fieldConfig"]["defaults"].get("unit", ""),
            "targets": [{"expr": t["expr"], "legendFormat": t.get("legendFormat", "")}
                        for t in p["targets"]]}


def api(url, path, **params):
    """GET url/api/v1/path with params (a list value repeats the key); the response's data."""
    query = urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(f"{url}/api/v1/{path}?{query}", timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:  # a bad query: Prometheus says why in the body
        raise RuntimeError(f"{path} {params}: {e.read().decode()}") from None
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def substitute(text, values, rate_interval):
    """Grafana's substitution: a multi-value variable becomes a regex alternation."""
    text = text.replace("$__rate_interval", rate_interval)
    for name in sorted(values, key=len, reverse=True):
        text = text.replace(f"${{{name}}}", values[name]).replace(f"${name}", values[name])
    return text


def resolve_variables(url, dashboard):
    """{name: regex} for each query variable, from label_values(SELECTOR, LABEL) as Grafana runs
    it; a variable with no value yet maps to None."""
    values = {}
    for v in dashboard["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.*), *(\w+)\)", v["query"]["query"])
        if None in values.values():  # an earlier variable, which this one may use, has none
            values[v["name"]] = None
            continue
        selector = substitute(m[1], values, "")
        found = sorted({s[m[2]] for s in api(url, "series", **{"match[]": selector}) if m[2] in s})
        # A regex in a PromQL string: its backslashes doubled, as Grafana does.
        alternation = "|".join(re.escape(x).replace("\\", "\\\\") for x in found)
        values[v["name"]] = f"({alternation})" if found else None
    return values


def panels(dashboard):
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def legend(fmt, labels):
    return re.sub(r"\{\{ *(\w+) *\}\}", lambda m: labels.get(m[1], ""), fmt) or str(labels)


def draw(url, out, minutes, rate_interval):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.load(open(DASHBOARD))
    values = resolve_variables(url, dashboard)
    if None in values.values():
        raise SystemExit(f"no value for a variable yet: {values}")
    shown = panels(dashboard)
    # Cells of a two-column grid, in order: a wide panel takes a line of its own, leaving the
    # half-line before it empty.
    cells = 0
    for p in shown:
        wide = p["gridPos"]["w"] == 24
        cells += (cells % 2 if wide else 0) + (2 if wide else 1)
    rows = math.ceil(cells / 2)
    fig = plt.figure(figsize=(16, 3.2 * rows), dpi=80)
    inch = 1 / (3.2 * rows)  # of the figure's height
    fig.suptitle(f"{dashboard['title']}: last {minutes:g} min", fontsize=14, x=0.1, ha="left",
                 y=1 - 0.1 * inch)
    grid = fig.add_gridspec(rows, 2, hspace=0.6, wspace=0.15, top=1 - 0.8 * inch)
    end = time.time()
    start, step = end - 60 * minutes, max(1.0, 60 * minutes / 150)
    cell = 0
    drawn = []  # per panel: panel_facts and the series drawn
    for p in shown:
        series_drawn = []
        drawn.append({**panel_facts(p), "series": series_drawn})
        wide = p["gridPos"]["w"] == 24
        if wide and cell % 2:
            cell += 1
        ax = fig.add_subplot(grid[cell // 2, :] if wide else grid[cell // 2, cell % 2])
        cell += 2 if wide else 1
        ax.set_title(p["title"], fontsize=10, loc="left")
        unit = p["fieldConfig"]["defaults"].get("unit", "")
        exprs = [(substitute(t["expr"], values, rate_interval), t.get("legendFormat", ""))
                 for t in p["targets"]]
        if p["type"] == "table":
            series_drawn += draw_table(ax, url, exprs)
            continue
        for expr, fmt in exprs:
            result = api(url, "query_range", query=expr, start=start, end=end, step=step)["result"]
            if p["type"] == "heatmap":
                series_drawn += draw_heatmap(ax, result)
                break
            for series in result:
                t = [float(x) - end for x, _ in series["values"]]
                y = [float(v) for _, v in series["values"]]
                ax.plot(t, y, linewidth=1, label=legend(fmt, series["metric"]))
                series_drawn.append(legend(fmt, series["metric"]))
        if not series_drawn:  # as Grafana says it
            ax.text(0.5, 0.5, "No data", transform=ax.transAxes, ha="center", va="center",
                    fontsize=12, color="grey")
        if p["type"] == "timeseries":
            ax.set_xlabel("seconds before now", fontsize=7)
            ax.set_ylabel(unit, fontsize=7)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, loc="upper left", ncol=2)
        ax.tick_params(labelsize=7)
    fig.savefig(out, bbox_inches="tight",
                metadata={PNG_KEY: json.dumps({"title": dashboard["title"], "panels": drawn})})


def draw_heatmap(ax, result):
    """Bucket increases over time (Grafana's heatmap of a histogram): one row per bucket. Returns
    the buckets drawn."""
    buckets = sorted(result, key=lambda s: float(s["metric"]["le"]))
    if not buckets:
        return []
    times = [float(t) for t, _ in buckets[0]["values"]]
    grid = [[0.0] * len(times) for _ in buckets]
    for i, s in enumerate(buckets):
        for t, v in s["values"]:
            if float(t) in times and not math.isnan(float(v)):
                grid[i][times.index(float(t))] = float(v)
    # Cumulative buckets to per-bucket counts.
    for i in range(len(buckets) - 1, 0, -1):
        grid[i] = [max(0.0, a - b) for a, b in zip(grid[i], grid[i - 1])]
    used = [i for i, row in enumerate(grid) if any(row)] or [0]
    lo, hi = max(0, used[0] - 1), min(len(grid), used[-1] + 2)
    ax.imshow(grid[lo:hi], aspect="auto", origin="lower", cmap="Oranges", interpolation="nearest")
    ax.set_yticks(range(hi - lo))
    ax.set_yticklabels([s["metric"]["le"] for s in buckets[lo:hi]], fontsize=6)
    ax.set_xticks([])
    ax.set_ylabel("le", fontsize=7)
    return [f"le={s['metric']['le']}" for s in buckets[lo:hi]]


def draw_table(ax, url, exprs):
    """Instant values merged by (pod, table), as the panel's merge transformation does, a column
    per query named by its legend (the panel's organize transformation; the query without one
    gives the labels dtype and device). Returns the rows drawn."""
    rows = {}
    for expr, name in exprs:
        for s in api(url, "query", query=expr)["result"]:
            key = (s["metric"].get("pod", ""), s["metric"].get("table", ""))
            row = rows.setdefault(key, {"pod": key[0], "table": key[1]})
            row.update({k: v for k, v in s["metric"].items() if k in ("dtype", "device")})
            if name:
                row[name] = s["value"][1]
    columns = ["pod", "table", "dtype", "device"] + [name for _, name in exprs if name]
    ax.axis("off")
    if rows:
        ax.table(cellText=[[r.get(c, "") for c in columns] for r in rows.values()],
                 colLabels=columns, loc="upper left", cellLoc="left")
    return [f"{pod} {table}" for pod, table in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prometheus")
    parser.add_argument("out")
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--rate_interval", default="1m")
    args = parser.parse_args()
    draw(args.prometheus.rstrip("/"), args.out, args.minutes, args.rate_interval)


if __name__ == "__main__":
    main()
