#!/usr/bin/env bash
# The Python client as a package (client/python): pip installs it without network into a fresh
# venv on Debian's interpreter (grpcio, protobuf and numpy from Debian through
# --system-site-packages), its build generates the stubs, and the installed package, imported
# from the venv and not from the source tree, gets the demo table's rows from the real server.
#   python_package_check.sh SERVER
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$PY" -m venv --help >/dev/null 2>&1 || fail "python3-venv is not installed"
# A copy with the same layout (client/python next to proto/): pip builds in the tree it is
# given, and the source tree stays as it is.
mkdir -p "$WORK/src/client"
cp -r "$ROOT/client/python" "$WORK/src/client/"
cp -r "$ROOT/proto" "$WORK/src/"
rm -rf "$WORK/src/client/python/build" "$WORK"/src/client/python/*.egg-info
[[ ! -e $WORK/src/client/python/embedding ]] || fail "generated stubs are in the source tree"
"$PY" -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/pip" install --no-index --no-build-isolation "$WORK/src/client/python" \
  >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; fail "pip install client/python failed"; }
start_server "$1" --demo_table=3000x20 --demo_seed=11 --drain_seconds=0
cd "$WORK"  # nothing here shadows the installed modules
"$WORK/venv/bin/python" - "$GRPC_PORT" "$WORK/venv" "$ROOT/tests/tools" <<'PY'
import os
import sys
port, venv, tools = sys.argv[1:]
import embedding_client
from embedding.v1 import embedding_service_pb2, embedding_service_pb2_grpc
for module in (embedding_client, embedding_service_pb2, embedding_service_pb2_grpc):
    assert os.path.realpath(module.__file__).startswith(os.path.realpath(venv)), module.__file__
sys.path.append(tools)
import grpc
import numpy as np
from demo_table import demo_table  # the server's demo values, computed independently

table = demo_table(3000, 20, 11)
ids = np.array([[0, 2999, 17], [5, 5, 1234]])
with embedding_client.EmbeddingClient("127.0.0.1:" + port) as c:
    [info] = c.list_tables()
    assert (info["name"], info["rows"], info["dim"]) == ("demo", 3000, 20), info
    rows = c.look_up(ids)
    assert rows.shape == (2, 3, 20) and np.array_equal(rows, table[ids]), "float32 rows differ"
    half = c.look_up(ids, dtype="float16")
    assert np.array_equal(half, table[ids].astype(np.float16)), "float16 rows differ"
    try:
        c.look_up([3000])
        raise SystemExit("id 3000 accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e
print("python package: installed in a fresh venv, stubs built, rows match the demo table")
PY
