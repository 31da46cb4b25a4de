"""A picture of the dashboard (render_dashboard.py's PNG, such as docs/dashboard.png) against the
dashboard JSON: the PNG's text chunk says what was drawn, panel by panel (title, type, unit, the
queries and their legends, the series drawn). It must list the JSON's panels, in order, with
the same queries, and every panel must show a series, but those whose every query reads a metric
that a CPU server without dcgm-exporter lacks (dashboard_queries.NOT_HERE: "No data" there).
Deterministic: no pixels are compared, and the series drawn are only counted.

  dashboard_png.py PNG REDRAW_HINT
"""
import difflib
import json
import os
import sys

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../deploy/grafana"))
sys.path.insert(0, HERE)
import dashboard_queries as dq  # noqa: E402
import render_dashboard as rd  # noqa: E402


def main():
    path, hint = sys.argv[1:]
    text = Image.open(path).text.get(rd.PNG_KEY)
    if text is None:
        sys.exit(f"FAIL: {path} has no '{rd.PNG_KEY}' text chunk: it was not drawn by "
                 f"render_dashboard.py as it is now. Redraw it: {hint}")
    drawn = json.loads(text)["panels"]
    want = [rd.panel_facts(p) for p in rd.panels(json.load(open(rd.DASHBOARD)))]
    got = [{k: v for k, v in p.items() if k != "series"} for p in drawn]
    if got != want:
        lines = lambda panels: [json.dumps(p, sort_keys=True) for p in panels]
        diff = difflib.unified_diff(lines(want), lines(got), "dashboard JSON", path, lineterm="",
                                    n=0)
        print("\n".join(diff), file=sys.stderr)
        sys.exit(f"FAIL: {path} shows another dashboard than "
                 "deploy/grafana/dashboards/embedding-server.json (a panel per line above: "
                 f"- in the JSON, + in the picture). Redraw it: {hint}")
    empty = [p["title"] for p in drawn if not p["series"] and not all(
        dq.metric_names(t["expr"]) & set(dq.NOT_HERE) for t in p["targets"])]
    if empty:
        sys.exit(f"FAIL: {path} shows no data in {empty}. Redraw it: {hint}")
    without = sum(not p["series"] for p in drawn)
    print(f"{path}: the dashboard's {len(drawn)} panels with their queries, each with data but "
          f"{without} whose metrics a CPU server lacks")


main()
