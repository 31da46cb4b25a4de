"""What the clients share: the dtype and enum names, the channel (TLS) and the answer's rows,
and the named tuples the calls return."""

import collections

import grpc
import numpy as np

from embedding.v1 import embedding_service_pb2 as pb


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


class _OneChannelClient:
    """A client over one channel to one server: its stub and default deadline, and closing the
    channel (close(), or leaving a `with` block)."""

    def __init__(self, stub, target, timeout, tls, tls_ca, tls_cert, tls_key, tls_server_name):
        self._channel = _channel(target, tls, tls_ca, tls_cert, tls_key, tls_server_name)
        self._stub = stub(self._channel)
        self._timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._channel.close()


class _StatusError(grpc.RpcError):
    """A grpc.RpcError the client raises itself: code() and details() as a failed call's."""

    def __init__(self, code, details):
        super().__init__(details)
        self._code = code
        self._details = details

    def code(self):
        return self._code

    def details(self):
        return self._details


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
