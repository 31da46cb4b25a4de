"""ShardedClient: one table split over several servers (shard_service_config, ShardError,
IdRangeError)."""

import json
import threading
import time

import grpc
import numpy as np

from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

from ._common import _DTYPES, _StatusError, _channel, _dtype_name, _answer_rows


def shard_service_config(max_attempts=3):
    """The gRPC service config of each shard's channel (as the C++ ShardServiceConfig): round
    robin over the addresses its target resolves to (a headless Service's replicas), and up to
    max_attempts attempts (2 to 5) of a call that fails UNAVAILABLE."""
    return json.dumps({
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [{
            "name": [{"service": "embedding.v1.EmbeddingService"}],
            "retryPolicy": {"maxAttempts": min(max(max_attempts, 2), 5),
                            "initialBackoff": "0.01s", "maxBackoff": "0.2s",
                            "backoffMultiplier": 2,
                            "retryableStatusCodes": ["UNAVAILABLE"]}}]})


class ShardError(_StatusError):
    """A shard's failure in ShardedClient.look_up: the shard's own code, and details that name
    the shard ("shard K of N (TARGET): ...")."""


class IdRangeError(_StatusError, IndexError):
    """An id ShardedClient.look_up refuses before calling any shard, with the code a server gives
    it (as EmbeddingClient.look_up raises it, a grpc.RpcError): code() INVALID_ARGUMENT for a
    negative id, OUT_OF_RANGE for one past the whole table; details() names it. Also an
    IndexError, as ShardedClient raised before."""


