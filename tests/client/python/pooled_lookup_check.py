"""Pooled lookups and quantized tables through the Python client against the real server
(tests/client/pooled_lookup_check.sh starts it): table t (float32, TABLE.npy), h (float16,
HALF.npy), q8 and q4 (TABLE.npy quantized at load to int8 and int4 row-wise).

- list_tables names each table's dtype (int8_rowwise, int4_rowwise) and its bytes
  (rows x RowBytes: dim x element size; dim + 8 for int8; ceil(dim / 2) + 4 for int4).
- The quantized tables' rows are within half a quantization step of TABLE.npy, element by element.
- On random bags (duplicates, empty bags) of every table, in every answer dtype: sums, weighted
  sums and means equal a NumPy float64 reference, element by element, within the error of a
  float32 accumulation plus one rounding to the answer type (quantized tables: the reference is
  over their own dequantized rows); offsets and lengths answer bit for bit the same; the last
  axis of a 2-D ids array is the bag; an empty bag is zeros.
- Malformed bags, weights with mean, and a quantized answer type are INVALID_ARGUMENT.

    pooled_lookup_check.py PORT TABLE.npy HALF.npy
"""

import sys

import grpc
import numpy as np

from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc
from embedding_client import EmbeddingClient

port, table_path, half_path = sys.argv[1], sys.argv[2], sys.argv[3]
T = np.load(table_path)
H = np.load(half_path)
ROWS, DIM = T.shape
assert T.dtype == np.float32 and H.dtype == np.float16 and H.shape == T.shape
# The unit roundoff of each answer type.
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
checked = 0


def check_close(got, ref, tol, what):
    """Element by element: |got - ref| <= tol, where got is finite."""
    global checked
    got = np.asarray(got, np.float64)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    err = np.abs(got - ref)
    bad = ~(err <= tol)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise SystemExit("%s: element %s is %r, want %r within %g (%d of %d elements off)"
                         % (what, i, got[i], ref[i], np.broadcast_to(tol, ref.shape)[i],
                            bad.sum(), bad.size))
    checked += got.size


def expect_code(code, fn, what, words=()):
    try:
        fn()
    except grpc.RpcError as e:
        assert e.code() == code, (what, e.code(), e.details())
        for w in words:
            assert w in e.details().lower(), (what, w, e.details())
        return e.details()
    raise SystemExit("%s: accepted, want %s" % (what, code))


