"""EmbeddingClient: lookups (plain and pooled) and the server's tables and versions."""

import numpy as np

from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

from . import features as _features
from ._common import (
    _DTYPES,
    _TABLE_DTYPES,
    _POOLINGS,
    _PLACEMENTS,
    _OneChannelClient,
    _dtype_name,
    _vector,
    _answer_rows,
    TableVersion,
)


class EmbeddingClient(_OneChannelClient):
    """Thread-safe; one channel, reused for every call."""

    def __init__(self, target, timeout=5.0, tls=None, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None):
        """tls: speak TLS; None means "if any tls_* argument is given". tls_ca: the CA the
        server's certificate must be signed by (None: gRPC's default roots). tls_cert, tls_key:
        the client's certificate and key, for mutual TLS (both or neither). Each is a PEM file's
        path or its bytes. tls_server_name: the name the server's certificate must carry, instead
        of the target's host.
        """
        super().__init__(pb_grpc.EmbeddingServiceStub, target, timeout, tls, tls_ca, tls_cert,
                         tls_key, tls_server_name)

    def look_up(self, ids, table="", dtype=None, timeout=None, pooling=None, offsets=None,
                lengths=None, weights=None):
        """Rows of `ids` (an int, or an int array of any shape) as a new, writable numpy array of
        shape ids.shape + (dim,): (dim,) for one id, (n, dim) for a list of n, (b, s, dim) for
        [b, s] ids.

        dtype: "float32", "float16", "bfloat16" (returned as float32, exactly) or None (the
        table's own; float32 for a quantized table); numpy's float32 and float16 types are taken
        for their names. Anything else raises ValueError.

        pooling: "sum" or "mean" answers one row per bag of ids, pooled in float32 on the
        server (an empty bag is zeros): the bags are `offsets` (CSR: bags + 1 integers, the first
        0, the last len(ids), never decreasing) or `lengths` (one integer per bag), with 1-D ids,
        and the answer is (bags, dim); with neither, the last axis of `ids` is the bag and the
        answer is ids.shape[:-1] + (dim,). weights (pooling="sum" only): one number per id, each
        row multiplied by its id's weight. The server checks the bags (INVALID_ARGUMENT naming
        the problem); a pooling other than "sum", "mean" or None, or offsets, lengths or weights
        that are not 1-D arrays of integers (weights: numbers) raise ValueError.
        """
        dtype = _dtype_name(dtype)
        if pooling is not None and pooling not in _POOLINGS:
            raise ValueError("pooling must be 'sum', 'mean' or None, not %r" % (pooling,))
        ids = np.asarray(ids, dtype=np.int64)
        request = pb.LookUpRequest(table=table, ids=ids.ravel().tolist(), shape=list(ids.shape))
        if dtype is not None:
            request.dtype = _DTYPES[dtype][0]
        if pooling is not None:
            request.pooling = _POOLINGS[pooling]
        if offsets is not None:
            request.offsets.extend(_vector("offsets", offsets, integer=True))
        if lengths is not None:
            request.lengths.extend(_vector("lengths", lengths, integer=True))
        if weights is not None:
            request.weights.extend(_vector("weights", weights, integer=False))
        response = self._stub.LookUp(request, timeout=timeout or self._timeout)
        rows = _answer_rows(response)
        dim = response.shape[-1]
        if pooling is not None:
            # The server's shape: [bags, dim], or ids.shape[:-1] + [dim].
            return rows.reshape(tuple(response.shape))
        # The server answers an empty request shape (one id, ids.shape == ()) as [1, dim].
        return rows.reshape(ids.shape + (dim,))

    def look_up_features(self, features, batch_size=None, dtype=None, timeout=None):
        """Every feature of a batch of samples in one call (EmbeddingService.LookUpFeatures), as
        a FeaturesAnswer (features.py): the pooled features side by side, one row per sample
        (TorchRec's KeyedTensor), and the unpooled features' rows.

        features: {name: spec} (or [(name, spec)]), a spec a dict of `table` (default: the
        server's default table), `ids`, and one bag of ids per sample as `lengths` (one per
        sample) or `offsets` (batch_size + 1), or neither for one id a sample; `pooling` "sum"
        or "mean" (None: a row per id), and `weights` (one per id, "sum" only).
        features_from_kjt() makes them from a KeyedJaggedTensor's parts. batch_size: the
        samples (None: from the first feature's lengths or offsets, else its ids). The server
        checks everything (INVALID_ARGUMENT, NOT_FOUND, OUT_OF_RANGE naming the feature and its
        table); a malformed spec here raises ValueError."""
        dtype = _dtype_name(dtype)
        items = list(features.items() if isinstance(features, dict) else features)
        if batch_size is None:
            if not items:
                raise ValueError("no features, and no batch_size")
            first = items[0][1]
            batch_size = (len(first["lengths"]) if first.get("lengths") is not None
                          else len(first["offsets"]) - 1 if first.get("offsets") is not None
                          else len(first.get("ids", [])))
        request = _features.request(items, batch_size, dtype)
        response = self._stub.LookUpFeatures(request, timeout=timeout or self._timeout)
        return _features.answer(response)

    def list_tables(self, timeout=None):
        """[{name, rows, dim, dtype, bytes, device, is_default, sequence, updated_rows, version,
        version_pinned, host_tier, cache_rows, device_bytes, shard_index, shard_count,
        first_row, whole_rows}, ...],
        the default table first. dtype: "float32", "float16", "bfloat16", or "int8_rowwise" or
        "int4_rowwise" for a quantized table; bytes: what its rows take where they live.
        sequence: the last one UpdateRows applied to the table (0: none
        since it was loaded, or the saved version's), which a publisher resumes after;
        updated_rows: rows written by UpdateRows since the table was loaded; version: for a
        table loaded from a version directory (DIR/N/), the version it was loaded from or last
        saved as (save_table) or loaded by load_version, else 0; version_pinned: whether that
        version is pinned (load_version of a given version), which polling leaves alone.
        host_tier: whether the table's rows are in pinned host memory with a GPU cache of
        cache_rows of them (a GPU table larger than the GPU memory it may use); device_bytes: the
        GPU memory the table takes (0 on the CPU). A shard (a server started with --shard=K/N)
        has shard_index K and shard_count N and holds rows first_row .. first_row + rows - 1 of
        whole_rows (ids stay global); a whole table has shard_count 0 and whole_rows == rows.
        A table over several devices of one server (its --device lists them) has placement
        "replicas" or "rows" and parts, one {device, first_row, rows, device_bytes, host_tier}
        a device; a table on one device has placement "" and no parts."""
        response = self._stub.ListTables(pb.ListTablesRequest(), timeout=timeout or self._timeout)
        return [dict(name=t.name, rows=t.rows, dim=t.dim,
                     dtype=_TABLE_DTYPES.get(t.dtype, "unknown"), bytes=t.bytes,
                     device=t.device, is_default=t.is_default, sequence=t.sequence,
                     updated_rows=t.updated_rows, version=t.version,
                     version_pinned=t.version_pinned, host_tier=t.host_tier,
                     cache_rows=t.cache_rows, device_bytes=t.device_bytes,
                     shard_index=t.shard_index, shard_count=t.shard_count,
                     first_row=t.first_row, whole_rows=t.whole_rows or t.rows,
                     placement=_PLACEMENTS.get(t.placement, ""),
                     parts=[dict(device=p.device, first_row=p.first_row, rows=p.rows,
                                 device_bytes=p.device_bytes, host_tier=p.host_tier)
                            for p in t.parts])
                for t in response.tables]

    def versions(self, timeout=None):
        """{name: TableVersion(version, sequence, pinned)} for every table, from list_tables():
        its version (served: loaded, last saved or loaded by load_version; 0: not from a version
        directory), the last update sequence applied to it, and whether the version is pinned."""
        return {t["name"]: TableVersion(t["version"], t["sequence"], t["version_pinned"])
                for t in self.list_tables(timeout)}
