"""A small Python client for embedding.v1.EmbeddingService, and for EmbeddingAdminService (row
updates, saved versions and loading (pinning) them, on the server's admin listener).

Needs grpcio, protobuf and numpy, and the generated stubs for proto/embedding/v1: installed
with this package (`venv/bin/pip install client/python` generates them; client/python/README.md),
or on sys.path (scripts/gen-python-stubs DIR writes them; `python3 -m grpc_tools.protoc` works as
well):

    from embedding_client import EmbeddingClient
    with EmbeddingClient("localhost:50051") as c:
        rows = c.look_up([[1, 2], [3, 4]], dtype="float32")   # numpy array [2, 2, dim]
        bags = c.look_up([1, 2, 3, 4, 5], pooling="sum",
                         offsets=[0, 3, 5])                   # [2, dim]: rows 1+2+3, 4+5
        means = c.look_up([[1, 2], [3, 4]], pooling="mean")   # [2, dim]: bags along the last axis

Over TLS (the server's --tls_cert/--tls_key), and mutual TLS (its --tls_client_ca):

    EmbeddingClient("localhost:50051", tls_ca="ca.pem")                      # TLS
    EmbeddingClient("localhost:50051", tls_ca="ca.pem",
                    tls_cert="client.pem", tls_key="client.key")              # mutual TLS

Row updates go to the server's admin listener (its --admin_address), under mutual TLS with a
client certificate on its allow-list (or in plaintext where it runs with --admin_insecure):

    from embedding_client import EmbeddingAdminClient
    with EmbeddingAdminClient("localhost:50052", tls_ca="ca.pem",
                              tls_cert="publisher.pem", tls_key="publisher.key") as admin:
        ack = admin.update_rows([3, 7], rows, sequence=42)   # rows: numpy [2, dim]
        with admin.open_writer() as w:                        # one stream, many messages
            w.send(ids_a, rows_a, sequence=43)
            w.send(ids_b, rows_b, sequence=44)
            acks = w.finish()                                  # [UpdateAck(...), ...]
        saved = admin.save_table("items")   # SavedVersion(table, version, sequence, path, bytes)
        admin.load_version(3, "items")      # LoadedVersion(table, version, sequence, pinned)
        admin.load_version(0, "items")      # back to the newest, unpinned

A table loaded from a version directory (the server's --table=NAME=DIR, DIR/1/, DIR/2/, ...)
is saved as the next version; a restarted server serves the newest, load_version(N) serves and
pins version N (a rollback) and load_version(0) the newest, unpinned; EmbeddingClient.versions()
reports {table: TableVersion(version, sequence, pinned)}.

Errors are grpc.RpcError with the server's code and message (e.g. OUT_OF_RANGE naming the id).
A failed TLS handshake (an unknown CA, a refused client certificate) is UNAVAILABLE.
"""

import collections
import json
import numbers
import queue
import threading
import time

import grpc
import numpy as np

from embedding.v1 import embedding_admin_pb2 as admin_pb
from embedding.v1 import embedding_admin_pb2_grpc as admin_pb_grpc
from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

_DTYPES = {
    "float32": (pb.DATA_TYPE_FLOAT32, np.dtype("<f4")),
    "float16": (pb.DATA_TYPE_FLOAT16, np.dtype("<f2")),
    # numpy has no bfloat16: the rows come back widened to float32 (exact).
    "bfloat16": (pb.DATA_TYPE_BFLOAT16, np.dtype("<u2")),
}
_BY_ENUM = {v[0]: k for k, v in _DTYPES.items()}
# Types a table may be stored in besides those (list_tables); lookups answer value types.
_TABLE_DTYPES = {**_BY_ENUM, pb.DATA_TYPE_INT8_ROWWISE: "int8_rowwise",
                 pb.DATA_TYPE_INT4_ROWWISE: "int4_rowwise"}
_POOLINGS = {"sum": pb.POOLING_SUM, "mean": pb.POOLING_MEAN}
# TableInfo.placement, as list_tables names it ("": one device).
_PLACEMENTS = {pb.PLACEMENT_REPLICAS: "replicas", pb.PLACEMENT_ROWS: "rows"}


