#!/usr/bin/env bash
# Row updates through the clients, against the real server's admin listener (issue 23):
# embedding-client update (.npy ids and rows in float32, float16, bfloat16 bits as uint16 or
# void, float32 sent as float16 or bfloat16, int32 ids, several messages on one stream, the
# sequence read from ListTables) and the Python EmbeddingAdminClient (update_rows in each dtype,
# open_writer, update_stream). After each step every row of the table is looked up and compared
# element by element with a model: the demo table computed independently in numpy, overwritten by
# each acknowledged update as the server converts. Refused updates (a sequence that does not
# increase, an id out of range, files that are not ids or rows) fail with the server's code and
# apply nothing; `tables` shows SEQUENCE and UPDATED_ROWS. Then both clients under mutual TLS: the
# writer on the allow-list is served, another certificate of the same CA is PERMISSION_DENIED.
#   admin_update_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
export PYTHONPATH=$WORK/py:$ROOT/client/python:$ROOT/tests/tools
ROWS=1000 DIM=16 SEED=3

admin_port() { sed -n 's/.*admin service (UpdateRows) on [^ ]*:\([0-9]*\),.*/\1/p' "$SERVER_LOG"; }

start_server "$SERVER" --demo_table=${ROWS}x$DIM --demo_seed=$SEED --drain_seconds=0 \
  --admin_address=127.0.0.1:0 --admin_insecure
ADMIN_PORT=$(admin_port)
[[ -n $ADMIN_PORT ]] || { cat "$SERVER_LOG"; fail "no admin port in the server's log"; }
M=$WORK/model.npy  # the table as it should now be served (float32)

# The files of each CLI step, and the model's first state.
"$PY" - "$WORK" $ROWS $DIM $SEED <<'PY'
import sys
import numpy as np
from demo_table import demo_table
work, rows, dim, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
np.save(f"{work}/model.npy", demo_table(rows, dim, seed))
rng = np.random.default_rng(17)
def ids(n):
    return rng.permutation(rows)[:n].astype(np.int64)
def values(n):
    return (rng.standard_normal((n, dim)) * 10).astype(np.float32)
np.save(f"{work}/a_ids.npy", ids(40)); np.save(f"{work}/a_rows.npy", values(40))
np.save(f"{work}/b_ids.npy", ids(40)); np.save(f"{work}/b_rows.npy", values(40).astype(np.float16))
np.save(f"{work}/c_ids.npy", ids(30).astype(np.int32)); np.save(f"{work}/c_rows.npy", values(30))
bits = (values(25).view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits
np.save(f"{work}/d_ids.npy", ids(25)); np.save(f"{work}/d_rows.npy", bits)
np.save(f"{work}/e_ids.npy", ids(25)); np.save(f"{work}/e_rows.npy", bits[::-1].copy().view("V2"))
np.save(f"{work}/f_ids.npy", ids(20)); np.save(f"{work}/f_rows.npy", values(20))
bad = ids(5); bad[3] = rows
np.save(f"{work}/bad_ids.npy", bad); np.save(f"{work}/bad_rows.npy", values(5))
np.save(f"{work}/f64_rows.npy", values(40).astype(np.float64))
np.save(f"{work}/ids_2d.npy", ids(40).reshape(4, 10))
PY

# apply IDS ROWS AS: the model after the server applied that update (rows sent as AS).
apply() {
  "$PY" - "$M" "$1" "$2" "$3" <<'PY'
import sys
import numpy as np
model_path, ids_path, rows_path, sent_as = sys.argv[1:]
model, ids, rows = np.load(model_path), np.load(ids_path), np.load(rows_path)
if rows.dtype.kind in "uV":  # bfloat16 bits
    rows = (rows.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
rows = rows.astype(np.float32)
if sent_as == "float16":
    rows = rows.astype(np.float16).astype(np.float32)
elif sent_as == "bfloat16":  # round to nearest even (no NaN in these rows)
    b = rows.view(np.uint32)
    rows = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
model[ids.astype(np.int64)] = rows
np.save(model_path, model)
PY
}

# check_served TARGET: every row the server answers equals the model's, element by element.
check_served() {
  "$PY" - "$1" "$M" <<'PY' || fail "served rows differ from the model"
import sys
import numpy as np
from embedding_client import EmbeddingClient
model = np.load(sys.argv[2])
with EmbeddingClient(sys.argv[1]) as c:
    got = c.look_up(np.arange(model.shape[0]), dtype="float32")
bad = np.argwhere(got != model)
assert bad.size == 0, f"{len(bad)} elements differ, first (row, element): {bad[:5].tolist()}"
PY
}

# update EXPECTED_LINES ARGS...: embedding-client update; its output must be EXPECTED_LINES.
update() {
  local want=$1; shift
  "$CLIENT" --target=127.0.0.1:$GRPC_PORT --admin_target=127.0.0.1:$ADMIN_PORT update "$@" \
    >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "update $* failed"; }
  [[ $(cat "$WORK/out") == "$want" ]] ||
    { printf 'got:\n%s\nwant:\n%s\n' "$(cat "$WORK/out")" "$want"; fail "update $*: wrong acks"; }
}

# refused CODE_OR_TEXT ARGS...: embedding-client update fails (exit 1) saying CODE_OR_TEXT.
refused() {
  local says=$1; shift
  if "$CLIENT" --target=127.0.0.1:$GRPC_PORT --admin_target=127.0.0.1:$ADMIN_PORT update "$@" \
    >"$WORK/out" 2>"$WORK/err"; then
    fail "update $* was not refused"
  fi
  grep -qF -- "$says" "$WORK/err" || { cat "$WORK/err"; fail "update $*: no '$says'"; }
}

T=127.0.0.1:$GRPC_PORT
check_served $T
# --sequence=0 (the default): one more than the table's, from ListTables.
update "table demo sequence 1 rows 40" --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy"
apply "$WORK/a_ids.npy" "$WORK/a_rows.npy" float32
check_served $T
# float16 rows, in messages of 7 rows on one stream: sequences 5 to 10.
update "$(for s in 5 6 7 8 9; do echo "table demo sequence $s rows 7"; done
          echo "table demo sequence 10 rows 5")" \
  --ids="$WORK/b_ids.npy" --rows="$WORK/b_rows.npy" --sequence=5 --rows_per_message=7 --table=demo
