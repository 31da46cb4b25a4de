#!/usr/bin/env bash
# Saved versions through the clients, against the real server (issue 23): tables served from
# version directories (t: DIR/1/t.npy in float32, h: DIR/1/h.npy in float16) beside a table from
# a plain file (f), updated through embedding-client update and the Python EmbeddingAdminClient,
# saved with `embedding-client save` and save_table(), then the server SIGKILLed and restarted on
# the same directories: `versions`, `tables` and EmbeddingClient.versions() report each table's
# version and sequence, every row of every table equals a NumPy model element by element (the
# rows as they were when the save began: updates after a save are not in it), the saved file
# holds the model's rows in the table's type, and the sequence goes on from the saved one.
# Refused saves: a table not from a version directory (FAILED_PRECONDITION), an unknown one
# (NOT_FOUND), the lookup port (UNIMPLEMENTED), and under mutual TLS a client off the allow-list
# (PERMISSION_DENIED) while the writer on it saves.
#   save_table_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
export PYTHONPATH=$WORK/py:$ROOT/client/python:$WORK
ROWS=1000 DIM=16
M=$WORK/models  # model_T.npy: table T as it should now be served (float32); saved_T.npy: as saved
mkdir -p "$M"

# Helpers of the Python steps: the models and the checks.
cat >"$WORK/savecheck.py" <<'PY'
import json
import os
import sys

import numpy as np

from embedding_client import EmbeddingClient

M = os.environ["M"]
TABLE_TYPES = {"t": np.float32, "h": np.float16, "f": np.float32}


def load(name):
    return np.load(f"{M}/{name}.npy")


def save(name, model):
    np.save(f"{M}/{name}.npy", model)


def bf16(x):
    """float32 -> bfloat16 -> float32, rounding to nearest even (no NaN here)."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def stored(table, rows, sent_as):
    """Rows (floats, or bfloat16 bits as uint16) as table `table` holds them once the server
    has applied them, sent as `sent_as`, widened to float32."""
    if rows.dtype.kind in "uV":
        rows = (rows.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    rows = rows.astype(np.float32)
    if sent_as == "float16":
        rows = rows.astype(np.float16).astype(np.float32)
    elif sent_as == "bfloat16":
        rows = bf16(rows)
    return rows.astype(TABLE_TYPES[table]).astype(np.float32)


def apply(table, ids, rows, sent_as):
    model = load(f"model_{table}")
    model[np.asarray(ids, np.int64)] = stored(table, np.asarray(rows), sent_as)
    save(f"model_{table}", model)


def check_served(target, table, name=None):
    model = load(name or f"model_{table}")
    with EmbeddingClient(target) as c:
        got = c.look_up(np.arange(model.shape[0]), table=table, dtype="float32")
    bad = np.argwhere(got != model)
    assert bad.size == 0, (f"table {table}: {len(bad)} elements differ from {name or 'the model'}"
                           f", first (row, element): {bad[:5].tolist()}")


def check_file(path, size, table, name):
    """The saved .safetensors file: `size` bytes, one tensor of the table's type and shape whose
    values are model `name`'s."""
    assert os.path.getsize(path) == size, (path, os.path.getsize(path), size)
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    assert len(tensors) == 1, header
    [(_, t)] = tensors.items()
    want = {np.float32: "F32", np.float16: "F16"}[TABLE_TYPES[table]]
    model = load(name)
    assert t["dtype"] == want and t["shape"] == list(model.shape), t
    begin, end = t["data_offsets"]
    little_endian = np.dtype(TABLE_TYPES[table]).newbyteorder("<")
    values = np.frombuffer(data[8 + n + begin:8 + n + end], little_endian)
    assert np.array_equal(values.astype(np.float32).reshape(model.shape), model), \
        f"{path}: the saved rows differ from {name}"
PY
export M

# Version directories t/1/t.npy (float32) and h/1/h.npy (float16), the plain file f.npy, the
# models, and the files of the CLI's updates.
"$PY" - "$WORK" $ROWS $DIM <<'PY'
import os
import sys
import numpy as np
from savecheck import save
work, rows, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(31)
for name, dtype in (("t", np.float32), ("h", np.float16)):
    os.makedirs(f"{work}/{name}/1")
    x = rng.standard_normal((rows, dim)).astype(dtype)
    np.save(f"{work}/{name}/1/{name}.npy", x)
    save(f"model_{name}", x.astype(np.float32))
