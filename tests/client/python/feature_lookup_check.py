"""The Python client's look_up_features against the real server (feature_lookup_check.sh): every
feature of a batch in one call, from a dict of specs and from a KeyedJaggedTensor's parts
(features_from_kjt), compared element by element with a NumPy float64 reference in every answer
type; the server's refusals as grpc.RpcError naming the feature; bad specs as ValueError.
    feature_lookup_check.py PORT USERS.npy ITEMS.npy"""

import sys

import grpc
import numpy as np

import embedding_client as ec

port, users_path, items_path = sys.argv[1], sys.argv[2], sys.argv[3]
tables = {"users": np.load(users_path).astype(np.float64),
          "items": np.load(items_path).astype(np.float64)}
UNIT = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
rng = np.random.default_rng(5)


def pooled_reference(table, ids, lengths, weights, mean):
    rows = tables[table][ids] * (weights[:, None] if weights is not None else 1.0)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    sums = np.array([rows[offsets[b]:offsets[b + 1]].sum(axis=0) for b in range(len(lengths))])
    mags = np.array([np.abs(rows[offsets[b]:offsets[b + 1]]).sum(axis=0)
                     for b in range(len(lengths))])
    if mean:
        count = np.maximum(lengths, 1)[:, None]
        sums, mags = sums / count, mags / count
    return sums, mags


def check(got, want, mag, dtype, what):
    tol = 64 * 2.0**-24 * mag + UNIT[dtype] * np.abs(want) + 1e-30
    bad = np.abs(got - want) > tol
    assert not bad.any(), (what, np.argwhere(bad)[:3], got[bad][:3], want[bad][:3])


with ec.EmbeddingClient("127.0.0.1:" + port, timeout=30) as c:
    for dtype in ("float32", "float16", "bfloat16"):
        for batch in (1, 5, 32):
            lengths_u = rng.integers(0, 5, batch)
            lengths_i = rng.integers(0, 9, batch)
            ids_u = rng.integers(0, 500, int(lengths_u.sum()))
            ids_i = rng.integers(0, 300, int(lengths_i.sum()))
            weights_i = rng.uniform(-2, 2, ids_i.size).astype(np.float32)
            one_each = rng.integers(0, 300, batch)
            answer = c.look_up_features({
                "u_mean": dict(table="users", ids=ids_u, lengths=lengths_u, pooling="mean"),
                "i_sum": dict(table="items", ids=ids_i,
                              offsets=np.concatenate([[0], np.cumsum(lengths_i)]),
                              weights=weights_i, pooling="sum"),
                "i_rows": dict(table="items", ids=one_each),
            }, batch_size=batch, dtype=dtype)
            dims = (tables["users"].shape[1], tables["items"].shape[1])
            assert answer.keys == ["u_mean", "i_sum"], answer.keys
            assert answer.offset_per_key == [0, dims[0], dims[0] + dims[1]], answer.offset_per_key
            assert answer.pooled.shape == (batch, dims[0] + dims[1]), answer.pooled.shape
            want, mag = pooled_reference("users", ids_u, lengths_u, None, True)
            check(answer.pooled[:, :dims[0]], want, mag, dtype, ("u_mean", dtype, batch))
            want, mag = pooled_reference("items", ids_i, lengths_i,
                                         weights_i.astype(np.float64), False)
            check(answer.pooled[:, dims[0]:], want, mag, dtype, ("i_sum", dtype, batch))
            want = tables["items"][one_each]
            check(answer.unpooled["i_rows"], want, np.abs(want), dtype, ("i_rows", dtype, batch))

    # A KeyedJaggedTensor's parts: keys, values feature after feature, lengths per sample.
    lengths = np.array([[2, 0, 1], [1, 1, 3]])
    values = np.array([4, 5, 6, 10, 11, 12, 13, 14])
    features, batch = ec.features_from_kjt(["users", "items"], values, lengths)
    assert batch == 3, batch
    answer = c.look_up_features(features, batch_size=batch)
    want, mag = pooled_reference("users", values[:3], lengths[0], None, False)
    check(answer.pooled[:, :tables["users"].shape[1]], want, mag, "float32", "kjt users")
    want, mag = pooled_reference("items", values[3:], lengths[1], None, False)
    check(answer.pooled[:, tables["users"].shape[1]:], want, mag, "float32", "kjt items")

    # The server's refusals name the feature and its table.
    for spec, code, words in [
            (dict(table="nope", ids=[1]), grpc.StatusCode.NOT_FOUND, "table 'nope'"),
            (dict(table="items", ids=[300]), grpc.StatusCode.OUT_OF_RANGE, "ids[0] = 300"),
            (dict(table="items", ids=[1, 2], lengths=[1, 0]), grpc.StatusCode.INVALID_ARGUMENT,
             "lengths sum to 1 but ids has 2")]:
        try:
            c.look_up_features({"bad": spec}, batch_size=len(spec.get("lengths", spec["ids"])))
            raise AssertionError("accepted %r" % (spec,))
        except grpc.RpcError as e:
            assert e.code() == code, (spec, e.code())
            assert "feature 0 'bad'" in e.details() and words in e.details(), e.details()
    for spec in (dict(table="items", ids=[1], pooling="max"),
                 dict(table="items", ids=[1], colour="red")):
        try:
            c.look_up_features({"bad": spec})
            raise AssertionError("accepted %r" % (spec,))
        except ValueError:
            pass
print("python look_up_features: 9 mixed calls and a KeyedJaggedTensor match NumPy; refusals named")