with EmbeddingClient("127.0.0.1:%s" % port) as c:
    # --- ListTables: dtypes and bytes.
    tables = {t["name"]: t for t in c.list_tables()}
    want = {"t": ("float32", ROWS * DIM * 4), "h": ("float16", ROWS * DIM * 2),
            "q8": ("int8_rowwise", ROWS * (DIM + 8)),
            "q4": ("int4_rowwise", ROWS * ((DIM + 1) // 2 + 4))}
    for name, (dtype, nbytes) in want.items():
        t = tables[name]
        assert (t["rows"], t["dim"]) == (ROWS, DIM), t
        assert t["dtype"] == dtype, (name, t["dtype"], dtype)
        assert t["bytes"] == nbytes, (name, "bytes", t["bytes"], nbytes)

    # --- Quantized rows: within half a step of the original values.
    all_ids = np.arange(ROWS)
    dequantized = {"t": T.astype(np.float64), "h": H.astype(np.float64)}
    for name, levels in (("q8", 255), ("q4", 15)):
        rows = c.look_up(all_ids, table=name)
        assert rows.dtype == np.float32 and rows.shape == (ROWS, DIM), (name, rows.dtype)
        span = (T.max(axis=1) - T.min(axis=1)).astype(np.float64)[:, None]
        # Half a step, with 1% for the rounding of a float16 scale and bias (int4) and float32's
        # rounding of scale * q + bias.
        check_close(rows, T.astype(np.float64), 0.505 * span / levels + 1e-6 * np.abs(T),
                    "%s rows against TABLE.npy" % name)
        dequantized[name] = rows.astype(np.float64)

    # --- Random bags, every table and answer type.
    rng = np.random.default_rng(17)
    bags = 60
    lengths = rng.integers(0, 9, size=bags)
    lengths[[0, 7, bags - 1]] = 0  # empty bags, the first and the last among them
    lengths[1] = 40                # one long bag
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = int(offsets[-1])
    ids = rng.integers(0, ROWS, size=n)
    ids[:5] = [0, ROWS - 1, 3, 3, 3]  # the first and last rows, duplicates
    weights = rng.standard_normal(n).astype(np.float32)
    bag_of = np.repeat(np.arange(bags), lengths)
    for name in ("t", "h", "q8", "q4"):
        rows = dequantized[name][ids]  # [n, DIM], float64
        own = "float16" if name == "h" else "float32"
        for dtype in (None, "float32", "float16", "bfloat16"):
            out = dtype or own
            for pooling, w in (("sum", None), ("sum", weights), ("mean", None)):
                terms = rows if w is None else rows * w.astype(np.float64)[:, None]
                ref = np.zeros((bags, DIM))
                mag = np.zeros((bags, DIM))
                np.add.at(ref, bag_of, terms)
                np.add.at(mag, bag_of, np.abs(terms))
                count = np.maximum(lengths, 1)[:, None]
                if pooling == "mean":
                    ref, mag = ref / count, mag / count
                # A float32 accumulation in id order (one rounding per product and per sum, one
                # more for the mean's division), then one rounding to the answer type.
                tol = (lengths[:, None] + 2) * 2.0**-24 * mag + UNIT[out] * np.abs(ref) + 1e-30
                what = "%s %s%s as %s" % (name, pooling, " weighted" if w is not None else "", out)
                got = c.look_up(ids, table=name, dtype=dtype, pooling=pooling, offsets=offsets,
                                weights=w)
                assert got.shape == (bags, DIM), (what, got.shape)
                assert got.dtype == (np.float16 if out == "float16" else np.float32), what
                check_close(got, ref, tol, what + " (offsets)")
                assert not np.any(got[lengths == 0]), what + ": an empty bag is not zeros"
                by_lengths = c.look_up(ids, table=name, dtype=dtype, pooling=pooling,
                                       lengths=lengths, weights=w)
                assert np.array_equal(by_lengths, got), what + ": lengths differ from offsets"

        # The last axis of 2-D ids is the bag: [10, 6] ids -> [10, DIM].
        grid = rng.integers(0, ROWS, size=(10, 6))
        for pooling in ("sum", "mean"):
            ref = dequantized[name][grid].sum(axis=1)
            mag = np.abs(dequantized[name][grid]).sum(axis=1)
            if pooling == "mean":
                ref, mag = ref / 6, mag / 6
            got = c.look_up(grid, table=name, dtype="float32", pooling=pooling)
            check_close(got, ref, 8 * 2.0**-24 * mag + 2.0**-24 * np.abs(ref),
                        "%s %s over the last axis" % (name, pooling))

    # --- Refusals: INVALID_ARGUMENT.
    bad = [
        (dict(pooling="sum", offsets=[1, 2]), "offsets not starting at 0"),
        (dict(pooling="sum", offsets=[0, 2, 1, 2]), "decreasing offsets"),
        (dict(pooling="sum", offsets=[0, 1]), "offsets not ending at len(ids)"),
        (dict(pooling="sum", offsets=[0, 2], lengths=[2]), "both offsets and lengths"),
        (dict(pooling="sum", lengths=[1, 2]), "lengths not summing to len(ids)"),
        (dict(pooling="sum", lengths=[3, -1]), "a negative length"),
        (dict(pooling="mean", offsets=[0, 2], weights=[1, 2]), "weights with mean"),
        (dict(pooling="sum", offsets=[0, 2], weights=[1]), "one weight for two ids"),
        (dict(offsets=[0, 2]), "offsets without pooling"),
    ]
    for kwargs, what in bad:
        expect_code(grpc.StatusCode.INVALID_ARGUMENT, lambda: c.look_up([1, 2], **kwargs), what)
    expect_code(grpc.StatusCode.OUT_OF_RANGE,
                lambda: c.look_up([1, ROWS], pooling="sum", offsets=[0, 1, 2]), "id = rows")
    stub = pb_grpc.EmbeddingServiceStub(grpc.insecure_channel("127.0.0.1:%s" % port))
    for t in (pb.DATA_TYPE_INT8_ROWWISE, pb.DATA_TYPE_INT4_ROWWISE):
        for table in ("t", "q8"):
            expect_code(grpc.StatusCode.INVALID_ARGUMENT,
                        lambda: stub.LookUp(pb.LookUpRequest(table=table, ids=[1], dtype=t),
                                            timeout=10),
                        "a quantized answer type from %s" % table)

print("python pooled_lookup_check: %d elements checked; tables t h q8 q4 listed with dtype and "
      "bytes; quantized rows within half a step; sum, weighted sum, mean (offsets = lengths, "
      "2-D bags, empty bags) within float32 accumulation of the float64 reference in every "
      "answer type; %d malformed requests refused" % (checked, len(bad) + 5))