f = rng.standard_normal((rows, dim)).astype(np.float32)
np.save(f"{work}/f.npy", f)
save("model_f", f)
def ids(n):
    return rng.permutation(rows)[:n].astype(np.int64)
def values(n):
    return (rng.standard_normal((n, dim)) * 10).astype(np.float32)
for k in "abcdeg":
    np.save(f"{work}/{k}_ids.npy", ids(40))
    np.save(f"{work}/{k}_rows.npy", values(40))
np.save(f"{work}/b_rows.npy", values(40).astype(np.float16))
PY

admin_port() { sed -n 's/.*admin service ([^)]*) on [^ ]*:\([0-9]*\),.*/\1/p' "$SERVER_LOG"; }

# serve [ARGS...]: a server on the three tables (plaintext admin listener unless ARGS set one).
serve() {
  local admin=(--admin_address=127.0.0.1:0 --admin_insecure)
  [[ $# -eq 0 ]] || admin=(--admin_address=127.0.0.1:0 "$@")
  start_server "$SERVER" --table=t="$WORK/t" --table=h="$WORK/h" --table=f="$WORK/f.npy" \
    --drain_seconds=0 "${admin[@]}"
  ADMIN_PORT=$(admin_port)
  [[ -n $ADMIN_PORT ]] || { cat "$SERVER_LOG"; fail "no admin port in the server's log"; }
  T=127.0.0.1:$GRPC_PORT A=127.0.0.1:$ADMIN_PORT
}
# restart [ARGS...]: SIGKILL the server (a returned save must be on disk already), serve again.
restart() {
  { kill -KILL "${PIDS[-1]}" && wait "${PIDS[-1]}"; } 2>/dev/null || true
  serve "$@"
}

client() { "$CLIENT" --target="$T" --admin_target="$A" "$@"; }

# update EXPECTED_LINES ARGS...: embedding-client update; its output must be EXPECTED_LINES.
update() {
  local want=$1; shift
  client update "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "update $* failed"; }
  [[ $(cat "$WORK/out") == "$want" ]] ||
    { printf 'got:\n%s\nwant:\n%s\n' "$(cat "$WORK/out")" "$want"; fail "update $*: wrong acks"; }
}
# apply TABLE K SENT_AS: the model of TABLE after update files K were applied, sent as SENT_AS.
apply() {
  "$PY" -c "import numpy as np, savecheck as s
s.apply('$1', np.load('$WORK/$2_ids.npy'), np.load('$WORK/$2_rows.npy'), '$3')"
}
check_served() {  # check_served TABLE [MODEL]: every row served equals the model's
  "$PY" -c "import savecheck as s; s.check_served('$T', '$1', ${2:+'$2'})" ||
    fail "table $1: served rows differ from the model"
}
# versions EXPECTED: `embedding-client versions`, sorted, must be EXPECTED (lines "T V S"); no
# table is pinned here (tests/tools/load_version_check.sh pins).
versions() {
  client versions >"$WORK/versions" || fail "versions failed"
  local got
  got=$(sed -n \
    's/^table \([^ ]*\) version \([0-9]*\) sequence \([0-9]*\) pinned false$/\1 \2 \3/p' \
    "$WORK/versions" | sort)
  [[ $(wc -l <"$WORK/versions") == 3 && $got == "$1" ]] ||
    { cat "$WORK/versions"; fail "versions: want $(tr '\n' ',' <<<"$1")"; }
}
# save_ok TABLE VERSION SEQUENCE [ARGS...]: `embedding-client save` of TABLE writes VERSION with
# SEQUENCE, under TABLE's directory, and the file holds the model's rows; the model is kept as
# saved_TABLE.
save_ok() {
  local table=$1 version=$2 sequence=$3; shift 3
  client save --table="$table" "$@" >"$WORK/out" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "save --table=$table failed"; }
  local re="^table $table version $version sequence $sequence path (.+) bytes ([0-9]+)\$"
  [[ $(cat "$WORK/out") =~ $re ]] || { cat "$WORK/out"; fail "save: want $re"; }
  local path=${BASH_REMATCH[1]} bytes=${BASH_REMATCH[2]}
  [[ $(realpath "$(dirname "$path")") == $(realpath "$WORK/$table/$version") ]] ||
    fail "save wrote $path, not under $WORK/$table/$version"
  cp "$M/model_$table.npy" "$M/saved_$table.npy"
  "$PY" -c "import savecheck as s; s.check_file('$path', $bytes, '$table', 'saved_$table')" ||
    fail "the saved file $path"
}
# refused CODE_OR_TEXT ARGS...: embedding-client fails (exit 1) saying CODE_OR_TEXT.
refused() {
  local says=$1; shift
  if client "$@" >"$WORK/out" 2>"$WORK/err"; then fail "$* was not refused"; fi
  grep -qF -- "$says" "$WORK/err" || { cat "$WORK/err"; fail "$*: no '$says'"; }
}

serve
versions $'f 0 0\nh 1 0\nt 1 0'
client tables >"$WORK/tables" || fail "tables failed"
head -1 "$WORK/tables" | grep -q "  VERSION  PINNED  SEQUENCE  UPDATED_ROWS$" ||
  { cat "$WORK/tables"; fail "tables: no VERSION column"; }
grep -qE "^t .* 1 +no +0 +0$" "$WORK/tables" || { cat "$WORK/tables"; fail "tables: t's version"; }
for t in t h f; do check_served $t; done

# Updates through the CLI: t in float32, float16 (messages of 7: sequences 5 to 10) and float32
# sent as bfloat16; h (float16) in float32 and as bfloat16, converted by the server.
update "table t sequence 1 rows 40" --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy"
apply t a float32
update "$(for s in 5 6 7 8 9; do echo "table t sequence $s rows 7"; done
          echo "table t sequence 10 rows 5")" \
  --ids="$WORK/b_ids.npy" --rows="$WORK/b_rows.npy" --sequence=5 --rows_per_message=7 --table=t
