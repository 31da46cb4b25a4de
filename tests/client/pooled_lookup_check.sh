#!/usr/bin/env bash
# Pooled lookups and quantized tables through the clients against the real server, on random
# tables: t (float32), h (float16), q8 and q4 (t's file quantized at load with
# --table=NAME=PATH,quantize=int8|int4).
# - The Python client: tests/client/python/pooled_lookup_check.py (sums, weighted sums and means
#   against a NumPy float64 reference element by element, in every answer type; quantized rows;
#   dtypes and bytes of ListTables; refusals).
# - embedding-client: `tables` lists q8/q4 with their dtype and BYTES (and WHERE: device, as on
#   the CPU every table is); `lookup --pooling` with --offsets, --lengths, --weights and --shape
#   prints one "bag B:" line per bag, checked against NumPy; malformed bags and bad flags fail
#   with the error named.
# - bench --config with ghz's JSON form of pooled requests ("pooling": "POOLING_SUM", "offsets",
#   "lengths", "weights"): every call OK; and the same config through the real ghz, where there is
#   one (GHZ, ../shared/tools/ghz/ghz or ghz on PATH; that part is left out otherwise).
#   pooled_lookup_check.sh SERVER CLIENT
source "$(dirname "$0")/../tools/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
"$PY" - "$WORK" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(23)
t = rng.standard_normal((700, 37)).astype(np.float32)  # an odd dim: int4 rows end on a half byte
np.save(sys.argv[1] + "/t.npy", t)
np.save(sys.argv[1] + "/h.npy", (rng.standard_normal((700, 37)) * 4).astype(np.float16))
PY
start_server "$SERVER" --table="t=$WORK/t.npy" --table="h=$WORK/h.npy" \
  --table="q8=$WORK/t.npy,quantize=int8" --table="q4=$WORK/t.npy,quantize=int4" --drain_seconds=0
T=127.0.0.1:$GRPC_PORT

# --- The Python client.
PYTHONPATH="$WORK/py:$ROOT/client/python" "$PY" "$HERE/python/pooled_lookup_check.py" \
  "$GRPC_PORT" "$WORK/t.npy" "$WORK/h.npy" || fail "python pooled_lookup_check failed"

# --- embedding-client tables.
"$CLIENT" --target=$T tables >"$WORK/tables" || fail "tables failed"
head -1 "$WORK/tables" | grep -qE "^NAME +ROWS +DIM +DTYPE +BYTES +DEVICE +WHERE +DEFAULT " ||
  { cat "$WORK/tables"; fail "tables: no BYTES column after DTYPE, or no WHERE after DEVICE"; }
for want in "t 700 37 float32 103600" "h 700 37 float16 51800" "q8 700 37 int8_rowwise 31500" \
            "q4 700 37 int4_rowwise 16100"; do
  read -r name rows dim dtype bytes <<<"$want"
  grep -qE "^$name +$rows +$dim +$dtype +$bytes +cpu +device +(yes|no) " "$WORK/tables" ||
    { cat "$WORK/tables"; fail "tables: want $want"; }
done

# --- embedding-client lookup --pooling: each case's output against NumPy.
# check_lookup TABLE ARGS...: runs `lookup` with ARGS on TABLE, keeping its output for the
# comparison in python below (one file per case).
cases=0
check_lookup() {
  local table=$1; shift
  cases=$((cases + 1))
  "$CLIENT" --target=$T --table="$table" "$@" >"$WORK/case.$cases.out" 2>"$WORK/case.$cases.err" ||
    { cat "$WORK/case.$cases.err"; fail "lookup $* on $table failed"; }
  printf '%s\n' "$table" "$@" >"$WORK/case.$cases.args"
}
check_lookup t --pooling=sum --offsets=0,3,3,5 lookup 1 2 3 4 699
check_lookup t --pooling=sum --offsets=0,3,3,5 --weights=0.5,-1,2,0.25,3 lookup 1 2 3 4 699
check_lookup h --pooling=mean --lengths=2,0,3 --dtype=float32 lookup 0 0 5 6 7
check_lookup t --pooling=mean --shape=2,3 --dtype=bfloat16 lookup 10 11 12 13 14 15
check_lookup q8 --pooling=sum --lengths=4 lookup 9 8 7 6
check_lookup q4 --pooling=mean --offsets=0,1,4 --dtype=float16 lookup 100 200 300 400
"$PY" - "$WORK" "$cases" <<'PY' || fail "embedding-client lookup --pooling answers are off (above)"
import sys
import numpy as np
work, cases = sys.argv[1], int(sys.argv[2])
tables = {"t": np.load(work + "/t.npy").astype(np.float64),
          "h": np.load(work + "/h.npy").astype(np.float64)}
