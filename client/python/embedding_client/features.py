"""The multi-feature lookup (EmbeddingService.LookUpFeatures): every sparse feature of a batch of
samples in one call, each a jagged list of ids per sample in its own table (TorchRec's
KeyedJaggedTensor), answered as one row per sample with the pooled features side by side (its
KeyedTensor) plus each unpooled feature's rows."""

import collections

import numpy as np

from embedding.v1 import embedding_service_pb2 as pb

from ._common import _DTYPES, _BY_ENUM, _POOLINGS, _vector


FeaturesAnswer = collections.namedtuple("FeaturesAnswer", "pooled keys offset_per_key unpooled")
FeaturesAnswer.__doc__ = """The answer to EmbeddingClient.look_up_features: `pooled`, a numpy
array [batch_size, width] holding each pooled feature's vector side by side in request order
(TorchRec's KeyedTensor values); `keys`, the pooled features' names in that order;
`offset_per_key`, their columns (len(keys) + 1 values, from 0 to width: feature keys[k] is
pooled[:, offset_per_key[k]:offset_per_key[k + 1]]); `unpooled`, {name: numpy array [ids, dim]}
for the features asked without pooling. bfloat16 answers come widened to float32 (exact)."""


def features_from_kjt(keys, values, lengths, tables=None, pooling="sum", weights=None):
    """The features of a KeyedJaggedTensor given as its parts (anything numpy.asarray reads:
    lists, numpy arrays, CPU torch tensors), for look_up_features: `keys` the feature names,
    `values` every feature's ids one feature after another, `lengths` len(keys) x batch_size bag
    lengths in the same order (KeyedJaggedTensor.lengths()), `weights` one per value or None.
    `tables` maps a key to its table (None: the key names the table); `pooling` is one mode for
    every feature or {key: mode}. Returns (features, batch_size)."""
    keys = list(keys)
    values = np.asarray(values, dtype=np.int64).ravel()
    lengths = np.asarray(lengths, dtype=np.int64).ravel()
    if not keys or lengths.size % len(keys):
        raise ValueError("lengths holds %d values, not a whole number of samples for %d keys"
                         % (lengths.size, len(keys)))
    if int(lengths.sum()) != values.size:
        raise ValueError("lengths sum to %d but values has %d ids"
                         % (int(lengths.sum()), values.size))
    batch_size = lengths.size // len(keys)
    w = None if weights is None else np.asarray(weights, dtype=np.float32).ravel()
    features, start = {}, 0
    for k, key in enumerate(keys):
        bag_lengths = lengths[k * batch_size:(k + 1) * batch_size]
        end = start + int(bag_lengths.sum())
        features[key] = dict(table=(tables or {}).get(key, key), ids=values[start:end],
                             lengths=bag_lengths,
                             pooling=pooling.get(key) if isinstance(pooling, dict) else pooling,
                             weights=None if w is None else w[start:end])
        start = end
    return features, batch_size


def _feature_message(name, spec):
    pooling = spec.get("pooling")
    if pooling is not None and pooling not in _POOLINGS:
        raise ValueError("feature %r: pooling must be 'sum', 'mean' or None, not %r"
                         % (name, pooling))
    unknown = set(spec) - {"table", "ids", "lengths", "offsets", "weights", "pooling"}
    if unknown:
        raise ValueError("feature %r: unknown fields %s" % (name, sorted(unknown)))
    f = pb.Feature(name=name, table=spec.get("table", ""),
                   ids=_vector("ids", spec.get("ids", []), integer=True))
    for field in ("lengths", "offsets"):
        if spec.get(field) is not None:
            getattr(f, field).extend(_vector(field, spec[field], integer=True))
    if spec.get("weights") is not None:
        f.weights.extend(_vector("weights", spec["weights"], integer=False))
    if pooling is not None:
        f.pooling = _POOLINGS[pooling]
    return f


def request(features, batch_size, dtype):
    """A LookUpFeaturesRequest for `features` ({name: spec} or [(name, spec)])."""
    items = features.items() if isinstance(features, dict) else features
    message = pb.LookUpFeaturesRequest(batch_size=batch_size,
                                       features=[_feature_message(n, s) for n, s in items])
    if dtype is not None:
        message.dtype = _DTYPES[dtype][0]
    return message


def _elements(data, name):
    rows = np.frombuffer(data, dtype=_DTYPES[name][1])
    if name == "bfloat16":
        return (rows.astype(np.uint32) << 16).view(np.float32)
    return rows.astype(rows.dtype.newbyteorder("="), copy=True)


def answer(response):
    """A FeaturesAnswer from a LookUpFeaturesResponse."""
    name = _BY_ENUM.get(response.dtype)
    if name is None:
        raise RuntimeError("the server answered with dtype %s" % response.dtype)
    pooled = _elements(response.pooled, name).reshape(response.batch_size,
                                                      response.pooled_width)
    keys, offsets, unpooled = [], [0], {}
    for f in response.features:
        if f.pooled:
            keys.append(f.name)
            offsets.append(f.pooled_column + f.dim)
        else:
            unpooled[f.name] = _elements(f.embeddings, name).reshape(-1, f.dim)
    return FeaturesAnswer(pooled, keys, offsets, unpooled)
