#!/usr/bin/env bash
# Replicas over several devices against one device, through gRPC on loopback: for each size
# (ids a call x dim) and concurrency, one server on --device=ONE and one on --device=MANY with
# --placement=replicas (and one with --placement=rows), each measured by `embedding-client bench`
# (closed loop) in turn, on the same demo table. Prints a markdown table: req/s, ids/s and p99 of
# each, and the ratios to ONE. The host's gRPC ceiling may bind before the GPUs do: compare with
# bench/bench-service's transport-only reference.
#   bench/multi_device/replicas_service_bench.sh SERVER CLIENT [ONE [MANY]]
#     ONE default cuda:0, MANY default cuda:0,cuda:1 (cuda:0,cuda:0 on a host of one GPU)
#   SIZES ("16x128 2048x768"), CONCURRENCIES ("64 256"), DURATION (5 s), WARMUP (1 s),
#   CONNECTIONS (4), ROWS (100000) from the environment.
set -euo pipefail
server=$1 client=$2 one=${3:-cuda:0} many=${4:-cuda:0,cuda:1}
sizes=${SIZES:-"16x128 2048x768"}
concurrencies=${CONCURRENCIES:-"64 256"}
work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# Starts a server with the given flags on a demo table of dim $1; sets pid and port.
start() {
  local dim=$1; shift
  "$server" --grpc_address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
    --demo_table="${ROWS:-100000}x$dim" "$@" >"$work/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "health SERVING" "$work/server.log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
  done
  port=$(sed -n 's/.*gRPC listening on [^ ]*:\([0-9]*\) .*/\1/p' "$work/server.log" | head -n 1)
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

# `embedding-client bench` on the running server: "ok_req/s p99 failed", where ok_req/s counts
# only the calls answered OK and failed names the codes of the others ("-" for none).
measure() {
  "$client" --target="127.0.0.1:$port" bench --concurrency="$2" --ids_per_request="$1" \
    --connections="${CONNECTIONS:-4}" --duration="${DURATION:-5}s" --warmup="${WARMUP:-1}s" \
    >"$work/bench.txt" 2>&1
  awk '/^req\/s/ {r=$2} /^latency us/ {for (k=1; k<=NF; k++) if ($k=="p99") p=$(k+1)}
       /^codes/ {for (k=2; k<NF; k+=2) {n+=$(k+1); if ($k=="OK") ok=$(k+1); else f=f $k ":" $(k+1) ","}}
       END {printf "%f %s %s", (n > 0 ? r * ok / n : 0), p, (f == "" ? "-" : f)}' "$work/bench.txt"
}

echo "OK calls/s only; failed: the codes of calls that were not OK (- for none)."
echo
echo "| ids x dim | concurrency | $one OK/s | p99 (us) | $many replicas OK/s | p99 (us) | vs one | $many rows OK/s | p99 (us) | vs one | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for size in $sizes; do
  ids=${size%x*} dim=${size#*x}
  declare -A result=()
  for setup in one replicas rows; do
    case $setup in
      one) start "$dim" --device="$one" ;;
      *) start "$dim" --device="$many" --placement="$setup" ;;
    esac
    for c in $concurrencies; do
      result[$setup.$c]=$(measure "$ids" "$c")
    done
    stop
  done
  for c in $concurrencies; do
    read -r r1 p1 f1 <<<"${result[one.$c]}"
    read -r r2 p2 f2 <<<"${result[replicas.$c]}"
    read -r r3 p3 f3 <<<"${result[rows.$c]}"
    printf "| %s | %s | %.0f | %.0f | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx | %s %s %s |\n" "$size" "$c" \
      "$r1" "$p1" "$r2" "$p2" "$(awk "BEGIN {print $r2 / $r1}")" "$r3" "$p3" \
      "$(awk "BEGIN {print $r3 / $r1}")" "$f1" "$f2" "$f3"
  done
  unset result
done