def _pem(value):
    """PEM bytes from a path or from bytes; None stays None."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


def _channel(target, tls, tls_ca, tls_cert, tls_key, tls_server_name, extra_options=()):
    """A channel to `target` without message size limits, and with `extra_options`: TLS if
    `tls` (None: if any tls_* argument is given), else plaintext."""
    options = [("grpc.max_receive_message_length", -1),
               ("grpc.max_send_message_length", -1)] + list(extra_options)
    if tls is None:
        tls = any(a is not None for a in (tls_ca, tls_cert, tls_key, tls_server_name))
    if not tls:
        return grpc.insecure_channel(target, options=options)
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key go together: mutual TLS needs both")
    if tls_server_name is not None:
        options.append(("grpc.ssl_target_name_override", tls_server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_pem(tls_ca), private_key=_pem(tls_key),
        certificate_chain=_pem(tls_cert))
    return grpc.secure_channel(target, credentials, options=options)


def _dtype_name(dtype):
    """"float32", "float16", "bfloat16" or None for `dtype` (a name, or numpy's float32 and
    float16 types); ValueError for anything else."""
    if dtype is not None and not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            pass
    if dtype is not None and dtype not in _DTYPES:
        raise ValueError("dtype must be one of %s or None, not %r"
                         % (", ".join(repr(d) for d in _DTYPES), dtype))
    return dtype


def _vector(name, values, integer):
    """`values` as a list for a repeated field: a 1-D sequence of integers (`integer`) or of
    numbers; ValueError naming `name` otherwise."""
    array = np.asarray(values)
    if array.size == 0:
        return []
    kind = np.integer if integer else np.number
    if array.ndim != 1 or not np.issubdtype(array.dtype, kind):
        raise ValueError("%s must be a 1-D array of %s, not %s of shape %s"
                         % (name, "integers" if integer else "numbers", array.dtype,
                            array.shape))
    return array.astype(np.int64 if integer else np.float32).tolist()


def _answer_rows(response):
    """A LookUpResponse's elements as a new, writable 1-D numpy array (bfloat16 widened to
    float32, exactly)."""
    name = _BY_ENUM.get(response.dtype)
    if name is None:  # quantized types are tables' only
        raise RuntimeError("the server answered with dtype %s"
                           % _TABLE_DTYPES.get(response.dtype, response.dtype))
    # frombuffer views the message's immutable bytes (a read-only array): every dtype is
    # copied out once, so each answer owns its memory and is writable.
    rows = np.frombuffer(response.embeddings, dtype=_DTYPES[name][1])
    if name == "bfloat16":
        return (rows.astype(np.uint32) << 16).view(np.float32)
    return rows.astype(rows.dtype.newbyteorder("="), copy=True)


class EmbeddingClient:
    """Thread-safe; one channel, reused for every call."""

    def __init__(self, target, timeout=5.0, tls=None, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None):
        """tls: speak TLS; None means "if any tls_* argument is given". tls_ca: the CA the
        server's certificate must be signed by (None: gRPC's default roots). tls_cert, tls_key:
        the client's certificate and key, for mutual TLS (both or neither). Each is a PEM file's
        path or its bytes. tls_server_name: the name the server's certificate must carry, instead
        of the target's host.
        """
        self._channel = _channel(target, tls, tls_ca, tls_cert, tls_key, tls_server_name)
        self._stub = pb_grpc.EmbeddingServiceStub(self._channel)
        self._timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._channel.close()

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


class ShardError(grpc.RpcError):
    """A shard's failure in ShardedClient.look_up: the shard's own code, and details that name
    the shard ("shard K of N (TARGET): ...")."""

    def __init__(self, code, details):
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self):
        return self._code

    def details(self):
        return self._details


class IdRangeError(grpc.RpcError, IndexError):
    """An id ShardedClient.look_up refuses before calling any shard, with the code a server gives
    it (as EmbeddingClient.look_up raises it, a grpc.RpcError): code() INVALID_ARGUMENT for a
    negative id, OUT_OF_RANGE for one past the whole table; details() names it. Also an
    IndexError, as ShardedClient raised before."""

    def __init__(self, code, details):
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self):
        return self._code

    def details(self):
        return self._details


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


UpdateAck = collections.namedtuple("UpdateAck", "table sequence rows")
UpdateAck.__doc__ = """The server's answer to one applied update: the table written (by name,
also when the update named none), the update's sequence (now the table's last applied one) and
the rows written (distinct ids). Its rows are seen by every lookup that starts after it."""


TableVersion = collections.namedtuple("TableVersion", "version sequence pinned")
TableVersion.__doc__ = """One table's entry in EmbeddingClient.versions(): the version served (0:
not from a version directory), the last update sequence applied to it, and whether the version is
pinned (EmbeddingAdminClient.load_version of a given version)."""


SavedVersion = collections.namedtuple("SavedVersion", "table version sequence path bytes")
SavedVersion.__doc__ = """The version EmbeddingAdminClient.save_table wrote: the table (by name,
also when the call named none), the new version's number (its directory is DIR/<version>), the
last update sequence applied to the rows saved, the file written (as the server sees it) and its
size in bytes. A server restarted on the same directory serves it with that sequence."""


LoadedVersion = collections.namedtuple("LoadedVersion", "table version sequence pinned")
LoadedVersion.__doc__ = """The version EmbeddingAdminClient.load_version made the server serve:
the table (by name, also when the call named none), the version served from now on (the newest,
for a call with version 0), its last update sequence (from its metadata; 0 if none) and whether
it is pinned (the server's polling for newer versions leaves the table on it)."""


def _float_to_bfloat16_bits(values):
    """float32 values as bfloat16 bits (uint16), rounded to nearest even as the server rounds;
    NaN stays a (quiet) NaN."""
    bits = np.ascontiguousarray(values, dtype="<f4").view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def update_request(ids, rows, sequence, table="", dtype=None):
    """An UpdateRowsRequest for `ids` (1-D integers) and `rows` (a 2-D array, one row per id).

    dtype: the type the rows are sent in: "float32", "float16", "bfloat16" (numpy's float32 and
    float16 types are taken for their names) or None: the array's own, which must then be
    float32, float16 or ml_dtypes' bfloat16. Rows of another float type are converted
    (float16 and bfloat16 rounded to nearest even); for "bfloat16", a uint16 array is taken as
    the bits. Anything else is a ValueError, as are ids that are not 1-D integers and rows
    that are not 2-D with len(ids) rows.
    """
    ids = np.asarray(ids)
    if ids.size == 0:
        ids = ids.astype(np.int64)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError("ids must be a 1-D array of integers, not %s of shape %s"
                         % (ids.dtype, ids.shape))
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[0] != ids.shape[0]:
        raise ValueError("rows must be 2-D with one row per id (%d ids), not of shape %s"
                         % (ids.shape[0], rows.shape))
    own = rows.dtype.name
    if dtype is None:
        if own not in _DTYPES:
            raise ValueError("rows are %s: pass float32, float16 or bfloat16 rows, or give "
                             "dtype= to convert them" % own)
        dtype = own
    dtype = _dtype_name(dtype)
    if dtype == "bfloat16":
        if own in ("uint16", "bfloat16"):
            data = np.ascontiguousarray(rows).view(np.uint16).astype("<u2", copy=False)
        elif np.issubdtype(rows.dtype, np.floating):
            data = _float_to_bfloat16_bits(rows.astype(np.float32)).astype("<u2", copy=False)
        else:
            raise ValueError("rows are %s: bfloat16 rows are floats, or their bits as uint16"
                             % own)
    else:
        if not np.issubdtype(rows.dtype, np.floating) and own != "bfloat16":
            raise ValueError("rows are %s, not floats" % own)
        if own == "bfloat16":
            rows = rows.astype(np.float32)
        data = np.ascontiguousarray(rows, dtype=_DTYPES[dtype][1])
    return admin_pb.UpdateRowsRequest(table=table, ids=ids.astype(np.int64).tolist(),
                                      rows=data.tobytes(), dtype=_DTYPES[dtype][0],
                                      sequence=int(sequence))


def _ack(response):
    return UpdateAck(response.table, response.sequence, response.rows)


class RowWriter:
    """One UpdateRows stream (EmbeddingAdminClient.open_writer). Messages are applied in the
    order sent, each answered by one ack, in order; the first the server refuses ends the stream
    with its status (as grpc.RpcError), the ones before it staying applied. Not thread-safe.

    send() does not wait for the ack; it waits only while `max_unacked` messages are
    unacknowledged on the wire (it then reads the oldest ack, kept for next_ack()).
    As a context manager: finish() on a clean exit, cancel() on an exception.
    """

    _END = object()

    def __init__(self, stub, timeout, max_unacked):
        if max_unacked < 1:
            raise ValueError("max_unacked must be at least 1, not %r" % (max_unacked,))
        self._max_unacked = max_unacked
        self._requests = queue.Queue()
        self._in_flight = collections.deque()  # sequences sent, not yet acked on the wire
        self._acks = collections.deque()       # read, not yet returned by next_ack
        self._finished = False
        self._call = stub.UpdateRows(iter(self._requests.get, self._END), timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.finish()
        else:
            self.cancel()

    def __del__(self):
        # A writer dropped without finish() or cancel(): end its stream rather than leave it
        # open until its deadline, with gRPC's thread waiting on the queue.
        try:
            if not self._finished:
                self.cancel()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def _raise_if_ended(self):
        if self._call.done() and self._call.code() != grpc.StatusCode.OK:
            self._requests.put(self._END)  # lets gRPC's thread that reads the queue end
            raise self._call  # the stream's grpc.RpcError

    def _read(self):
        """Reads one ack into self._acks; raises the stream's RpcError if it ended."""
        try:
            response = next(self._call)
        except StopIteration:
            raise RuntimeError("the server ended the stream with %d messages unacknowledged"
                               % len(self._in_flight)) from None
        if not self._in_flight or response.sequence != self._in_flight[0]:
            self._call.cancel()
            raise RuntimeError("the server acknowledged sequence %d; expected %s"
                               % (response.sequence,
                                  self._in_flight[0] if self._in_flight else "none"))
        self._in_flight.popleft()
        self._acks.append(_ack(response))

    def send(self, ids, rows, sequence, table="", dtype=None):
        """Queues one update (update_request's arguments). Raises the stream's grpc.RpcError if
        it has ended (an earlier message was refused, the deadline passed), ValueError for bad
        arguments (nothing sent), RuntimeError after finish()."""
        self._send(update_request(ids, rows, sequence, table, dtype))

    def _send(self, request):
        if self._finished:
            raise RuntimeError("send after finish")
        self._raise_if_ended()
        while len(self._in_flight) >= self._max_unacked:
            self._read()
        self._in_flight.append(request.sequence)
        self._requests.put(request)

    def next_ack(self):
        """The UpdateAck of the oldest message whose ack was not returned yet, waiting for it.
        Raises the stream's grpc.RpcError if it ended before that message was applied, and
        RuntimeError if every message sent has been acknowledged."""
        if not self._acks:
            if not self._in_flight:
                raise RuntimeError("every message sent has been acknowledged")
            self._read()
        return self._acks.popleft()

    def write(self, ids, rows, sequence, table="", dtype=None):
        """send(), then its ack; only with no ack outstanding (RuntimeError otherwise)."""
        return self._write(update_request(ids, rows, sequence, table, dtype))

    def _write(self, request):
        if self._acks or self._in_flight:
            raise RuntimeError("write with %d acks outstanding; read them with next_ack first"
                               % (len(self._acks) + len(self._in_flight)))
        self._send(request)
        return self.next_ack()

    def finish(self):
        """Ends the stream and waits for the acks of every message sent; returns those that
        next_ack() has not returned, in order. Raises the stream's grpc.RpcError if it ended
        with an error (the acks that came before it are still returned by next_ack())."""
        if not self._finished:
            self._finished = True
            self._requests.put(self._END)
        while self._in_flight:
            self._read()
        try:
            response = next(self._call)  # the end of the stream, or its RpcError
        except StopIteration:
            pass
        else:
            raise RuntimeError("the server acknowledged sequence %d with no message in flight"
                               % response.sequence)
        acks, self._acks = list(self._acks), collections.deque()
        return acks

    def cancel(self):
        """Cancels the stream: messages not yet acknowledged may or may not be applied."""
        self._finished = True
        self._requests.put(self._END)
        self._call.cancel()


class EmbeddingAdminClient:
    """A client of embedding.v1.EmbeddingAdminService, on the server's admin listener (its
    --admin_address). TLS arguments as EmbeddingClient's: the admin listener wants mutual TLS
    with a client certificate on its allow-list, unless the server runs it in plaintext on a
    loopback address (--admin_insecure). Thread-safe; a RowWriter is not."""

    def __init__(self, target, timeout=30.0, tls=None, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None):
        """timeout: the default deadline of each call (for a stream: of the whole stream)."""
        self._channel = _channel(target, tls, tls_ca, tls_cert, tls_key, tls_server_name)
        self._stub = admin_pb_grpc.EmbeddingAdminServiceStub(self._channel)
        self._timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._channel.close()

    def update_rows(self, ids, rows, sequence, table="", dtype=None, timeout=None):
        """Overwrites rows `ids` of `table` ("" the server's default) with `rows` (a 2-D numpy
        array, one row per id; see update_request for dtype) as update `sequence`, which must be
        greater than the table's last applied one (list_tables()' sequence). Returns its
        UpdateAck once the rows are visible to lookups. Errors are grpc.RpcError: NOT_FOUND
        (table), INVALID_ARGUMENT, OUT_OF_RANGE (an id), FAILED_PRECONDITION (the sequence),
        PERMISSION_DENIED (a client not on the allow-list), ...; ValueError for bad arguments."""
        request = update_request(ids, rows, sequence, table, dtype)
        with self.open_writer(timeout=timeout) as writer:
            return writer._write(request)

    def save_table(self, table="", timeout=None):
        """Has the server write `table` ("" the server's default) as it is now, its updates
        included, as the next version of the table's version directory; returns its
        SavedVersion once the version is complete on disk. Updates of the table wait while it is
        written; lookups go on. Errors are grpc.RpcError: NOT_FOUND (table),
        FAILED_PRECONDITION (the table was not loaded from a version directory, or it holds
        version 2^63-1), ABORTED (a save of the table is already queued or running),
        RESOURCE_EXHAUSTED (64 saves and loads wait already), INTERNAL (the write failed; no
        version was left), PERMISSION_DENIED, DEADLINE_EXCEEDED (the save may still complete),
        ..."""
        response = self._stub.SaveTable(admin_pb.SaveTableRequest(table=table),
                                        timeout=timeout or self._timeout)
        return SavedVersion(response.table, response.version, response.sequence, response.path,
                            response.bytes)

    def load_version(self, version=0, table="", timeout=None):
        """Has the server serve `version` of `table` ("" the server's default) from the table's
        version directory: loaded beside the served one, then swapped in between batches; returns
        its LoadedVersion once it is served. version=0: the newest there, unpinned; any other is
        served and pinned (a rollback): polling for newer versions leaves the table on it until
        a load_version(0). Errors are grpc.RpcError: NOT_FOUND (table), FAILED_PRECONDITION (no
        version directory, a missing or broken version, another shape or type, no room for both
        copies: the served version stays), ABORTED (a save or load of the table is running),
        RESOURCE_EXHAUSTED (64 saves and loads wait already), PERMISSION_DENIED,
        DEADLINE_EXCEEDED (the load may still complete), ...; ValueError,
        before sending, for a version that is not an integer >= 0."""
        if isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 0:
            raise ValueError("version must be 0 (the newest) or a version number, got %r"
                             % (version,))
        response = self._stub.LoadVersion(
            admin_pb.LoadVersionRequest(table=table, version=int(version)),
            timeout=timeout or self._timeout)
        return LoadedVersion(response.table, response.version, response.sequence,
                             response.pinned)

    def open_writer(self, timeout=None, max_unacked=256):
        """A RowWriter on a new UpdateRows stream, whose deadline is `timeout` from now."""
        return RowWriter(self._stub, timeout or self._timeout, max_unacked)

    def update_stream(self, messages, timeout=None):
        """Sends `messages` on one stream, as the iterable yields them, and yields each one's
        UpdateAck as it arrives, in order. Each message is a dict of update_request's arguments
        (ids, rows, sequence, and optionally table and dtype) or an UpdateRowsRequest. A refused
        message ends the stream: the generator raises its grpc.RpcError after the acks of the
        messages before it."""
        sent = collections.deque()
        error = []

        def requests():
            # An exception here would reach gRPC's thread, not the caller: keep it, end the
            # stream (the messages before it are applied and acknowledged) and raise it below.
            try:
                for m in messages:
                    request = (m if isinstance(m, admin_pb.UpdateRowsRequest)
                               else update_request(**m))
                    sent.append(request.sequence)
                    yield request
            except Exception as e:  # noqa: BLE001 (re-raised in the caller's thread)
                error.append(e)

        call = self._stub.UpdateRows(requests(), timeout=timeout or self._timeout)
        try:
            for response in call:
                expected = sent.popleft() if sent else None
                if response.sequence != expected:
                    raise RuntimeError("the server acknowledged sequence %d; expected %s"
                                       % (response.sequence, expected))
                yield _ack(response)
        finally:
            call.cancel()  # a no-op once the stream has ended
        if error:
            raise error[0]
