#!/usr/bin/env bash
# `embedding-client replay` against the real server (issue 23, "Nothing lost"): table t from a
# version directory (DIR/1/t.npy, float32) and a delta log (LOG/SEQ.ids.npy, LOG/SEQ.rows.npy)
# of random rows over overlapping ids, so that the order of the messages shows. Replay from 0
# applies all 6 messages; save, SIGKILL, restart: the server reports sequence 6, and a replay of
# the log grown to 9 sends 7..9 only; one more replay sends nothing. A log with a gap (12 missing,
# 13 and 14 there) sends 10 and 11, then stops naming 12; a second try sends nothing. After each
# step: the printed lines, `versions`, and every row served, element by element against a NumPy
# model of the messages applied. No sleeps: a replay returns once its messages are acknowledged.
#   replay_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
export PYTHONPATH=$WORK/py:$ROOT/client/python
ROWS=300 DIM=8
D=$WORK/t LOG=$WORK/log
mkdir -p "$D/1" "$LOG"

# Version 1 and the model of the table after sequence 0.
"$PY" - "$D/1/t.npy" "$WORK/m0.npy" $ROWS $DIM <<'PY'
import sys
import numpy as np
path, model, rows, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
x = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
np.save(path, x)
np.save(model, x)
PY

# append SEQ...: writes each message into the log, as a publisher does (rows first, each file
# under a temporary name, then renamed), and the model after it as $WORK/mSEQ.npy (from the model
# of the message written before it). Message 3's rows are float16, message 5's ids int32.
append() {
  "$PY" - "$LOG" "$WORK" "$@" <<'PY'
import glob
import os
import sys
import numpy as np
log, work, seqs = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
for seq in seqs:
    prev = max(int(os.path.basename(p)[1:-4]) for p in glob.glob(f"{work}/m*.npy"))
    model = np.load(f"{work}/m{prev}.npy")
    rng = np.random.default_rng(1000 + seq)
    n = 20 + 7 * seq
    ids = rng.permutation(model.shape[0])[:n].astype(np.int32 if seq == 5 else np.int64)
    rows = rng.standard_normal((n, model.shape[1])).astype(np.float16 if seq == 3 else np.float32)
    model[ids] = rows.astype(np.float32)
    for kind, x in (("rows", rows), ("ids", ids)):
        np.save(f"{log}/.tmp.{seq}.{kind}.npy", x)
        os.rename(f"{log}/.tmp.{seq}.{kind}.npy", f"{log}/{seq}.{kind}.npy")
    np.save(f"{work}/m{seq}.npy", model)
PY
}

# check_served SEQ: every row of t served equals the model after message SEQ.
check_served() {
  "$PY" - "$T" "$WORK/m$1.npy" <<'PY' || fail "table t: served rows differ from the model after $1"
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

# want_out LINE...: $WORK/out holds exactly these lines.
want_out() {
  printf '%s\n' "$@" >"$WORK/want"
  diff "$WORK/want" "$WORK/out" >&2 || fail "output differs from the lines wanted (above)"
}
# acks FIRST LAST: the ack lines of messages FIRST..LAST (message k has 20 + 7k rows).
acks() { for ((k = $1; k <= $2; ++k)); do echo "table t sequence $k rows $((20 + 7 * k))"; done; }
# state VERSION SEQUENCE: `versions` reports it for t.
state() {
  client versions >"$WORK/versions" || fail "versions failed"
  [[ $(cat "$WORK/versions") == "table t version $1 sequence $2 pinned false" ]] ||
    { cat "$WORK/versions"; fail "versions: want t version $1 sequence $2"; }
}
serve() {
  start_server "$SERVER" --table=t="$D" --admin_address=127.0.0.1:0 --admin_insecure \
    --drain_seconds=0
  ADMIN_PORT=$(sed -n 's/.*admin service ([^)]*) on [^ ]*:\([0-9]*\),.*/\1/p' "$SERVER_LOG")
  [[ -n $ADMIN_PORT ]] || { cat "$SERVER_LOG"; fail "no admin port in the server's log"; }
  T=127.0.0.1:$GRPC_PORT A=127.0.0.1:$ADMIN_PORT
}

append 1 2 3 4 5 6
serve
state 1 0
check_served 0
# From 0: all six, in order, with their own sequences.
client replay --log="$LOG" --table=t >"$WORK/out" 2>"$WORK/err" ||
  { cat "$WORK/err"; fail "replay from 0 failed"; }
mapfile -t lines < <(acks 1 6)
want_out "${lines[@]}" "replayed 6 messages, sequences 1..6; table t now at sequence 6"
state 1 6
check_served 6

# Save, SIGKILL, restart: the saved version and its sequence.
client save >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "save failed"; }
grep -q "^table t version 2 sequence 6 " "$WORK/out" || { cat "$WORK/out"; fail "save: version 2"; }
{ kill -KILL "${PIDS[-1]}" && wait "${PIDS[-1]}"; } 2>/dev/null || true
serve
state 2 6
check_served 6

