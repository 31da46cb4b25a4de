#!/usr/bin/env bash
# A table sharded over servers through the Python client and embedding-client, against the real
# server: one server of the seeded demo table and three of its shards (--shard=K/3).
# - Python: ShardedClient.look_up answers exactly as EmbeddingClient.look_up on the whole server
#   (random ids of every shard, shapes, answer types); an id outside the table is grpc.RpcError
#   OUT_OF_RANGE (issue 40; it was only an IndexError, which it still is); with
#   shard 1 killed, a call touching it raises ShardError UNAVAILABLE naming "shard 1 of 3", and a
#   call of the other shards' ids still succeeds (tests/client/python/sharded_lookup_check.py).
# - Shards of the same shape serving different versions: both clients refuse with
#   FAILED_PRECONDITION naming the versions (issue 41, item 7e).
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

# --- Shards of one shape serving different versions (issue 41, item 7e): shard 0 serves version 2
# of directory a, shard 1 version 1 of directory b. Both clients refuse to mix them.
PYTHONPATH="$WORK/py" "$PY" - "$WORK" <<'PYEOF' || fail "writing the version directories failed"
import os, sys
import numpy as np
for path, seed in (("a/1", 1), ("a/2", 2), ("b/1", 1)):
    os.makedirs(os.path.join(sys.argv[1], path))
    rows = np.random.default_rng(seed).standard_normal((100, 4), dtype=np.float32)
    np.save(os.path.join(sys.argv[1], path, "t.npy"), rows)
PYEOF
start_server "$SERVER" --table=t="$WORK/a" --shard=0/2 --drain_seconds=0
V0=127.0.0.1:$GRPC_PORT
start_server "$SERVER" --table=t="$WORK/b" --shard=1/2 --drain_seconds=0
V1=127.0.0.1:$GRPC_PORT
if "$CLIENT" --shards=$V0,$V1 --table=t lookup 0 99 >/dev/null 2>"$WORK/err"; then
  fail "lookup --shards mixed two versions"
fi
grep -q "FAILED_PRECONDITION.*table 't' there is version 1, but on shard 0 version 2" "$WORK/err" ||
  { cat "$WORK/err"; fail "lookup --shards over two versions: wrong error"; }
PYTHONPATH="$WORK/py:$ROOT/client/python" "$PY" "$HERE/python/sharded_lookup_check.py" \
  versions "$V0,$V1" || fail "python sharded_lookup_check versions failed"
echo "sharded_lookup_check: OK"
