#!/usr/bin/env bash
# deploy/grafana: the dashboard JSON is what deploy/grafana/generate-dashboard writes, it type-checks
# against @grafana/schema's Dashboard (`tsc --noEmit` on `(JSON) satisfies Dashboard`, which also
# rejects unknown fields), and the provisioning files point at its data source.
#   grafana_schema_check.sh
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
command -v node >/dev/null || fail "node is not installed (scripts/install-deps)"
need_npm @grafana/schema typescript
json=$ROOT/deploy/grafana/dashboards/embedding-server.json

"$PY" "$ROOT/deploy/grafana/generate-dashboard" "$WORK/generated.json"
diff -u "$json" "$WORK/generated.json" >/dev/null ||
  fail "deploy/grafana/dashboards/embedding-server.json is stale: run deploy/grafana/generate-dashboard"

dir=$(node_dir)
cp "$ROOT/tests/deploy/grafana_dashboard_ts.mjs" "$dir/"
(cd "$dir" && node grafana_dashboard_ts.mjs "$json" dashboard.ts) || fail "could not convert the JSON"
typecheck "$dir" dashboard.ts || fail "the dashboard does not satisfy @grafana/schema's Dashboard (above)"
echo "tsc: the dashboard satisfies @grafana/schema's Dashboard"

"$PY" - "$json" "$ROOT/deploy/grafana/provisioning" <<'PY' || fail "see above"
import json, sys, yaml
dashboard = json.load(open(sys.argv[1]))
[source] = yaml.safe_load(open(f"{sys.argv[2]}/datasources/prometheus.yaml"))["datasources"]
[variable] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
assert variable["current"]["value"] == source["uid"], "the dashboard's default data source"
assert source["type"] == variable["query"] == "prometheus"
names = {v["name"] for v in dashboard["templating"]["list"]}
assert {"pod", "table"} <= names, names
panels = [p for p in dashboard["panels"] if p["type"] != "row"]
assert all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])
[provider] = yaml.safe_load(open(f"{sys.argv[2]}/dashboards/embedding-server.yaml"))["providers"]
assert provider["type"] == "file" and provider["options"]["path"]
print(f"{len(panels)} panels on data source ${{datasource}} (default uid {source['uid']}); "
      "variables $pod, $table; provisioning consistent")
PY
