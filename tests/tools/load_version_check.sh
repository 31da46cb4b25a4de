#!/usr/bin/env bash
# Loading and pinning versions through the clients, against the real server (issue 23): table t
# from a version directory (DIR/1/t.npy, float32); DIR/2 written while the server runs (into
# DIR/.incoming-2, renamed into place; no polling, so the server stays on 1). `pin 0` serves 2,
# `pin 1` rolls back to 1 and pins it, `pin 0` (and `unpin`) returns to the newest, unpinned; a
# version saved with updates (3) carries its sequence. After each load the output line, `versions`,
# `tables`' PINNED column and every row served, element by element against the NumPy data of the
# version. A broken version (4: its file cut short; also as the newest, for `pin 0`) and a missing
# one are FAILED_PRECONDITION and the served version stays; bad arguments are refused before calling. Then the Python
# EmbeddingAdminClient.load_version, versions() and list_tables()' version_pinned. No sleeps:
# LoadVersion returns once the version is served.
#   load_version_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
export PYTHONPATH=$WORK/py:$ROOT/client/python
ROWS=500 DIM=12
D=$WORK/t

# write_version N: DIR/N/t.npy from random float32 rows (seed N), also kept as $WORK/vN.npy, the
# way a publisher must write it: into DIR/.incoming-N, renamed into place.
write_version() {
  mkdir -p "$D/.incoming-$1"
  "$PY" - "$D/.incoming-$1/t.npy" "$WORK/v$1.npy" "$1" $ROWS $DIM <<'PY'
import sys
import numpy as np
path, model, seed, rows, dim = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
np.save(path, x)
np.save(model, x)
PY
  mv -T "$D/.incoming-$1" "$D/$1"
}

# check_served MODEL: every row of t served equals $WORK/MODEL.npy, element by element.
check_served() {
  "$PY" - "$T" "$WORK/$1.npy" <<'PY' || fail "table t: served rows differ from $1"
import sys
import numpy as np
from embedding_client import EmbeddingClient
target, path = sys.argv[1:]
model = np.load(path)
with EmbeddingClient(target) as c:
    got = c.look_up(np.arange(model.shape[0]), table="t", dtype="float32")
bad = np.argwhere(got != model)
assert got.shape == model.shape and bad.size == 0, (path, bad[:5].tolist())
PY
}

client() { "$CLIENT" --target="$T" --admin_target="$A" "$@"; }

# pin_ok WANT ARGS...: `embedding-client ARGS...` (pin or unpin) prints the line WANT.
pin_ok() {
  local want=$1; shift
  client "$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "$* failed"; }
  [[ $(cat "$WORK/out") == "$want" ]] || { cat "$WORK/out"; fail "$*: want '$want'"; }
}
# state VERSION SEQUENCE PINNED(true|false): `versions` and `tables` report it for t.
state() {
  client versions >"$WORK/versions" || fail "versions failed"
  [[ $(cat "$WORK/versions") == "table t version $1 sequence $2 pinned $3" ]] ||
    { cat "$WORK/versions"; fail "versions: want t $1 $2 pinned $3"; }
  client tables >"$WORK/tables" || fail "tables failed"
  local yes_no=no
  [[ $3 == true ]] && yes_no=yes
  head -1 "$WORK/tables" | grep -q "  VERSION  PINNED  SEQUENCE  UPDATED_ROWS$" ||
    { cat "$WORK/tables"; fail "tables: no PINNED column"; }
  grep -qE "^t .* $1 +$yes_no +$2 +[0-9]+$" "$WORK/tables" ||
    { cat "$WORK/tables"; fail "tables: want t version $1 pinned $yes_no sequence $2"; }
}
# refused CODE_OR_TEXT ARGS...: embedding-client fails (exit 1) saying CODE_OR_TEXT.
refused() {
  local says=$1; shift
  if client "$@" >"$WORK/out" 2>"$WORK/err"; then fail "$* was not refused"; fi
  grep -qF -- "$says" "$WORK/err" || { cat "$WORK/err"; fail "$*: no '$says'"; }
}

write_version 1
start_server "$SERVER" --table=t="$D" --admin_address=127.0.0.1:0 --admin_insecure \
  --drain_seconds=0
ADMIN_PORT=$(sed -n 's/.*admin service ([^)]*) on [^ ]*:\([0-9]*\),.*/\1/p' "$SERVER_LOG")
[[ -n $ADMIN_PORT ]] || { cat "$SERVER_LOG"; fail "no admin port in the server's log"; }
T=127.0.0.1:$GRPC_PORT A=127.0.0.1:$ADMIN_PORT
state 1 0 false
check_served v1

