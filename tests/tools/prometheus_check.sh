#!/usr/bin/env bash
# The real server's /metrics passes `promtool check metrics`, and a real Prometheus scrapes it:
# after traffic, PromQL over the scraped series sees the ids and the calls.
#   prometheus_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
SERVER=$1 CLIENT=$2
command -v prometheus >/dev/null || fail "Debian's prometheus package is not installed"
start_server "$SERVER" --demo_table=1000x16
"$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup 1 2 3 >/dev/null || fail "lookup failed"
"$CLIENT" --target=127.0.0.1:$GRPC_PORT bench --requests=50 --concurrency=4 \
  --ids_per_request=10 --warmup=0 --json >/dev/null || fail "bench failed"
"$CLIENT" --target=127.0.0.1:$GRPC_PORT --dtype=bfloat16 lookup 1 2 >/dev/null ||
  fail "bfloat16 lookup failed"
"$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup 5000 >/dev/null 2>&1 && fail "id 5000 should fail"

curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics.txt" || fail "no /metrics"
promtool check metrics <"$WORK/metrics.txt" || fail "promtool check metrics found problems"
echo "promtool check metrics: clean ($(grep -c '^[a-z]' "$WORK/metrics.txt") samples)"

PROM_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: embedding
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
YAML
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "bad prometheus config"
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address=127.0.0.1:$PROM_PORT >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)

# query EXPR: the instant value of EXPR, or empty while Prometheus has not scraped it yet.
query() {
  curl -sf --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
ids=""
for _ in $(seq 120); do
  ids=$(query 'sum(embedding_ids_total{table="demo"})' 2>/dev/null || true)
  [[ -n $ids ]] && break
  sleep 0.5
done
[[ -n $ids ]] || { cat "$WORK/prometheus.log"; fail "Prometheus never scraped the server"; }
[[ $ids == 505 ]] || fail "embedding_ids_total is $ids, expected 505 (3 + 50 x 10 + 2)"
ok=$(query 'sum(grpc_server_handled_total{grpc_method="LookUp",grpc_code="OK"})')
[[ $ok == 52 ]] || fail "grpc_server_handled_total OK LookUp is $ok, expected 52"
# The bytes sent in each answer's own type: 503 float32 rows of 16 (64 bytes), 2 bfloat16 (32).
answer_bytes=$(query 'sum(embedding_answer_bytes_total{table="demo"})')
[[ $answer_bytes == 32256 ]] ||
  fail "embedding_answer_bytes_total is $answer_bytes, expected 32256 (503 x 64 + 2 x 32)"
# The process metrics, as the standard client libraries name them.
rss=$(query 'process_resident_memory_bytes > 1e6')
[[ -n $rss ]] || fail "no process_resident_memory_bytes (or under 1 MB)"
started=$(query 'time() - process_start_time_seconds < 3600 and time() - process_start_time_seconds > 0')
[[ -n $started ]] || fail "process_start_time_seconds is not within the last hour"
for m in process_cpu_seconds_total process_virtual_memory_bytes process_open_fds process_max_fds; do
  [[ -n $(query "$m") ]] || fail "no $m"
done
bad=$(query 'sum(embedding_rejected_ids_total{reason="out_of_range"})')
[[ $bad == 1 ]] || fail "rejected out_of_range ids is $bad, expected 1"
p99=$(query 'histogram_quantile(0.99, sum by (le) (embedding_request_duration_seconds_bucket{method="LookUp"}))')
[[ -n $p99 ]] || fail "no request duration histogram"
echo "Prometheus scraped the server: ids=$ids ok_lookups=$ok rejected=$bad p99=${p99}s" \
  "answer_bytes=$answer_bytes rss=${rss}"
