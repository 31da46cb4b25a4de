#!/usr/bin/env bash
# The Python client (client/python) against the real server: rows equal the demo table's,
# recomputed independently in numpy, in every dtype; errors arrive as grpc.RpcError with the code.
#   python_client_check.sh SERVER
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
start_server "$1" --demo_table=3000x20 --demo_seed=11
PYTHONPATH="$WORK/py:$ROOT/client/python:$ROOT/tests/tools" "$PY" - "$GRPC_PORT" <<'PY'
import sys
import grpc
import numpy as np
from demo_table import demo_table  # the server's demo values, computed independently
from embedding_client import EmbeddingClient

table = demo_table(3000, 20, 11)
rng = np.random.default_rng(5)
ids = rng.integers(0, 3000, size=(4, 7))
ids[0, 0], ids[0, 1] = 0, 2999
with EmbeddingClient(f"127.0.0.1:{sys.argv[1]}") as c:
    [info] = c.list_tables()
    assert info["name"] == "demo" and info["rows"] == 3000 and info["dim"] == 20, info
    rows = c.look_up(ids)
    assert rows.shape == (4, 7, 20) and rows.dtype == np.float32
    assert np.array_equal(rows, table[ids]), "float32 rows differ"
    half = c.look_up(ids, dtype="float16")
    assert np.array_equal(half, table[ids].astype(np.float16)), "float16 rows differ"
    bf = c.look_up(ids, dtype="bfloat16")
    assert np.allclose(bf, table[ids], rtol=2**-8, atol=0), "bfloat16 rows off"
    try:
        c.look_up([1, 3000])
        raise SystemExit("id 3000 accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e
        assert "ids[1] = 3000" in e.details(), e.details()
print("python client: rows match numpy in float32, float16, bfloat16; OUT_OF_RANGE as RpcError")
PY