class ShardedClient:
    """Looks up a table whose rows are split over servers (each started with --shard=K/N) as one
    table: each request's ids are split by the shard that holds them, the shards are called in
    parallel under one deadline, and the rows come back in the request's order. A shard that
    fails fails the call (ShardError naming it); there is never a partial answer. Each target is
    one shard's (shard 0 first), e.g. "dns:///emb-shard-0.ns.svc.cluster.local:50051" for a
    headless Service: gRPC balances its replicas round robin and retries UNAVAILABLE on another.
    Thread-safe."""

    def __init__(self, targets, timeout=5.0, max_attempts=3, tls=None, tls_ca=None,
                 tls_cert=None, tls_key=None, tls_server_name=None):
        self._targets = list(targets)
        if not self._targets:
            raise ValueError("a sharded table needs the target of each shard; none given")
        self._channels = [
            _channel(t, tls, tls_ca, tls_cert, tls_key, tls_server_name,
                     extra_options=[("grpc.service_config", shard_service_config(max_attempts)),
                                    ("grpc.enable_retries", 1)])
            for t in self._targets]
        self._stubs = [pb_grpc.EmbeddingServiceStub(c) for c in self._channels]
        self._timeout = timeout
        self._layouts = {}
        self._lock = threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for c in self._channels:
            c.close()

    def _error(self, k, code, details):
        return ShardError(code, "shard %d of %d (%s): %s"
                          % (k, len(self._targets), self._targets[k], details))

    def forget_layouts(self):
        """Forgets the learned splits (after the shards are redeployed with another split or
        another version): the next lookup asks the shards again."""
        with self._lock:
            self._layouts.clear()

    def layout(self, table="", timeout=None):
        """{table, whole_rows, dim, dtype, block_rows, version, first_rows, rows}: the table's
        split, from the shards' ListTables on first use (then kept). ShardError
        (FAILED_PRECONDITION) naming the shard when the shards disagree, serving different
        versions (TableInfo.version) included: rows of two versions are never mixed in one answer.
        A shard that swaps in another version later is seen after forget_layouts()."""
        with self._lock:
            if table in self._layouts:
                return self._layouts[table]
        n = len(self._targets)
        layout = None
        for k, stub in enumerate(self._stubs):
            try:
                response = stub.ListTables(pb.ListTablesRequest(),
                                           timeout=timeout or self._timeout)
            except grpc.RpcError as e:
                raise self._error(k, e.code(), e.details()) from e
            found = [t for t in response.tables if (t.is_default if not table else t.name == table)]
            if not found:
                raise self._error(k, grpc.StatusCode.NOT_FOUND, "no table %r" % table)
            t = found[0]
            index, count = (t.shard_index, t.shard_count) if t.shard_count else (0, 1)
            if (index, count) != (k, n):
                raise self._error(k, grpc.StatusCode.FAILED_PRECONDITION,
                                  "table %r there is shard %d of %d, not shard %d of %d: give "
                                  "the shards' targets in shard order" % (t.name, index, count,
                                                                           k, n))
            whole = t.whole_rows or t.rows
            if layout is None:
                layout = dict(table=t.name, whole_rows=whole, dim=t.dim, dtype=t.dtype,
                              block_rows=-(-whole // n), version=t.version, first_rows=[],
                              rows=[])
            elif (t.name, whole, t.dim, t.dtype) != (layout["table"], layout["whole_rows"],
                                                     layout["dim"], layout["dtype"]):
                raise self._error(k, grpc.StatusCode.FAILED_PRECONDITION,
                                  "the shards serve different tables")
            if t.version != layout["version"]:
                raise self._error(k, grpc.StatusCode.FAILED_PRECONDITION,
                                  "table %r there is version %d, but on shard 0 version %d: the "
                                  "shards serve different versions of the table, whose rows must "
                                  "not be mixed in one answer (load the same version on every "
                                  "shard, then look up again)"
                                  % (t.name, t.version, layout["version"]))
            layout["first_rows"].append(t.first_row)
            layout["rows"].append(t.rows)
        with self._lock:
            self._layouts[table] = layout
        return layout

    def look_up(self, ids, table="", dtype=None, timeout=None):
        """Rows of `ids` (global ids of the whole table; an int or an int array of any shape) as
        EmbeddingClient.look_up answers them: a new numpy array of shape ids.shape + (dim,).
        Pooled lookups are not supported over shards. IdRangeError (a grpc.RpcError) naming the
        first id outside the whole table, no call made: INVALID_ARGUMENT for a negative id,
        OUT_OF_RANGE for one past the table, as a server answers; ShardError for a shard that
        fails."""
        deadline = time.monotonic() + (timeout or self._timeout)
        dtype = _dtype_name(dtype)
        layout = self.layout(table, timeout)
        ids = np.asarray(ids, dtype=np.int64)
        flat = ids.ravel()
        bad = np.flatnonzero((flat < 0) | (flat >= layout["whole_rows"]))
        if bad.size:
            i, id_ = int(bad[0]), int(flat[bad[0]])
            if id_ < 0:
                raise IdRangeError(grpc.StatusCode.INVALID_ARGUMENT,
                                   "ids[%d] = %d is negative" % (i, id_))
            raise IdRangeError(grpc.StatusCode.OUT_OF_RANGE,
                               "ids[%d] = %d is out of range for table %r with %d rows over %d "
                               "shards (valid: 0..%d)" % (i, id_, layout["table"],
                                                          layout["whole_rows"],
                                                          len(self._targets),
                                                          layout["whole_rows"] - 1))
        owner = flat // layout["block_rows"]
        calls = []
        for k, stub in enumerate(self._stubs):
            where = np.flatnonzero(owner == k)
            if where.size == 0:
                continue
            request = pb.LookUpRequest(table=layout["table"], ids=flat[where].tolist())
            if dtype is not None:
                request.dtype = _DTYPES[dtype][0]
            left = max(deadline - time.monotonic(), 0.001)
            calls.append((k, where, stub.LookUp.future(request, timeout=left)))
        out = None
        error = None
        for k, where, call in calls:
            try:
                rows = _answer_rows(call.result()).reshape(where.size, layout["dim"])
            except grpc.RpcError as e:
                error = error or self._error(k, e.code(), e.details())
                continue
            if out is None:
                out = np.empty((flat.size, layout["dim"]), dtype=rows.dtype)
            out[where] = rows
        if error is not None:
            raise error
        if out is None:  # no ids
            out = np.empty((0, layout["dim"]), dtype=np.float32 if dtype in (None, "bfloat16")
                           else _DTYPES[dtype][1].newbyteorder("="))
        return out.reshape(ids.shape + (layout["dim"],))
