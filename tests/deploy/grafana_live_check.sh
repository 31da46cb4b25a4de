#!/usr/bin/env bash
# The dashboard against reality: a real Prometheus (Debian's, on loopback) with deploy/prometheus's
# scrape config and rules scrapes a real server under load from `embedding-client bench`, its
# default table rewritten meanwhile through the admin listener by update_load (bench/update:
# UpdateRows streams of a few seconds each, one after another, so that streams end and their
# codes are counted), and a second table, served from a version directory, saved, pinned to its
# first version, refused a missing one and unpinned after each of those streams
# (`embedding-client save`, `pin`, `unpin`: SaveTable and LoadVersion); every panel query
# returns data (dashboard_queries.py; those of metrics a CPU server lacks, on synthetic series),
# so do the recording rules and the prometheus-adapter rule; the server's own state (health, device
# lost, queue limits, table bytes) is in Prometheus as it is; and render_dashboard.py draws the
# panels from it. The picture's text chunk must list the dashboard's panels and queries, and so
# must docs/dashboard.png's (dashboard_png.py): a change of the dashboard fails here until the
# picture is redrawn.
#   grafana_live_check.sh SERVER CLIENT UPDATE_LOAD
# With DASHBOARD_PNG=PATH it also lets the load run for LOAD_SECONDS (default 90) and draws that
# span into PATH, which it checks instead of docs/dashboard.png: how docs/dashboard.png is made.
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
SERVER=$1 CLIENT=$2 UPDATE_LOAD=${3:-}
[[ -x $UPDATE_LOAD ]] || fail "no update_load given (bench/update/update_load, built unless" \
  "EMB_BUILD_BENCH=OFF): the row-update panels need it"
command -v prometheus >/dev/null || fail "Debian's prometheus is not installed (scripts/install-deps)"
"$PY" -c 'import matplotlib, yaml' 2>/dev/null ||
  fail "python3-matplotlib or python3-yaml is not installed (scripts/install-deps)"

# Three tables: demo, the default, from a plain file (version 0); items from a version directory
# (items/1/items.npy), whose saves write items/2/, items/3/, ...; parts split by rows over two
# parts on the CPU (the per-part panels).
"$PY" - "$WORK" <<'PY'
import os, sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(42)
np.save(f"{work}/demo.npy", rng.uniform(-1, 1, (20000, 32)).astype(np.float32))
os.makedirs(f"{work}/items/1")
np.save(f"{work}/items/1/items.npy", rng.uniform(-1, 1, (1000, 32)).astype(np.float32))
np.save(f"{work}/parts.npy", rng.uniform(-1, 1, (4000, 32)).astype(np.float32))
PY
start_server "$SERVER" --table=demo="$WORK/demo.npy" --table=items="$WORK/items" \
  --table=parts="$WORK/parts.npy",devices=cpu+cpu,placement=rows \
  --drain_seconds=0 --admin_address=127.0.0.1:0 --admin_insecure
ADMIN_PORT=$(sed -n 's/.*admin service (UpdateRows) on [^ ]*:\([0-9]*\),.*/\1/p' "$SERVER_LOG")
[[ -n $ADMIN_PORT ]] || { cat "$SERVER_LOG"; fail "no admin port in the server's log"; }
# deploy/prometheus/prometheus.yml itself, pointed at this server, scraping every second, with the
# namespace label a PodMonitor would add (prometheus-adapter's rule selects on it).
PROM_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PY" - "$ROOT/deploy/prometheus/prometheus.yml" "$WORK/prometheus.yml" "$METRICS_PORT" <<'PY'
import os, sys, yaml
source, out, port = sys.argv[1:]
config = yaml.safe_load(open(source))
config["global"].update(scrape_interval="1s", evaluation_interval="1s")
config["rule_files"] = [os.path.join(os.path.dirname(source), f) for f in config["rule_files"]]
[job] = config["scrape_configs"]
job["static_configs"] = [{"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": "test"}}]
yaml.safe_dump(config, open(out, "w"))
PY
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address=127.0.0.1:$PROM_PORT >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)

