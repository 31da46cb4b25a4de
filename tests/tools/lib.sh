# Shared by the tool checks: start the real embedding-server on loopback and clean up after.
# Source it; it defines start_server, fail and an EXIT trap that kills what was started.
set -euo pipefail

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # A sanitizer's report in a server's log fails the check (scripts/sanitize), even one written
  # as the server exited.
  for log in "$WORK"/server.*.log; do
    if [[ -f $log ]] && grep -qE "$SANITIZER_REPORT" "$log"; then
      cat "$log" >&2
      echo "FAIL: the server's sanitizer reported an error (above)" >&2
      status=1
    fi
  done
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
SANITIZER_REPORT='ERROR: (AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer|: runtime error: '

fail() { echo "FAIL: $*" >&2; exit 1; }

# start_server BINARY [ARGS...]: starts it on 127.0.0.1 with any free ports and waits until it
# serves; sets GRPC_PORT, METRICS_PORT and SERVER_LOG.
start_server() {
  local bin=$1; shift
  SERVER_LOG=$WORK/server.${#PIDS[@]}.log  # one per server: a later one keeps the first's
  "$bin" --grpc_address=127.0.0.1:0 --metrics_address=127.0.0.1:0 --device=cpu "$@" \
    >"$SERVER_LOG" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do
    grep -q "health SERVING" "$SERVER_LOG" && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$SERVER_LOG"; fail "server exited"; }
    sleep 0.1
  done
  grep -q "health SERVING" "$SERVER_LOG" || { cat "$SERVER_LOG"; fail "server not serving"; }
  GRPC_PORT=$(sed -n 's/.*gRPC listening on [^ ]*:\([0-9]*\).*/\1/p' "$SERVER_LOG")
  METRICS_PORT=$(sed -n 's#.*metrics on http://[^ ]*:\([0-9]*\)/metrics.*#\1#p' "$SERVER_LOG")
}

# The buf CLI installed by scripts/install-deps, or nothing.
find_buf() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [[ -x $root/.tools/node_modules/.bin/buf ]]; then
    echo "$root/.tools/node_modules/.bin/buf"
  elif command -v buf >/dev/null; then
    command -v buf
  fi
}

# The ghz load generator: GHZ, else ../shared/tools/ghz/ghz beside the checkout, else ghz on PATH;
# or nothing.
find_ghz() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [[ -n ${GHZ:-} ]]; then
    echo "$GHZ"
  elif [[ -x $root/../shared/tools/ghz/ghz ]]; then
    echo "$root/../shared/tools/ghz/ghz"
  elif command -v ghz >/dev/null; then
    command -v ghz
  fi
}
