#!/usr/bin/env bash
# LookUpFeatures (every feature of a batch in one call) through the clients against the real
# server, on random tables users (500 x 24, float32) and items (300 x 40, float32):
# - The Python client: tests/client/python/feature_lookup_check.py (pooled and unpooled features
#   against NumPy float64 in every answer type; a KeyedJaggedTensor's parts; refusals).
# - embedding-client lookup-features: its printed rows against NumPy; a bad feature refused.
# - ghz through server reflection (no proto file), where there is one (GHZ,
#   ../shared/tools/ghz/ghz or ghz on PATH): every call OK.
#   feature_lookup_check.sh SERVER CLIENT
source "$(dirname "$0")/../tools/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
"$PY" - "$WORK" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(31)
np.save(sys.argv[1] + "/users.npy", rng.standard_normal((500, 24)).astype(np.float32))
np.save(sys.argv[1] + "/items.npy", rng.standard_normal((300, 40)).astype(np.float32))
PY
start_server "$SERVER" --table="users=$WORK/users.npy" --table="items=$WORK/items.npy" \
  --drain_seconds=0
T=127.0.0.1:$GRPC_PORT

PYTHONPATH="$WORK/py:$ROOT/client/python" "$PY" "$HERE/python/feature_lookup_check.py" \
  "$GRPC_PORT" "$WORK/users.npy" "$WORK/items.npy" || fail "python feature_lookup_check failed"

# --- embedding-client lookup-features: sums of bags of users, rows of items, against NumPy.
"$CLIENT" --target=$T --batch_size=2 --exact lookup-features \
  u=users:3,5,7:2,1:sum i=items:4,299 >"$WORK/features.out" ||
  fail "lookup-features failed"
"$PY" - "$WORK" <<'PY' || fail "lookup-features printed rows that are off (above)"
import sys
import numpy as np
work = sys.argv[1]
users, items = np.load(work + "/users.npy"), np.load(work + "/items.npy")
lines = open(work + "/features.out").read().split("\n")
rows = {l.split(":")[0]: np.array([float(v) for v in l.split(":")[1].split()], dtype=np.float32)
        for l in lines if ":" in l}
assert lines[:3] == ["batch_size 2", "dtype float32", "pooled_width 24"], lines[:3]
assert np.array_equal(rows["sample 0"], users[3] + users[5]), "u sample 0"
assert np.array_equal(rows["sample 1"], users[7]), "u sample 1"
assert np.array_equal(rows["id 4"], items[4]) and np.array_equal(rows["id 299"], items[299])
PY
if "$CLIENT" --target=$T --batch_size=2 lookup-features u=users:1,2,3:1,1:sum 2>"$WORK/err"; then
  fail "lookup-features accepted lengths that do not sum"
fi
grep -q "INVALID_ARGUMENT: feature 0 'u', table 'users': lengths sum to 2 but ids has 3" \
  "$WORK/err" || { cat "$WORK/err"; fail "lookup-features: refusal not named"; }

ghz=$(find_ghz)
if [[ -n $ghz ]]; then
  "$ghz" --insecure --call=embedding.v1.EmbeddingService.LookUpFeatures --total=60 \
    --concurrency=4 -O json \
    -d '{"batch_size": 2, "features": [
          {"name": "u", "table": "users", "ids": ["{{randomInt 0 500}}", "7", "8"],
           "lengths": ["2", "1"], "pooling": "POOLING_SUM"},
          {"name": "i", "table": "items", "ids": ["{{randomInt 0 300}}", "9"]}]}' \
    "$T" >"$WORK/ghz.json" 2>"$WORK/ghz.err" || { cat "$WORK/ghz.err"; fail "ghz failed"; }
  "$PY" - "$WORK/ghz.json" <<'PY' || fail "ghz: not every LookUpFeatures call was OK"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["statusCodeDistribution"] == {"OK": 60}, r["statusCodeDistribution"]
PY
  ghz_note="; ghz (reflection) 60 calls OK"
else
  ghz_note="; no ghz here (GHZ, ../shared/tools/ghz/ghz, PATH): its run left out"
fi
echo "feature_lookup_check: python client and embedding-client lookup-features match NumPy$ghz_note"