apply t b float16
update "table t sequence 11 rows 40" --ids="$WORK/c_ids.npy" --rows="$WORK/c_rows.npy" \
  --rows_dtype=bfloat16
apply t c bfloat16
update "table h sequence 1 rows 40" --ids="$WORK/d_ids.npy" --rows="$WORK/d_rows.npy" --table=h
apply h d float32
update "table h sequence 2 rows 40" --ids="$WORK/e_ids.npy" --rows="$WORK/e_rows.npy" --table=h \
  --rows_dtype=bfloat16
apply h e bfloat16
for t in t h f; do check_served $t; done

# Saves: t (the default table, named or not) as version 2 with sequence 11, h with 2.
save_ok t 2 11
save_ok h 2 2
refused FAILED_PRECONDITION save --table=f
refused NOT_FOUND save --table=nope
refused UNIMPLEMENTED save --admin_target="$T"  # the lookup port has no admin service
refused "takes no arguments" save t
refused "takes no arguments" versions t
versions $'f 0 0\nh 2 2\nt 2 11'  # the running server's tables are now the versions saved
# An update after the save: served now, not in version 2.
update "table t sequence 12 rows 40" --ids="$WORK/g_ids.npy" --rows="$WORK/g_rows.npy"
apply t g float32
check_served t
versions $'f 0 0\nh 2 2\nt 2 12'

restart
versions $'f 0 0\nh 2 2\nt 2 11'
for t in t h; do check_served $t saved_$t; done
check_served f
client tables >"$WORK/tables" || fail "tables failed"
grep -qE "^t .* 2 +no +11 +0$" "$WORK/tables" ||
  { cat "$WORK/tables"; fail "tables after restart"; }
[[ $(ls -A "$WORK/t") == $'1\n2' ]] || { ls -la "$WORK/t"; fail "t/ holds more than 1/ and 2/"; }
# The sequence goes on from the saved one: --sequence=0 takes 12 from ListTables.
cp "$M/saved_t.npy" "$M/model_t.npy"
cp "$M/saved_h.npy" "$M/model_h.npy"
update "table t sequence 12 rows 40" --ids="$WORK/a_ids.npy" --rows="$WORK/a_rows.npy"
apply t a float32
check_served t

# The Python clients: versions(), list_tables()' version, update_rows, save_table.
"$PY" - "$T" "$A" <<'PY' || fail "Python clients"
import sys
import grpc
import numpy as np
import savecheck as s
from embedding_client import EmbeddingAdminClient, EmbeddingClient, SavedVersion