apply "$WORK/b_ids.npy" "$WORK/b_rows.npy" float16
check_served $T
# int32 ids; float32 rows sent as bfloat16 and as float16 (converted by the client).
update "table demo sequence 11 rows 30" --ids="$WORK/c_ids.npy" --rows="$WORK/c_rows.npy" \
  --rows_dtype=bfloat16
apply "$WORK/c_ids.npy" "$WORK/c_rows.npy" bfloat16
update "table demo sequence 12 rows 20" --ids="$WORK/f_ids.npy" --rows="$WORK/f_rows.npy" \
  --rows_dtype=float16
apply "$WORK/f_ids.npy" "$WORK/f_rows.npy" float16
check_served $T
# bfloat16 bits, as uint16 and as 2-byte void elements.
update "table demo sequence 20 rows 25" --ids="$WORK/d_ids.npy" --rows="$WORK/d_rows.npy" \
  --rows_dtype=bfloat16 --sequence=20
apply "$WORK/d_ids.npy" "$WORK/d_rows.npy" float32
update "table demo sequence 21 rows 25" --ids="$WORK/e_ids.npy" --rows="$WORK/e_rows.npy" \
  --rows_dtype=bfloat16
apply "$WORK/e_ids.npy" "$WORK/e_rows.npy" float32
check_served $T

# Refused: by the server (nothing applied), and by the client before it sends anything.
refused FAILED_PRECONDITION --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy" --sequence=21
refused OUT_OF_RANGE --ids="$WORK/bad_ids.npy" --rows="$WORK/bad_rows.npy"
refused NOT_FOUND --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy" --table=nope --sequence=99
refused "'<f8'" --ids="$WORK/a_ids.npy" --rows="$WORK/f64_rows.npy" --sequence=99
refused "must be 2-D with one row per id (40 ids)" --ids="$WORK/a_ids.npy" \
  --rows="$WORK/c_rows.npy" --sequence=99