# Load for the whole check (it is stopped at exit), and a few rejected ids for their panel. At a
# set rate (calls a second): every panel needs data, not the most calls the machine can make; an
# unpaced closed loop took a core from the tests running beside this one. The picture for the docs
# (DASHBOARD_PNG) is drawn from the unpaced load.
load_seconds=${DASHBOARD_PNG:+${LOAD_SECONDS:-90}}
pace=(--rps=400) pace_parts=(--rps=100)
[[ -z ${DASHBOARD_PNG:-} ]] || pace=() pace_parts=()
"$CLIENT" --target=127.0.0.1:$GRPC_PORT bench --duration=${load_seconds:-60}s --warmup=0 \
  --concurrency=4 --ids_per_request=64 --id_distribution=zipf "${pace[@]}" >"$WORK/bench.log" 2>&1 &
PIDS+=($!)
bench_pid=$!
"$CLIENT" --target=127.0.0.1:$GRPC_PORT --table=parts bench --duration=${load_seconds:-60}s \
  --warmup=0 --concurrency=1 --ids_per_request=64 --id_distribution=zipf "${pace_parts[@]}" \
  >"$WORK/bench_parts.log" 2>&1 &
PIDS+=($!)
bench_parts_pid=$!
# Row updates for as long: 20000 rows/s in messages of 1000 rows, on streams of 5 s each, one
# after another (a stream's code is counted when it ends). Each update_load starts from the
# table's last applied sequence, which the previous one left. After each stream, admin calls on
# items (SaveTable, LoadVersion): save (a new version, served), pin 1 (loaded), pin 99 (refused:
# no such version, the served one stays; the client fails), unpin (the newest, loaded). Stopped
# with the check (TERM); a failure is logged for the end of the check.
version_calls() {
  local admin=(--admin_target=127.0.0.1:$ADMIN_PORT --table=items --timeout=30s)
  "$CLIENT" "${admin[@]}" save && "$CLIENT" "${admin[@]}" pin 1 &&
    ! "$CLIENT" "${admin[@]}" pin 99 && "$CLIENT" "${admin[@]}" unpin
}
(
  trap '[[ -n ${child:-} ]] && kill "$child" 2>/dev/null; exit 0' TERM
  end=$((SECONDS + ${load_seconds:-60}))
  while ((SECONDS < end)); do
    "$UPDATE_LOAD" --target=127.0.0.1:$GRPC_PORT --admin_target=127.0.0.1:$ADMIN_PORT \
      --rows_per_second=20000 --rows_per_message=1000 --duration_s=5 >>"$WORK/update.log" 2>&1 &
    child=$!
    wait "$child" || { echo "LOOP FAILED: update_load (exit $?)" >>"$WORK/update.log"; exit 1; }
    version_calls >>"$WORK/versions.log" 2>&1 &
    child=$!
    wait "$child" || { echo "LOOP FAILED: the version calls above" >>"$WORK/versions.log"; exit 1; }
  done
) &
PIDS+=($!)
updates_pid=$!
for id in 20000 20001 -1; do
  "$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup -- "$id" >/dev/null 2>&1 && fail "id $id accepted"
done

"$PY" "$ROOT/tests/deploy/dashboard_queries.py" "http://127.0.0.1:$PROM_PORT" \
  "$ROOT/deploy/k8s/prometheus-adapter/rules.yaml" \
  "$ROOT/deploy/prometheus/rules/embedding-server.rules.yml" 40 ||
  { tail -5 "$WORK/prometheus.log"; cat "$WORK/bench.log" "$WORK/bench_parts.log"; tail -5 "$WORK/update.log"
    tail -5 "$WORK/versions.log"; fail "see above"; }