# Version 2 appears; without polling the server stays on 1 until asked.
write_version 2
state 1 0 false
check_served v1
pin_ok "table t version 2 sequence 0 pinned false" pin 0
state 2 0 false
check_served v2
# A rollback: 1 served and pinned.
pin_ok "table t version 1 sequence 0 pinned true" pin 1 --table=t
state 1 0 true
check_served v1
# Back to the newest, unpinned.
pin_ok "table t version 2 sequence 0 pinned false" pin 0
state 2 0 false
check_served v2
# Pinning the newest pins it; unpin unpins.
pin_ok "table t version 2 sequence 0 pinned true" pin 2
state 2 0 true
pin_ok "table t version 2 sequence 0 pinned false" unpin
state 2 0 false

# Updates, saved as version 3 with their sequence; a rollback to 2 drops them (sequence 0), and
# the newest brings them back with sequence 1.
"$PY" - "$WORK" <<'PY'
import sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(99)
ids = rng.permutation(500)[:60].astype(np.int64)
rows = rng.standard_normal((60, 12)).astype(np.float32)
np.save(f"{work}/u_ids.npy", ids)
np.save(f"{work}/u_rows.npy", rows)
v3 = np.load(f"{work}/v2.npy")
v3[ids] = rows
np.save(f"{work}/v3.npy", v3)
PY
client update --ids="$WORK/u_ids.npy" --rows="$WORK/u_rows.npy" >"$WORK/out" 2>"$WORK/err" ||
  { cat "$WORK/err"; fail "update failed"; }
client save >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "save failed"; }
grep -q "^table t version 3 sequence 1 " "$WORK/out" || { cat "$WORK/out"; fail "save: version 3"; }
check_served v3
pin_ok "table t version 2 sequence 0 pinned true" pin 2
state 2 0 true
check_served v2
pin_ok "table t version 3 sequence 1 pinned false" pin 0
state 3 1 false
check_served v3

# Refusals: the served version stays.
pin_ok "table t version 1 sequence 0 pinned true" pin 1
write_version 4
truncate -s 300 "$D/4/t.npy"  # a broken version: its file cut short
refused FAILED_PRECONDITION pin 4
refused "has no version 7" pin 7
refused FAILED_PRECONDITION pin 7
refused NOT_FOUND pin 1 --table=nope
refused UNIMPLEMENTED pin 1 --admin_target="$T"  # the lookup port has no admin service
refused "takes one version number" pin
refused "takes one version number" pin 1 2
refused "takes one version number" pin x
refused "takes one version number" pin -- -1
refused "takes no arguments" unpin 1
state 1 0 true
check_served v1
# The newest (pin 0) is the broken 4 too: refused, and 1 stays served and pinned.
refused FAILED_PRECONDITION unpin
state 1 0 true
check_served v1
rm -r "${D:?}/4"

# The Python clients: load_version, versions(), list_tables()' version_pinned.
"$PY" - "$T" "$A" "$WORK" <<'PY' || fail "Python clients"
import sys
import grpc
import numpy as np
from embedding_client import EmbeddingAdminClient, EmbeddingClient, LoadedVersion, TableVersion

target, admin_target, work = sys.argv[1:]


def served(c):
    return c.look_up(np.arange(500), table="t", dtype="float32")


with EmbeddingAdminClient(admin_target) as admin, EmbeddingClient(target) as c:
    assert c.versions() == {"t": TableVersion(1, 0, True)}, c.versions()
    assert c.list_tables()[0]["version_pinned"] is True
    loaded = admin.load_version(2, "t")
    assert loaded == LoadedVersion("t", 2, 0, True), loaded
    assert np.array_equal(served(c), np.load(f"{work}/v2.npy"))
    assert c.versions()["t"] == (2, 0, True), c.versions()
    loaded = admin.load_version()
    assert loaded == LoadedVersion("t", 3, 1, False), loaded
    assert np.array_equal(served(c), np.load(f"{work}/v3.npy"))
    assert c.versions()["t"].pinned is False and c.list_tables()[0]["version_pinned"] is False
    try:
        admin.load_version(4)
        raise AssertionError("version 4 was loaded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, e
    assert c.versions()["t"] == (3, 1, False), c.versions()
    assert np.array_equal(served(c), np.load(f"{work}/v3.npy"))
PY
state 3 1 false
check_served v3
echo "load_version_check: pin 0 / pin N / unpin through the CLI and load_version in Python," \
  "every row of each version served as written; broken and missing versions refused"
