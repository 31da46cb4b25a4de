#!/usr/bin/env bash
# embedding-client's behaviour where a new user met it (issue 40, item 3), against the real server:
# - update whose sequence comes from another server's ListTables (--target not the admin server's)
#   is refused saying where its sequence was read and what to give instead (a);
# - update, save and pin at a lookup port say that it serves no admin service and that the admin
#   service is on the server's --admin_address (c);
# - bench with failing calls prints the first message of each failing code, in the text, on stderr
#   and in --json's first_messages (d);
# - a negative id before -- is refused with a hint, after -- it reaches the server, whose
#   INVALID_ARGUMENT names it; --help says so (f);
# - a flag the client does not know exits 1, like every other start-up failure (g);
# - lookup --exact prints values that read back as the very float32 the server answered (j).
#   cli_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
export PYTHONPATH=$WORK/py:$ROOT/client/python:$ROOT/tests/tools

admin_port() { sed -n 's/.*admin service (UpdateRows) on [^ ]*:\([0-9]*\),.*/\1/p' "$SERVER_LOG"; }

# Server A, with an admin listener; server B, another server of the same table, without one.
start_server "$SERVER" --demo_table=100x8 --demo_seed=5 --drain_seconds=0 --max_request_ids=8 \
  --admin_address=127.0.0.1:0 --admin_insecure
A=127.0.0.1:$GRPC_PORT
ADMIN=127.0.0.1:$(admin_port)
[[ $ADMIN != 127.0.0.1: ]] || { cat "$SERVER_LOG"; fail "no admin port in the server's log"; }
start_server "$SERVER" --demo_table=100x8 --demo_seed=5 --drain_seconds=0
B=127.0.0.1:$GRPC_PORT

# run EXPECTED_EXIT ARGS...: embedding-client ARGS; its exit status must be EXPECTED_EXIT.
run() {
  local want=$1; shift
  local got=0
  "$CLIENT" "$@" >"$WORK/out" 2>"$WORK/err" || got=$?
  ((got == want)) || { cat "$WORK/out" "$WORK/err"; fail "embedding-client $*: exit $got, not $want"; }
}
# says FILE TEXT: FILE ($WORK/out or $WORK/err) contains TEXT.
says() {
  grep -qF -- "$2" "$1" || { cat "$WORK/out" "$WORK/err"; fail "no '$2' in $(basename "$1")"; }
}

"$PY" - "$WORK" <<'PY'
import sys
import numpy as np
np.save(f"{sys.argv[1]}/ids.npy", np.array([1, 2], np.int64))
np.save(f"{sys.argv[1]}/rows.npy", np.ones((2, 8), np.float32))
PY

# (a) Table demo on A at sequence 5; its sequence read from B (0) gives 1, which A refuses.
run 0 --target=$A --admin_target=$ADMIN update --ids="$WORK/ids.npy" --rows="$WORK/rows.npy" \
  --sequence=5
run 1 --target=$B --admin_target=$ADMIN update --ids="$WORK/ids.npy" --rows="$WORK/rows.npy"
says "$WORK/err" "FAILED_PRECONDITION: sequence 1 for table 'demo' does not increase: the last applied is 5"
says "$WORK/err" "the first sequence sent, 1, was one more than table demo's sequence 0 as ListTables on --target=$B reports it: if that is not the lookup address of the server of --admin_target=$ADMIN, give its lookup address as --target, or give --sequence"
# Read from A itself, it is right.
run 0 --target=$A --admin_target=$ADMIN update --ids="$WORK/ids.npy" --rows="$WORK/rows.npy"
[[ $(cat "$WORK/out") == "table demo sequence 6 rows 2" ]] || { cat "$WORK/out"; fail "update: wrong ack"; }

# (c) The admin commands at a lookup port.
for cmd in "update --ids=$WORK/ids.npy --rows=$WORK/rows.npy --sequence=100" save "pin 1"; do
  # shellcheck disable=SC2086  # cmd is words
  run 1 --admin_target=$A $cmd
  says "$WORK/err" "UNIMPLEMENTED: --admin_target=$A: this address serves no admin service (embedding.v1.EmbeddingAdminService): embedding-server serves it only on the port of its --admin_address, not on its lookup port (--grpc_address)"
done

# (d) 16 ids a call where the server takes 8: every call INVALID_ARGUMENT, its message shown.
run 3 --target=$A bench --requests=20 --warmup=0 --ids_per_request=16
says "$WORK/out" "codes         INVALID_ARGUMENT 20"
says "$WORK/out" "  INVALID_ARGUMENT: "
says "$WORK/out" "--max_request_ids"
says "$WORK/err" "20 of 20 calls failed: INVALID_ARGUMENT 20 (first: \""
run 3 --target=$A bench --requests=20 --warmup=0 --ids_per_request=16 --json
"$PY" - "$WORK/out" <<'PY' || fail "bench --json: no first message of INVALID_ARGUMENT"
import json, sys
report = json.load(open(sys.argv[1]))
assert report["codes"] == {"INVALID_ARGUMENT": 20}, report["codes"]
assert "--max_request_ids" in report["first_messages"]["INVALID_ARGUMENT"], report["first_messages"]
PY
run 0 --target=$A bench --requests=5 --warmup=0 --ids_per_request=4 --json
grep -qF '"first_messages":{}' "$WORK/out" || { cat "$WORK/out"; fail "bench --json: first_messages not empty"; }

# (f) Negative ids.
run 1 --target=$A lookup 3 -1
says "$WORK/err" "embedding-client: -1 would be read as a flag; put negative ids after --, e.g. embedding-client lookup -- -1"
run 1 --target=$A lookup -- 3 -1
says "$WORK/err" "INVALID_ARGUMENT"
says "$WORK/err" "-1"
run 0 --target=$A --sequence -5 lookup 3  # a flag's value is not an id
run 1 --help
says "$WORK/out" "negative ids go after --, e.g. lookup -- 3 -1"

# (g) A flag it does not know: exit 1, as for any other start-up failure.
run 1 --no_such_flag tables

# (j) --exact: each value reads back as the float32 the server answered; the default's 6 digits
# do not, for some of them.
run 0 --target=$A lookup --exact 0 1 2 99
cp "$WORK/out" "$WORK/exact"
run 0 --target=$A lookup 0 1 2 99
"$PY" - "$WORK/exact" "$WORK/out" $A <<'PY' || fail "lookup --exact does not round-trip"
import sys
import numpy as np
from embedding_client import EmbeddingClient
def values(path):
    lines = [l for l in open(path).read().splitlines() if l.split(":")[0] in ("0", "1", "2", "99")]
    return np.array([[np.float32(v) for v in l.split(":")[1].split()] for l in lines], np.float32)
with EmbeddingClient(sys.argv[3]) as c:
    want = c.look_up([0, 1, 2, 99], dtype="float32")
exact, short = values(sys.argv[1]), values(sys.argv[2])
assert exact.shape == want.shape, (exact.shape, want.shape)
assert np.array_equal(exact.view(np.uint32), want.view(np.uint32)), "exact values differ"
assert not np.array_equal(short, want), "6 digits round-tripped every value: a weak check"
PY
echo "cli_check: OK"
