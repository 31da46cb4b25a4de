#!/usr/bin/env bash
# The Python client (client/python) against the real server: rows equal the demo table's,
# recomputed independently in numpy, in every dtype; errors arrive as grpc.RpcError with the code.
# Every answer is a writable array that owns its memory, shaped ids.shape + (dim,) (one id: (dim,));
# a dtype other than float32, float16, bfloat16 is a ValueError naming them (issue 22, item 4).
#   python_client_check.sh SERVER
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$ROOT/scripts/gen-python-stubs" "$WORK/py" >/dev/null
start_server "$1" --demo_table=3000x20 --demo_seed=11 --drain_seconds=0
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
    # Writable, shaped ids.shape + (dim,), whatever the dtype.
    for dtype, want in ((None, np.float32), ("float32", np.float32), ("float16", np.float16),
                        ("bfloat16", np.float32), (np.float16, np.float16)):
        for query in (ids, [3, 4], 5, np.int64(6), [], [[1], [2]]):
            q = np.asarray(query, dtype=np.int64)
            got = c.look_up(query, dtype=dtype)
            assert got.shape == q.shape + (20,), (dtype, query, got.shape)
            assert got.dtype == want, (dtype, got.dtype)
            assert got.flags.writeable, (dtype, query, got.flags)
            assert np.allclose(got, table[q], rtol=2**-8, atol=0), (dtype, query)
            got[...] = 0  # writable: no ValueError
    one = c.look_up(5)
    assert one.shape == (20,) and np.array_equal(one, table[5]), one.shape
    for bad in ("float64", "int8", np.float64, "", "FLOAT32"):
        try:
            c.look_up([1], dtype=bad)
            raise SystemExit("dtype %r accepted" % (bad,))
        except ValueError as e:
            for name in ("float32", "float16", "bfloat16"):
                assert repr(name) in str(e), str(e)
    try:
        c.look_up([1, 3000])
        raise SystemExit("id 3000 accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e
        assert "ids[1] = 3000" in e.details(), e.details()
print("python client: rows match numpy in float32, float16, bfloat16; writable, shaped "
      "ids.shape + (dim,); a bad dtype is ValueError; OUT_OF_RANGE as RpcError")
PY
