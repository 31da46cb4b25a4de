#!/usr/bin/env bash
# Runs one ghz scenario of deploy/loadtest/ under the real ghz, as its README runs it (the file as
# --config and no proto file: ghz finds LookUp through the server's reflection), against the real
# server (the default 100000 x 128 demo table) on loopback, cut down for a 2-core machine: 1 s
# (-z, with --duration-stop=wait, so that the calls in flight at the end are answered and counted
# rather than cancelled) at 4 calls in flight (-c 4; a file's rps stays). Every call is OK (the
# statusCodeDistribution of `ghz -O json`), and the server saw them with the file's ids and dtype:
# its embedding_ids_total is the calls x the file's ids a call, its embedding_answer_bytes_total
# those ids x 128 x the dtype's size. `ramp` also runs through deploy/loadtest/ramp with ghz at
# 100 and 1000 req/s, 2 s each: 2000 calls at the second, whose report (about 180 KB) is over
# Linux's 128 KiB bound on one command-line argument, where ramp once failed with "Argument list
# too long"; there what the server sustains is not checked (a loaded 2-core machine may shed some
# calls at 1000/s): failed calls are allowed, not all.
# ghz is GHZ, else ../shared/tools/ghz/ghz beside the checkout, else `ghz` on PATH; where none is
# there (ghz is not packaged in Debian or npm), the check skips (exit 77), saying so.
#   ghz_check.sh SERVER SCENARIO.json
source "$(dirname "$0")/../tools/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 FILE=$2
name=$(basename "$FILE" .json)
ghz=$(find_ghz)
if [[ -z $ghz ]]; then
  echo "SKIP: no ghz (GHZ unset, no $ROOT/../shared/tools/ghz/ghz, none on PATH)"
  exit 77
fi
"$ghz" --version

start_server "$SERVER" --drain_seconds=0
target=127.0.0.1:$GRPC_PORT
"$ghz" --config="$FILE" -z 1s --duration-stop=wait -c 4 -O json -o "$WORK/report.json" "$target" \
  >"$WORK/ghz.out" 2>&1 || { cat "$WORK/ghz.out"; fail "ghz --config $FILE failed"; }
curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics" || fail "no /metrics"
/usr/bin/python3 - "$FILE" "$WORK/report.json" "$WORK/metrics" <<'PY' ||
  fail "$name under ghz (above)"
import json, sys
config, report = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert not {"proto", "protoset"} & config.keys(), "the file names a proto: reflection untested"
calls, codes = report["count"], report["statusCodeDistribution"]
assert calls >= 4 and codes == {"OK": calls}, f"{calls} calls, codes {codes}"
served = {}
for line in open(sys.argv[3]):
    metric = line.split("{")[0].split(" ")[0]
    if metric in ("embedding_ids_total", "embedding_answer_bytes_total"):
        served[metric] = served.get(metric, 0) + float(line.split()[-1])
ids = calls * len(config["data"]["ids"])
size = 4 if config["data"]["dtype"] == "DATA_TYPE_FLOAT32" else 2
want = {"embedding_ids_total": ids, "embedding_answer_bytes_total": ids * 128 * size}
assert served == want, f"the server counted {served}, want {want} for {calls} calls"
print(f"{calls} calls OK in {report['total'] / 1e9:.2f} s ({report['rps']:.0f}/s), "
      f"{ids} ids served, {size}-byte elements")
PY

if [[ $name == ramp ]]; then
  "$ROOT/deploy/loadtest/ramp" --ghz "$ghz" --seconds 2 "$target" 100 1000 >"$WORK/ramp.txt" 2>&1 ||
    { cat "$WORK/ramp.txt"; fail "ramp through ghz failed"; }
  cat "$WORK/ramp.txt"
  /usr/bin/python3 "$(dirname "$0")/ramp_output.py" "$WORK/ramp.txt" 2 some 100 1000 ||
    fail "ramp output is wrong (above)"
  echo "loadtest ghz.$name: also ramp through ghz at 100 and 1000 req/s (200 and 2000 calls)"
fi
echo "loadtest ghz.$name: under $ghz, every call OK"