# What the server says of itself, as Prometheus scraped it (the alerts read these as they are):
# serving, its device not lost, each table's queue limit the flag's default and its bytes its rows'.
"$PY" - "http://127.0.0.1:$PROM_PORT" "$ROOT/deploy/grafana" <<'PY' || fail "the server's state in Prometheus (above)"
import sys
url, grafana = sys.argv[1:]
sys.path.insert(0, grafana)
import render_dashboard as rd
want = {
    'embedding_health_status{job="embedding-server"}': {(): 1},
    'embedding_device_lost{job="embedding-server"}': {("cpu",): 0},
    'embedding_queue_limit_ids{job="embedding-server"}': {("demo",): 1048576, ("items",): 1048576,
                                                          ("parts",): 1048576},
    'embedding_table_bytes{job="embedding-server"}': {("demo",): 20000 * 32 * 4,
                                                      ("items",): 1000 * 32 * 4,
                                                      ("parts",): 4000 * 32 * 4},
    'embedding_table_device_bytes{job="embedding-server"}': {("demo",): 0, ("items",): 0,
                                                             ("parts",): 0},
    'embedding_part_device_bytes{job="embedding-server"}': {("cpu", "parts"): 0},
}
failed = False
for expr, values in want.items():
    got = {tuple(v for k, v in sorted(s["metric"].items()) if k in ("device", "table")):
           float(s["value"][1]) for s in rd.api(url, "query", query=expr)["result"]}
    if got != values:
        print(f"FAIL: {expr}: {got}, expected {values}", file=sys.stderr)
        failed = True
# None of the alerts on them is pending or firing.
alerts = rd.api(url, "query", query='ALERTS{alertname=~"EmbeddingServer(NotReady|DeviceLost|'
                'Restarted)"}')["result"]
if alerts:
    print(f"FAIL: alerts pending or firing: {alerts}", file=sys.stderr)
    failed = True
if failed:
    sys.exit(1)
print("Prometheus has the server's health, device, queue limits and table bytes as they are")
PY
"$PY" "$ROOT/deploy/grafana/render_dashboard.py" "http://127.0.0.1:$PROM_PORT" "$WORK/dashboard.png" \
  --minutes=0.5 --rate_interval=10s || fail "render_dashboard.py failed"
[[ -s $WORK/dashboard.png ]] || fail "render_dashboard.py wrote no PNG"
echo "render_dashboard.py: drew the dashboard ($(stat -c %s "$WORK/dashboard.png") bytes)"
redraw="DASHBOARD_PNG=\$PWD/docs/dashboard.png LOAD_SECONDS=120 tests/deploy/grafana_live_check.sh build/service/embedding-server build/client/embedding-client build/bench/update/update_load (docs/operations.md, section 4)"
"$PY" "$ROOT/tests/deploy/dashboard_png.py" "$WORK/dashboard.png" "$redraw" ||
  fail "render_dashboard.py's picture disagrees with the dashboard JSON (above)"

if [[ -n ${DASHBOARD_PNG:-} ]]; then
  wait "$bench_pid" || fail "bench failed: $(cat "$WORK/bench.log")"
  wait "$bench_parts_pid" || fail "bench of parts failed: $(cat "$WORK/bench_parts.log")"
  wait "$updates_pid" ||
    fail "update_load or a version call failed: $(tail -5 "$WORK/update.log" "$WORK/versions.log")"
  "$PY" "$ROOT/deploy/grafana/render_dashboard.py" "http://127.0.0.1:$PROM_PORT" "$DASHBOARD_PNG" \
    --minutes="$(awk "BEGIN {print $load_seconds / 60}")" --rate_interval=10s
  echo "wrote $DASHBOARD_PNG"
fi
"$PY" "$ROOT/tests/deploy/dashboard_png.py" "${DASHBOARD_PNG:-$ROOT/docs/dashboard.png}" "$redraw" ||
  fail "${DASHBOARD_PNG:-docs/dashboard.png} is stale (above)"
! grep -hs -B5 "^LOOP FAILED" "$WORK/update.log" "$WORK/versions.log" ||
  fail "update_load or the version calls failed (above)"
