#!/usr/bin/env bash
# A table sharded over servers through the Python client and embedding-client, against the real
# server: one server of the seeded demo table and three of its shards (--shard=K/3).
# - Python: ShardedClient.look_up answers exactly as EmbeddingClient.look_up on the whole server
#   (random ids of every shard, shapes, answer types); an id outside the table is grpc.RpcError
#   OUT_OF_RANGE (issue 40; it was only an IndexError, which it still is); with
#   shard 1 killed, a call touching it raises ShardError UNAVAILABLE naming "shard 1 of 3", and a
#   call of the other shards' ids still succeeds (tests/client/python/sharded_lookup_check.py).
# - embedding-client --shards=T0,T1,T2 lookup prints what --target=WHOLE lookup prints; `tables`
#   on a shard says which rows it holds.
#   sharded_lookup_check.sh SERVER CLIENT
source "$(dirname "$0")/../tools/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
DEMO=(--demo_table=1000x12 --drain_seconds=0)
start_server "$SERVER" "${DEMO[@]}"
WHOLE=127.0.0.1:$GRPC_PORT
SHARDS=()
SHARD_PIDS=()
for k in 0 1 2; do
  start_server "$SERVER" "${DEMO[@]}" --shard=$k/3
  SHARDS+=(127.0.0.1:$GRPC_PORT)
  SHARD_PIDS+=("${PIDS[-1]}")
done
TARGETS=$(IFS=,; echo "${SHARDS[*]}")

# --- embedding-client: the same lines from the shards as from the whole table.
"$CLIENT" --target=$WHOLE lookup 0 333 334 500 667 668 999 7 >"$WORK/whole.out" ||
  fail "lookup on the whole table failed"
"$CLIENT" --shards=$TARGETS lookup 0 333 334 500 667 668 999 7 >"$WORK/sharded.out" ||
  fail "lookup --shards failed"
cmp -s "$WORK/whole.out" "$WORK/sharded.out" ||
  { diff "$WORK/whole.out" "$WORK/sharded.out"; fail "lookup --shards differs from the whole table"; }
"$CLIENT" --target=${SHARDS[1]} tables >"$WORK/tables" || fail "tables failed"
grep -qE "^demo +334 +12 +float32 .* device \(shard 1/3: rows 334\.\.667 of 1000\) " "$WORK/tables" ||
  { cat "$WORK/tables"; fail "tables: shard 1's rows"; }
if "$CLIENT" --shards=$TARGETS lookup 1000 2>"$WORK/err"; then fail "lookup of id 1000 succeeded"; fi
grep -q "OUT_OF_RANGE.*ids\[0\] = 1000 is out of range for table 'demo' with 1000 rows over 3 shards" \
  "$WORK/err" || { cat "$WORK/err"; fail "lookup of id 1000: wrong error"; }

# --- The Python client (it kills shard 1 itself, by pid).
PYTHONPATH="$WORK/py:$ROOT/client/python" "$PY" "$HERE/python/sharded_lookup_check.py" \
  "$WHOLE" "$TARGETS" "${SHARD_PIDS[1]}" || fail "python sharded_lookup_check failed"
echo "sharded_lookup_check: OK"
