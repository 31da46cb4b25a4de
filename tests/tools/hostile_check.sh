#!/usr/bin/env bash
# Hostile clients against the real server (docs/reliability.md): slow-loris connections on the
# metrics port must not stop scrapes, and the server closes them within its request timeout (16
# at once, issue 41); the server raises its soft open-files limit to the hard one
# at start-up (gRPC 1.51's listener stops for good after one accept4() fails with EMFILE).
#   hostile_check.sh SERVER
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tools/lib.sh
source "$here/lib.sh"
server=$1

# Soft limit 512 under a higher hard one: the server says it raised it.
hard=$(ulimit -Hn)
if [[ $hard == unlimited || $hard -gt 512 ]]; then
  ( ulimit -Sn 512; exec "$server" --grpc_address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
      --device=cpu --demo_table=1000x8 >"$WORK/limit.log" 2>&1 ) &
  PIDS+=($!)
  for _ in $(seq 300); do
    grep -q "health SERVING" "$WORK/limit.log" && break
    sleep 0.1
  done
  grep -q "open files: limit .* (raised from 512)" "$WORK/limit.log" ||
    { cat "$WORK/limit.log"; fail "the server did not raise its soft open-files limit from 512"; }
  echo "ok: the soft open-files limit was raised from 512 ($(grep -o 'open files: limit [0-9]*' "$WORK/limit.log"))"
else
  echo "skip: the hard open-files limit ($hard) leaves nothing to raise"
fi

start_server "$server" --demo_table=1000x8
python3 "$here/hostile_check.py" slow_metrics "$METRICS_PORT"
python3 "$here/hostile_check.py" slow_flood "$METRICS_PORT"
