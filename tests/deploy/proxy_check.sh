#!/usr/bin/env bash
# The hardened front (deploy/proxy/nghttpx.conf) in front of the real server, on loopback: good
# callers get the same answers, errors and trailers through it as directly (embedding-client's
# lookup, tables, health, an OUT_OF_RANGE call; buf curl through server reflection); then hostile
# HTTP/2 clients against it (proxy_check.py: the stream limit with SETTINGS never acknowledged, a
# CONTINUATION flood, a rapid reset, the connection cap) and, for the record, the same
# CONTINUATION flood straight at the server. The config runs as it is, with only its frontend and
# backend addresses moved to free loopback ports.
#   proxy_check.sh SERVER CLIENT
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
SERVER=$1 CLIENT=$2
CONF=$ROOT/deploy/proxy/nghttpx.conf

command -v nghttpx >/dev/null || fail "nghttpx is not installed (nghttp2-proxy; scripts/install-deps)"
# The CONTINUATION flood fix (CVE-2024-28182) is in Debian's libnghttp2 from 1.52.0-1+deb12u2 on.
lib=$(dpkg-query -W -f='${Version}' libnghttp2-14 2>/dev/null) ||
  fail "libnghttp2-14 is not installed as a Debian package"
dpkg --compare-versions "$lib" ge 1.52.0-1+deb12u2 ||
  fail "libnghttp2-14 $lib predates the CONTINUATION flood fix (1.52.0-1+deb12u2): apt-get upgrade"
echo "nghttpx $(nghttpx --version | sed 's/.*nghttp2\///'), libnghttp2-14 $lib"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_server "$SERVER" --demo_table=1000x16 --drain_seconds=0
SERVER_PID=${PIDS[-1]}

# start_proxy: nghttpx with the repository's config, the frontend on a free loopback port and the
# backend the server; waits until a health Check through it answers SERVING. Sets PROXY_PORT,
# PROXY_PID.
start_proxy() {
  local attempt
  for attempt in 1 2 3; do  # a free port can be taken by another process before nghttpx binds it
    PROXY_PORT=$(free_port)
    sed -e "s/^frontend=[^;]*/frontend=127.0.0.1,$PROXY_PORT/" \
        -e "s/^backend=[^;]*/backend=127.0.0.1,$GRPC_PORT/" "$CONF" >"$WORK/nghttpx.conf"
    nghttpx --conf="$WORK/nghttpx.conf" >"$WORK/proxy.log" 2>&1 &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    local _
    for _ in $(seq 100); do
      kill -0 "$PROXY_PID" 2>/dev/null || break
      "$CLIENT" --target="127.0.0.1:$PROXY_PORT" --timeout=1s health >/dev/null 2>&1 && return 0
      sleep 0.1
    done
    grep -q "Address already in use" "$WORK/proxy.log" || break
  done
  cat "$WORK/proxy.log"
  fail "nghttpx did not serve health through 127.0.0.1:$PROXY_PORT"
}
start_proxy
[[ $(grep -c '^frontend=' "$CONF") -eq 1 && $(grep -c '^backend=.*;proto=h2' "$CONF") -eq 1 ]] ||
  fail "deploy/proxy/nghttpx.conf: want one frontend line and one backend line with proto=h2"
grep -q "^frontend=127.0.0.1,$PROXY_PORT;no-tls$" "$WORK/nghttpx.conf" ||
  fail "the frontend is not plaintext h2c on the test port: $(grep '^frontend=' "$WORK/nghttpx.conf")"
echo "nghttpx serves on 127.0.0.1:$PROXY_PORT in front of the server on 127.0.0.1:$GRPC_PORT"

# Good callers: the same output through the proxy as directly.
direct=127.0.0.1:$GRPC_PORT proxied=127.0.0.1:$PROXY_PORT
same() {  # same WHAT ARGS...: stdout, stderr and exit status equal both ways
  local what=$1; shift
  local a b
  a=$("$CLIENT" --target="$direct" "$@" 2>&1; echo "exit $?")
  b=$("$CLIENT" --target="$proxied" "$@" 2>&1; echo "exit $?")
  [[ $a == "$b" ]] || fail "$what differs through the proxy:"$'\n'"direct: $a"$'\n'"proxied: $b"
  echo "ok: $what: the same through the proxy ($(tail -1 <<<"$b"))"
}
same "lookup 1 2 3" lookup 1 2 3
same "lookup of all 1000 rows" lookup $(seq 0 999)
same "tables" tables
same "health" health
same 'health "embedding.v1.EmbeddingService"' health embedding.v1.EmbeddingService
same "an OUT_OF_RANGE call (status and message from the trailers)" lookup 5 1000
"$CLIENT" --target="$proxied" bench --requests=200 --concurrency=8 --warmup=0s --json \
    --ids_per_request=4 >"$WORK/bench.json" || fail "bench through the proxy failed"
"$PY" - "$WORK/bench.json" <<'PY' || fail "bench through the proxy: not every call was OK"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["codes"] == {"OK": 200} and r["requests"] == 200, r
print("ok: bench through the proxy: 200 of 200 calls OK")
PY

# Server reflection through the proxy (what ghz and grpcurl use): buf curl finds LookUp by it.
buf=$(find_buf)
[[ -n $buf ]] || fail "buf is not installed (scripts/install-deps puts it in .tools/)"
out=$("$buf" curl --protocol grpc --http2-prior-knowledge -d '{"ids": ["7"]}' \
        "http://$proxied/embedding.v1.EmbeddingService/LookUp" 2>&1) ||
  fail "buf curl through the proxy (reflection): $out"
grep -q '"shape"' <<<"$out" || fail "buf curl through the proxy answered: $out"
echo "ok: buf curl through the proxy: a LookUp described by server reflection"

cap=$(sed -n 's/^worker-frontend-connections=//p' "$CONF")
[[ $cap -gt 0 ]] || fail "deploy/proxy/nghttpx.conf sets no worker-frontend-connections"
"$PY" "$ROOT/tests/deploy/proxy_check.py" "$PROXY_PORT" "$PROXY_PID" "$GRPC_PORT" "$SERVER_PID" \
  "$CLIENT" "$cap" || { tail -20 "$WORK/proxy.log"; fail "see above"; }
kill -0 "$PROXY_PID" 2>/dev/null || fail "nghttpx exited"
grep -q "Too many CONTINUATION frames" "$WORK/proxy.log" ||
  fail "nghttpx's log does not name the CONTINUATION flood"
echo "ok: nghttpx logged 'Too many CONTINUATION frames' and is still running"

# Stopping: SIGQUIT (the image's STOPSIGNAL; nghttpx as PID 1 would ignore SIGTERM) ends it,
# main process and worker, with status 0 within the config's grace period.
worker=$(cat /proc/"$PROXY_PID"/task/*/children)
kill -QUIT "$PROXY_PID"
for _ in $(seq 100); do
  kill -0 "$PROXY_PID" 2>/dev/null || break
  sleep 0.1
done
! kill -0 "$PROXY_PID" 2>/dev/null || fail "nghttpx still runs 10 s after SIGQUIT"
wait "$PROXY_PID" || fail "nghttpx exited with status $? on SIGQUIT"
for pid in $worker; do
  ! kill -0 "$pid" 2>/dev/null || fail "nghttpx's worker $pid outlived its main process"
done
echo "ok: SIGQUIT stops nghttpx (main process and worker) with status 0"