refused "must be a 1-D array of int64" --ids="$WORK/ids_2d.npy" --rows="$WORK/a_rows.npy"
refused "'<u2'" --ids="$WORK/d_ids.npy" --rows="$WORK/d_rows.npy" --sequence=99
refused "needs --ids and --rows" --ids="$WORK/a_ids.npy"
refused "cannot read" --ids="$WORK/missing.npy" --rows="$WORK/a_rows.npy"
# Messages before a refused one stay applied; the CLI prints their acks, then fails.
"$PY" -c "
import numpy as np
ids = np.load('$WORK/bad_ids.npy'); np.save('$WORK/g_ids.npy', ids)
np.save('$WORK/g_rows.npy', np.load('$WORK/bad_rows.npy'))"
refused OUT_OF_RANGE --ids="$WORK/g_ids.npy" --rows="$WORK/g_rows.npy" --rows_per_message=2
grep -qx "table demo sequence 22 rows 2" "$WORK/out" || { cat "$WORK/out"; fail "no first ack"; }
[[ $(wc -l <"$WORK/out") == 1 ]] || { cat "$WORK/out"; fail "acks after the refused message"; }
"$PY" - "$WORK" <<'PY'
import numpy as np, sys
w = sys.argv[1]
np.save(f"{w}/g1_ids.npy", np.load(f"{w}/g_ids.npy")[:2])
np.save(f"{w}/g1_rows.npy", np.load(f"{w}/g_rows.npy")[:2])
PY
apply "$WORK/g1_ids.npy" "$WORK/g1_rows.npy" float32
check_served $T

# tables: the sequence and the rows written (40 + 40 + 30 + 20 + 25 + 25 + 2).
"$CLIENT" --target=$T tables >"$WORK/tables" || fail "tables failed"
head -1 "$WORK/tables" | grep -q "SEQUENCE  UPDATED_ROWS$" || { cat "$WORK/tables"; fail "columns"; }
grep -qE "^demo .* 22 +182$" "$WORK/tables" || { cat "$WORK/tables"; fail "tables: sequence"; }

# The Python admin client on the same server, from sequence 22.
"$PY" - "$T" "127.0.0.1:$ADMIN_PORT" "$M" <<'PY' || fail "Python admin client"
import sys
import grpc
import numpy as np
from embedding_client import EmbeddingAdminClient, EmbeddingClient, UpdateAck

target, admin_target, model_path = sys.argv[1:]
model = np.load(model_path)
rows, dim = model.shape
rng = np.random.default_rng(23)

def bf16(x):  # float32 -> bfloat16 -> float32, rounding to nearest even (no NaN here)
    b = x.astype(np.float32).view(np.uint32)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)

def check(c):
    got = c.look_up(np.arange(rows), dtype="float32")
    bad = np.argwhere(got != model)
    assert bad.size == 0, f"{len(bad)} elements differ, first: {bad[:5].tolist()}"

with EmbeddingClient(target) as c, EmbeddingAdminClient(admin_target) as admin:
    [t] = c.list_tables()
    seq, written = t["sequence"], t["updated_rows"]
    assert (seq, written) == (22, 182), t
    # update_rows: float32, float16 (by the array's type), bfloat16 (converted by the client).
    for dtype, sent in ((None, lambda x: x), ("float16", lambda x: x.astype(np.float16)),
                        ("bfloat16", lambda x: x)):
        ids = rng.permutation(rows)[:64]
        x = (rng.standard_normal((64, dim)) * 10).astype(np.float32)
        seq += 1
        ack = admin.update_rows(ids, sent(x), sequence=seq, dtype=dtype)
        assert ack == UpdateAck("demo", seq, 64), ack
        written += 64
        model[ids] = {None: x, "float16": x.astype(np.float16).astype(np.float32),
                      "bfloat16": bf16(x)}[dtype]
        check(c)
    # open_writer: 100 messages in flight through a window of 8, ids repeated across them.
    with admin.open_writer(max_unacked=8) as w:
        for k in range(100):
            ids = rng.permutation(rows)[:1 + k % 9]
            x = (rng.standard_normal((len(ids), dim)) * 10).astype(np.float32)
            w.send(ids, x, sequence=seq + 1 + k)
            model[ids] = x
            written += len(ids)
        acks = w.finish()
    assert [a.sequence for a in acks] == list(range(seq + 1, seq + 101)), acks[:3]
    seq += 100
    check(c)
    # update_stream, with a refused message third: the first two applied, then its RpcError.
    msgs = []
    for k in range(3):
        ids = rng.permutation(rows)[:10]
        x = (rng.standard_normal((10, dim)) * 10).astype(np.float32)
        msgs.append(dict(ids=ids, rows=x, sequence=seq + 1 + k))
    msgs[2]["ids"][4] = rows
    got = []
    try:
        for ack in admin.update_stream(msgs):
            got.append(ack.sequence)
        raise SystemExit("update_stream: the bad message was applied")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e
    assert got == [seq + 1, seq + 2], got
    for m in msgs[:2]:
        model[m["ids"]] = m["rows"]
        written += 10
    seq += 2
    check(c)
    try:
        admin.update_rows([1], np.ones((1, dim), np.float32), sequence=seq)
        raise SystemExit("a sequence that does not increase was applied")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, e
    [t] = c.list_tables()
    assert (t["sequence"], t["updated_rows"]) == (seq, written), (t, seq, written)
    check(c)