unit = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
for k in range(1, cases + 1):
    args = open("%s/case.%d.args" % (work, k)).read().split("\n")[:-1]
    table, flags = args[0], dict(a[2:].split("=", 1) for a in args[1:] if a.startswith("--"))
    ids = np.array([int(a) for a in args[args.index("lookup") + 1:]])
    lines = open("%s/case.%d.out" % (work, k)).read().split("\n")[:-1]
    if "offsets" in flags:
        offsets = np.array([int(v) for v in flags["offsets"].split(",")])
    elif "lengths" in flags:
        offsets = np.concatenate([[0], np.cumsum([int(v) for v in flags["lengths"].split(",")])])
    else:  # the last axis of --shape
        shape = [int(v) for v in flags["shape"].split(",")]
        offsets = np.arange(0, len(ids) + 1, shape[-1])
    weights = (np.array([float(v) for v in flags["weights"].split(",")])
               if "weights" in flags else np.ones(len(ids)))
    base = {"q8": "t", "q4": "t"}.get(table, table)
    rows = tables[base][ids] * weights[:, None]
    bags = len(offsets) - 1
    ref = np.array([rows[offsets[b]:offsets[b + 1]].sum(axis=0) for b in range(bags)])
    mag = np.array([np.abs(rows[offsets[b]:offsets[b + 1]]).sum(axis=0) for b in range(bags)])
    count = np.maximum(np.diff(offsets), 1)[:, None]
    if flags["pooling"] == "mean":
        ref, mag = ref / count, mag / count
    out = flags.get("dtype", "float16" if table == "h" else "float32")
    # Printed with 6 significant digits; for q8 and q4 the reference is the unquantized table,
    # so each row adds up to half a quantization step of its own.
    tol = (len(ids) + 2) * 2.0**-24 * mag + (unit[out] + 1e-5) * np.abs(ref) + 1e-6
    if table in ("q8", "q4"):
        t = tables["t"][ids]
        step = (t.max(axis=1) - t.min(axis=1)) / (255 if table == "q8" else 15)
        half = 0.505 * step * np.abs(weights)
        per_bag = np.array([half[offsets[b]:offsets[b + 1]].sum() for b in range(bags)])
        tol = tol + (per_bag[:, None] / count if flags["pooling"] == "mean" else per_bag[:, None])
    want_shape = "shape [%s]" % ", ".join(str(d) for d in (bags, ref.shape[1]))
    assert lines[0] == want_shape, (k, args, lines[0], want_shape)
    assert lines[1] == "dtype " + out, (k, args, lines[1])
    assert len(lines) == 2 + bags, (k, args, lines)
    for b in range(bags):
        label, _, values = lines[2 + b].partition(":")
        assert label == "bag %d" % b, (k, args, lines[2 + b])
        got = np.array([float(v) for v in values.split()])
        err = np.abs(got - ref[b])
        assert np.all(err <= tol[b]), (k, args, b, got, ref[b], tol[b])
print("embedding-client lookup --pooling: %d cases match NumPy" % cases)
PY

