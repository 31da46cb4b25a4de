#!/usr/bin/env bash
# Runs one ghz scenario of deploy/loadtest/, scaled down to a few calls, through
# `embedding-client bench --config` against the real server (the default 100000 x 128 demo table)
# on loopback: every call is OK and the answers have the scenario's dtype. Large scenarios also
# run under a receive limit smaller than their answers, which must fail them all with
# RESOURCE_EXHAUSTED (the limit is applied). `ramp` runs through deploy/loadtest/ramp.
#   loadtest_check.sh SERVER CLIENT SCENARIO.json [REQUESTS]
source "$(dirname "$0")/../tools/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2 FILE=$3 REQUESTS=${4:-64}
name=$(basename "$FILE" .json)
start_server "$SERVER" --drain_seconds=0
target=127.0.0.1:$GRPC_PORT

if [[ $name == ramp ]]; then
  "$ROOT/deploy/loadtest/ramp" --config "$FILE" --seconds 0.25 --bench "$CLIENT" "$target" 40 80 \
    >"$WORK/ramp.txt" || { cat "$WORK/ramp.txt"; fail "ramp failed"; }
  cat "$WORK/ramp.txt"
  /usr/bin/python3 "$(dirname "$0")/ramp_output.py" "$WORK/ramp.txt" 0.25 none 40 80 ||
    fail "ramp output is wrong (above)"
  echo "loadtest $name: ramp ran at 40 and 80 req/s, no call failed"
  exit 0
fi

case $name in
  *bfloat16 | *float16) element=2 ;;
  *) element=4 ;;
esac
"$CLIENT" --target="$target" bench --config="$FILE" --requests="$REQUESTS" --json \
  >"$WORK/report.json" || fail "bench --config $FILE failed"
/usr/bin/python3 - "$WORK/report.json" "$REQUESTS" "$element" <<'PY' || fail "wrong report for $name"
import json, sys
r, n, element = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
assert r["codes"] == {"OK": n} and r["requests"] == n, r
assert r["rows"] == 100000 and r["dim"] == 128, r
bytes_per_id = r["payload_mb_per_s"] * 1e6 / r["ids_per_s"]
assert round(bytes_per_id) == 128 * element, (bytes_per_id, r)
PY
if [[ $name == large-* ]]; then
  rc=0
  "$CLIENT" --target="$target" bench --config="$FILE" --requests=8 --max_recv_message_size=100KB \
    --json >"$WORK/limited.json" 2>"$WORK/limited.err" || rc=$?
  grep -q '"codes":{"RESOURCE_EXHAUSTED":8}' "$WORK/limited.json" ||
    { cat "$WORK/limited.json"; fail "answers over --max_recv_message_size were not refused"; }
  # Failed calls: the report all the same, a line naming them, exit status 3.
  [[ $rc == 3 ]] || fail "bench with failed calls exited $rc, want 3"
  grep -q '8 of 8 calls failed: RESOURCE_EXHAUSTED 8' "$WORK/limited.err" ||
    { cat "$WORK/limited.err"; fail "bench did not say which calls failed"; }
  # As in ghz 0.121.0, no receive limit unless one is given: the file's own limit removed and
  # 9000 ids a call (4.6 MB answers at dim 128, past the 4 MiB gRPC clients take by default),
  # every call still passes.
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c.pop("max-recv-message-size"); c["data"] = {"ids": list(range(9000))}; c.pop("metadata", None); json.dump(c, open(sys.argv[2], "w"))' \
    "$FILE" "$WORK/unlimited.json"
  "$CLIENT" --target="$target" bench --config="$WORK/unlimited.json" --requests=4 --json \
    >"$WORK/unlimited-report.json" || fail "bench --config without a receive limit failed"
  grep -q '"codes":{"OK":4}' "$WORK/unlimited-report.json" ||
    { cat "$WORK/unlimited-report.json"; fail "a config without a receive limit refused answers"; }
fi
echo "loadtest $name: $REQUESTS calls OK, ${element}-byte elements"