# The log grew meanwhile: only 7..9 are sent (the default table, t).
append 7 8 9
client replay --log="$LOG" >"$WORK/out" 2>"$WORK/err" ||
  { cat "$WORK/err"; fail "replay from 6 failed"; }
mapfile -t lines < <(acks 7 9)
want_out "${lines[@]}" "replayed 3 messages, sequences 7..9; table t now at sequence 9"
state 2 9
check_served 9
# Up to date: nothing to send.
client replay --log="$LOG" --table=t >"$WORK/out" 2>"$WORK/err" ||
  { cat "$WORK/err"; fail "replay of an applied log failed"; }
want_out "table t at sequence 9; the log's newest message is 9: nothing to replay"
state 2 9

# A gap: 12 lost. 10 and 11 are applied, then the replay stops naming 12; 13 and 14 are not.
append 10 11 13 14
if client replay --log="$LOG" >"$WORK/out" 2>"$WORK/err"; then fail "a gap was not refused"; fi
mapfile -t lines < <(acks 10 11)
want_out "${lines[@]}" "replayed 2 messages, sequences 10..11; table t now at sequence 11"
grep -qF "the log has no message 12 (after 11 its next is 13)" "$WORK/err" ||
  { cat "$WORK/err"; fail "the gap: 12 not named"; }
state 2 11
check_served 11
# Again: the gap is next, so nothing is sent.
if client replay --log="$LOG" >"$WORK/out" 2>"$WORK/err"; then fail "a gap was not refused"; fi
[[ ! -s $WORK/out ]] || { cat "$WORK/out"; fail "the gap: something was sent"; }
grep -qF "no message 12" "$WORK/err" || { cat "$WORK/err"; fail "the gap: 12 not named"; }
state 2 11
check_served 11

# Bad uses: no --log, an unknown table, a half message (ids without rows).
if client replay >"$WORK/out" 2>"$WORK/err"; then fail "replay without --log ran"; fi
grep -qF "needs --log" "$WORK/err" || { cat "$WORK/err"; fail "no --log: not said"; }
if client replay --log="$LOG" --table=nope >"$WORK/out" 2>"$WORK/err"; then
  fail "replay of an unknown table ran"
fi
grep -qF 'no table "nope"' "$WORK/err" || { cat "$WORK/err"; fail "unknown table: not said"; }
mv "$LOG/13.ids.npy" "$LOG/12.ids.npy"
if client replay --log="$LOG" >"$WORK/out" 2>"$WORK/err"; then fail "a half message was sent"; fi
grep -qF "12.rows.npy" "$WORK/err" || { cat "$WORK/err"; fail "half message: 12.rows.npy not named"; }
state 2 11
check_served 11
echo "replay_check: replays from 0, after a save and SIGKILL restart, of an applied log and of a" \
  "log with a gap; every row checked"
