#!/usr/bin/env bash
# The Python client (client/python) and embedding-client against the real server over TLS and
# mutual TLS, with certificates made by the openssl command (tests/testing/make_test_certs.sh):
# rows equal the table file's, and a client the server must refuse gets UNAVAILABLE.
#   tls_client_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=$1 CLIENT=$2
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
C=$WORK/certs
mkdir -p "$C"
"$ROOT/tests/testing/make_test_certs.sh" "$C" >/dev/null
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
"$PY" -c "import numpy as np; np.save('$WORK/t.npy', np.random.default_rng(3).standard_normal((300, 8), dtype=np.float32))"
export PYTHONPATH=$WORK/py:$ROOT/client/python

# check_python MODE: the Python client against the server now running; MODE is tls or mtls.
check_python() {
  "$PY" - "$1" "$GRPC_PORT" "$C" "$WORK/t.npy" <<'PY'
import sys
import grpc
import numpy as np
from embedding_client import EmbeddingClient

mode, port, certs, table_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
table = np.load(table_path)
target = f"127.0.0.1:{port}"
ids = np.array([[0, 299, 5], [5, 17, 42]])
good = dict(tls_ca=f"{certs}/ca.pem")
if mode == "mtls":
    good.update(tls_cert=f"{certs}/client.pem", tls_key=f"{certs}/client.key")

def refused(**kwargs):
    try:
        with EmbeddingClient(target, timeout=20, **kwargs) as c:
            c.look_up([1])
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (kwargs, e)
        return
    raise SystemExit(f"{mode}: a call with {kwargs} was served")

with EmbeddingClient(target, timeout=20, **good) as c:
    assert np.array_equal(c.look_up(ids), table[ids]), "rows differ"
    [info] = c.list_tables()
    assert info["rows"] == 300 and info["dim"] == 8, info
# The PEM contents instead of paths, and the name the certificate must carry given explicitly.
pem = {k: open(v, "rb").read() for k, v in good.items()}
with EmbeddingClient(target, timeout=20, tls_server_name="localhost", **pem) as c:
    assert np.array_equal(c.look_up(ids), table[ids]), "rows differ (PEM bytes)"
refused()  # plaintext
refused(tls_ca=f"{certs}/other_ca.pem")  # does not trust the server's CA
refused(tls_server_name="embeddings.example.com", **good)  # not the certificate's name
if mode == "mtls":
    refused(tls_ca=f"{certs}/ca.pem")  # no client certificate
    refused(tls_ca=f"{certs}/ca.pem", tls_cert=f"{certs}/other_client.pem",
            tls_key=f"{certs}/other_client.key")  # a client certificate from another CA
try:
    EmbeddingClient(target, tls_ca=f"{certs}/ca.pem", tls_cert=f"{certs}/client.pem")
    raise SystemExit("tls_cert without tls_key accepted")
except ValueError:
    pass
print(f"python client, {mode}: rows match the table file; refused clients get UNAVAILABLE")
PY
}

# check_cli ARGS...: embedding-client lookup, tables, health and bench with these TLS flags.
check_cli() {
  local target=--target=127.0.0.1:$GRPC_PORT
  "$CLIENT" "$target" "$@" lookup 0 299 >"$WORK/rows" || fail "lookup with $* failed"
  "$PY" - "$WORK/rows" "$WORK/t.npy" <<'PY' || fail "embedding-client rows differ"
import sys
import numpy as np
lines = open(sys.argv[1]).read().splitlines()
assert lines[0] == "shape [2, 8]", lines
table = np.load(sys.argv[2])
for line, i in zip(lines[2:], (0, 299)):
    got = np.array([float(v) for v in line.split(":")[1].split()], dtype=np.float32)
    assert np.allclose(got, table[i], rtol=1e-5), (line, table[i])
PY
  "$CLIENT" "$target" "$@" tables | grep -q "^t " || fail "tables with $* failed"
  [[ $("$CLIENT" "$target" "$@" health) == SERVING ]] || fail "health with $* failed"
  "$CLIENT" "$target" "$@" bench --requests=100 --connections=2 --warmup=0 --json \
    >"$WORK/bench.json" || fail "bench with $* failed"
  grep -q '"OK": *100' "$WORK/bench.json" || { cat "$WORK/bench.json"; fail "bench calls failed"; }
}

start_server "$SERVER" --table=t="$WORK/t.npy" --drain_seconds=0 --tls_cert="$C/server.pem" \
  --tls_key="$C/server.key"
grep -q "gRPC port: TLS" "$SERVER_LOG" || { cat "$SERVER_LOG"; fail "no 'gRPC port: TLS' line"; }
check_python tls
check_cli --tls_ca="$C/ca.pem"
if "$CLIENT" --target=127.0.0.1:$GRPC_PORT tables 2>"$WORK/err"; then
  fail "a plaintext embedding-client was served over TLS"
fi
grep -q UNAVAILABLE "$WORK/err" || { cat "$WORK/err"; fail "plaintext: not UNAVAILABLE"; }
{ kill -KILL "${PIDS[-1]}" && wait "${PIDS[-1]}"; } 2>/dev/null || true

start_server "$SERVER" --table=t="$WORK/t.npy" --drain_seconds=0 --tls_cert="$C/server.pem" \
  --tls_key="$C/server.key" --tls_client_ca="$C/ca.pem"
grep -q "gRPC port: mutual TLS" "$SERVER_LOG" || { cat "$SERVER_LOG"; fail "no mutual TLS line"; }
check_python mtls
check_cli --tls_ca="$C/ca.pem" --tls_cert="$C/client.pem" --tls_key="$C/client.key"
if "$CLIENT" --target=127.0.0.1:$GRPC_PORT --tls_ca="$C/ca.pem" tables 2>"$WORK/err"; then
  fail "an embedding-client without a certificate was served over mutual TLS"
fi
grep -q UNAVAILABLE "$WORK/err" || { cat "$WORK/err"; fail "no certificate: not UNAVAILABLE"; }
echo "tls: Python client and embedding-client served over TLS and mutual TLS; refused ones UNAVAILABLE"