print(f"python admin client: update_rows in 3 dtypes, open_writer (100 messages), "
      f"update_stream; sequence {seq}, {written} rows written; every row as the model")
PY

# Mutual TLS on the admin listener, the writer's SAN on the allow-list.
{ kill -KILL "${PIDS[-1]}" && wait "${PIDS[-1]}"; } 2>/dev/null || true
C=$WORK/certs
mkdir -p "$C"
"$ROOT/tests/testing/make_test_certs.sh" "$C" >/dev/null
start_server "$SERVER" --demo_table=${ROWS}x$DIM --demo_seed=$SEED --drain_seconds=0 \
  --admin_address=127.0.0.1:0 --admin_tls_cert="$C/server.pem" --admin_tls_key="$C/server.key" \
  --admin_tls_client_ca="$C/ca.pem" --admin_allowed_identities=spiffe://emb.test/writer
ADMIN_PORT=$(admin_port)
T=127.0.0.1:$GRPC_PORT
"$PY" -c "from demo_table import demo_table; import numpy as np
np.save('$M', demo_table($ROWS, $DIM, $SEED))"
refused PERMISSION_DENIED --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy" \
  --admin_tls_ca="$C/ca.pem" --admin_tls_cert="$C/client.pem" --admin_tls_key="$C/client.key" \
  --admin_tls_server_name=localhost
refused UNAVAILABLE --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy"  # plaintext
refused "--admin_tls_key is given without --admin_tls_cert" --ids="$WORK/a_ids.npy" \
  --rows="$WORK/a_rows.npy" --admin_tls_ca="$C/ca.pem" --admin_tls_key="$C/client.key"
check_served $T
update "table demo sequence 1 rows 40" --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy" \
  --admin_tls_ca="$C/ca.pem" --admin_tls_cert="$C/writer.pem" --admin_tls_key="$C/writer.key" \
  --admin_tls_server_name=localhost
apply "$WORK/a_ids.npy" "$WORK/a_rows.npy" float32
check_served $T
"$PY" - "127.0.0.1:$ADMIN_PORT" "$C" "$M" "$T" <<'PY' || fail "Python admin client over mutual TLS"
import sys
import grpc
import numpy as np
from embedding_client import EmbeddingAdminClient, EmbeddingClient
admin_target, certs, model_path, target = sys.argv[1:]
model = np.load(model_path)
ids = np.array([5, 900, 17])
x = np.random.default_rng(29).standard_normal((3, model.shape[1])).astype(np.float32)
tls = dict(tls_ca=f"{certs}/ca.pem", tls_server_name="localhost")
with EmbeddingAdminClient(admin_target, tls_cert=f"{certs}/client.pem",
                          tls_key=f"{certs}/client.key", **tls) as admin:
    try:
        admin.update_rows(ids, x, sequence=2)
        raise SystemExit("a client off the allow-list was served")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
with EmbeddingAdminClient(admin_target, tls_cert=f"{certs}/writer.pem",
                          tls_key=f"{certs}/writer.key", **tls) as admin:
    assert admin.update_rows(ids, x, sequence=2).sequence == 2
model[ids] = x
with EmbeddingClient(target) as c:
    assert np.array_equal(c.look_up(np.arange(model.shape[0])), model), "rows differ"
print("python admin client over mutual TLS: the writer served, another client PERMISSION_DENIED")
PY
echo "admin updates: embedding-client update and the Python admin client; every row as the model"