# --- Refusals of embedding-client lookup: the server's INVALID_ARGUMENT, and bad flags.
expect_failure() {  # expect_failure WORDS ARGS...: exit 1, stderr holding WORDS
  local words=$1; shift
  if "$CLIENT" --target=$T "$@" 2>"$WORK/err"; then fail "accepted: $*"; fi
  grep -q -- "$words" "$WORK/err" || { cat "$WORK/err"; fail "$* did not say '$words'"; }
}
expect_failure "INVALID_ARGUMENT" --pooling=sum --offsets=1,3 lookup 1 2 3
expect_failure "INVALID_ARGUMENT" --pooling=sum --offsets=0,2 --lengths=2 lookup 1 2
expect_failure "INVALID_ARGUMENT" --pooling=mean --offsets=0,2 --weights=1,2 lookup 1 2
expect_failure "INVALID_ARGUMENT" --pooling=sum --lengths=1,1 lookup 1 2 3
expect_failure '--pooling must be sum or mean, got "max"' --pooling=max lookup 1
expect_failure 'bad --offsets entry "x"' --pooling=sum --offsets=0,x lookup 1
expect_failure 'bad --lengths entry "1.5"' --pooling=sum --lengths=1.5 lookup 1
expect_failure 'bad --weights entry "w"' --pooling=sum --offsets=0,1 --weights=w lookup 1
expect_failure '--dtype must be float32, float16 or bfloat16, got "int8_rowwise"' \
  --table=q8 --dtype=int8_rowwise lookup 1

# --- bench --config: ghz's JSON form of pooled requests.
cat >"$WORK/pooled.json" <<JSON
{
  "call": "embedding.v1.EmbeddingService.LookUp",
  "host": "$T",
  "insecure": true,
  "total": 120,
  "concurrency": 4,
  "data": [
    {"table": "q8", "ids": ["{{randomInt 0 700}}", "{{randomInt 0 700}}", "{{randomInt 0 700}}"],
     "pooling": "POOLING_SUM", "offsets": [0, 2, 3], "weights": [0.5, 1, 2]},
    {"table": "t", "ids": ["{{randomInt 0 700}}", "{{randomInt 0 700}}", "5", "6"],
     "pooling": "POOLING_MEAN", "lengths": ["1", "0", "3"], "dtype": "DATA_TYPE_BFLOAT16"},
    {"table": "q4", "ids": ["1", "2", "3", "4", "5", "6"], "shape": [2, 3],
     "pooling": "POOLING_MEAN"}
  ]
}
JSON
"$CLIENT" bench --config="$WORK/pooled.json" --json >"$WORK/bench.json" 2>"$WORK/bench.err" ||
  { cat "$WORK/bench.json" "$WORK/bench.err"; fail "bench --config with pooled call data failed"; }
grep -q '"codes":{"OK":120}' "$WORK/bench.json" ||
  { cat "$WORK/bench.json"; fail "bench --config: not every pooled call was OK"; }
# Call data with a malformed bag (offsets past the ids): every call refused, exit status 3.
cat >"$WORK/bad.json" <<JSON
{"call": "embedding.v1.EmbeddingService.LookUp", "host": "$T", "insecure": true, "total": 30,
 "data": {"ids": ["1", "2", "3"], "pooling": "POOLING_SUM", "offsets": [0, 2, 4]}}
JSON
rc=0
"$CLIENT" bench --config="$WORK/bad.json" --json >"$WORK/bad.out" 2>"$WORK/bad.err" || rc=$?
[[ $rc == 3 ]] || { cat "$WORK/bad.out" "$WORK/bad.err"; fail "bench with bad bags exited $rc"; }
grep -q '"codes":{"INVALID_ARGUMENT":30}' "$WORK/bad.out" ||
  { cat "$WORK/bad.out"; fail "bench: calls with a malformed bag were not INVALID_ARGUMENT"; }

ghz=$(find_ghz)
if [[ -n $ghz ]]; then
  "$ghz" --config="$WORK/pooled.json" -O json >"$WORK/ghz.json" 2>"$WORK/ghz.err" ||
    { cat "$WORK/ghz.err"; fail "ghz with pooled call data failed"; }
  "$PY" - "$WORK/ghz.json" <<'PY' || fail "ghz: not every pooled call was OK"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["statusCodeDistribution"] == {"OK": 120}, r["statusCodeDistribution"]
PY
  ghz_note="; ghz ran the same config, 120 calls OK"
else
  ghz_note="; no ghz here (GHZ, ../shared/tools/ghz/ghz, PATH): its run left out"
fi
echo "pooled_lookup_check: python client, embedding-client lookup/tables and bench --config" \
  "(120 pooled calls OK, malformed bags refused)$ghz_note"