target, admin_target = sys.argv[1:]
rng = np.random.default_rng(37)
with EmbeddingClient(target) as c, EmbeddingAdminClient(admin_target) as admin:
    assert c.versions() == {"t": (2, 12, False), "h": (2, 2, False), "f": (0, 0, False)}, \
        c.versions()
    info = {t["name"]: t for t in c.list_tables()}
    assert (info["t"]["version"], info["h"]["version"], info["f"]["version"]) == (2, 2, 0), info
    for table, sequence, dtype in (("h", 3, "bfloat16"), ("t", 13, "float16"), ("h", 4, None)):
        ids = rng.permutation(1000)[:64]
        x = (rng.standard_normal((64, 16)) * 10).astype(np.float32)
        ack = admin.update_rows(ids, x, sequence=sequence, table=table, dtype=dtype)
        assert (ack.table, ack.sequence, ack.rows) == (table, sequence, 64), ack
        s.apply(table, ids, x, dtype or "float32")
    for table in "th":
        s.check_served(target, table)
    saved = {}
    for table, version, sequence in (("h", 3, 4), ("", 3, 13)):
        v = admin.save_table(table)
        assert isinstance(v, SavedVersion), v
        assert (v.table, v.version, v.sequence) == (table or "t", version, sequence), v
        name = v.table
        s.save(f"saved_{name}", s.load(f"model_{name}"))
        s.check_file(v.path, v.bytes, name, f"saved_{name}")
        saved[name] = v
    for table, code in (("f", grpc.StatusCode.FAILED_PRECONDITION),
                        ("nope", grpc.StatusCode.NOT_FOUND)):
        try:
            admin.save_table(table)
            raise SystemExit(f"save_table({table!r}) was not refused")
        except grpc.RpcError as e:
            assert e.code() == code, (table, e)
print("python: update_rows in 3 dtypes, save_table of t and h:",
      ", ".join(f"{v.table} version {v.version} sequence {v.sequence}" for v in saved.values()))
PY

restart
versions $'f 0 0\nh 3 4\nt 3 13'
for t in t h; do check_served $t saved_$t; done
"$PY" -c "
from embedding_client import EmbeddingClient
with EmbeddingClient('$T') as c:
    v = c.versions()
assert v == {'t': (3, 13, False), 'h': (3, 4, False), 'f': (0, 0, False)}, v" ||
  fail "Python versions() after restart"

# Mutual TLS on the admin listener: a client off the allow-list cannot save, the writer can.
C=$WORK/certs
mkdir -p "$C"
"$ROOT/tests/testing/make_test_certs.sh" "$C" >/dev/null
restart --admin_tls_cert="$C/server.pem" --admin_tls_key="$C/server.key" \
  --admin_tls_client_ca="$C/ca.pem" --admin_allowed_identities=spiffe://emb.test/writer
refused PERMISSION_DENIED save --admin_tls_ca="$C/ca.pem" --admin_tls_cert="$C/client.pem" \
  --admin_tls_key="$C/client.key" --admin_tls_server_name=localhost
refused UNAVAILABLE save  # plaintext to a TLS port
cp "$M/saved_t.npy" "$M/model_t.npy"
save_ok t 4 13 --admin_tls_ca="$C/ca.pem" --admin_tls_cert="$C/writer.pem" \
  --admin_tls_key="$C/writer.key" --admin_tls_server_name=localhost
"$PY" - "$A" "$C" <<'PY' || fail "Python save_table over mutual TLS"
import sys
import grpc
from embedding_client import EmbeddingAdminClient
admin_target, certs = sys.argv[1:]
tls = dict(tls_ca=f"{certs}/ca.pem", tls_server_name="localhost")
with EmbeddingAdminClient(admin_target, tls_cert=f"{certs}/client.pem",
                          tls_key=f"{certs}/client.key", **tls) as admin:
    try:
        admin.save_table("h")
        raise SystemExit("a client off the allow-list saved")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
with EmbeddingAdminClient(admin_target, tls_cert=f"{certs}/writer.pem",
                          tls_key=f"{certs}/writer.key", **tls) as admin:
    v = admin.save_table("h")
    assert (v.table, v.version, v.sequence) == ("h", 4, 4), v
PY
restart
versions $'f 0 0\nh 4 4\nt 4 13'
for t in t h; do check_served $t saved_$t; done
echo "saved versions: embedding-client save and versions, the Python save_table and versions();" \
  "after each restart every row as saved, the versions and sequences as saved"
