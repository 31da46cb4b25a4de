"""A small Python client for embedding.v1.EmbeddingService.

Needs grpcio, protobuf and numpy, and the generated stubs for proto/embedding/v1: installed
with this package (`pip install --no-build-isolation --no-use-pep517 client/python` generates
them; client/python/README.md), or on sys.path (scripts/gen-python-stubs DIR writes them;
`python3 -m grpc_tools.protoc` works as well):

    from embedding_client import EmbeddingClient
    with EmbeddingClient("localhost:50051") as c:
        rows = c.look_up([[1, 2], [3, 4]], dtype="float32")   # numpy array [2, 2, dim]

Over TLS (the server's --tls_cert/--tls_key), and mutual TLS (its --tls_client_ca):

    EmbeddingClient("localhost:50051", tls_ca="ca.pem")                      # TLS
    EmbeddingClient("localhost:50051", tls_ca="ca.pem",
                    tls_cert="client.pem", tls_key="client.key")              # mutual TLS

Errors are grpc.RpcError with the server's code and message (e.g. OUT_OF_RANGE naming the id).
A failed TLS handshake (an unknown CA, a refused client certificate) is UNAVAILABLE.
"""

import grpc
import numpy as np

from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

_DTYPES = {
    "float32": (pb.DATA_TYPE_FLOAT32, np.dtype("<f4")),
    "float16": (pb.DATA_TYPE_FLOAT16, np.dtype("<f2")),
    # numpy has no bfloat16: the rows come back widened to float32 (exact).
    "bfloat16": (pb.DATA_TYPE_BFLOAT16, np.dtype("<u2")),
}
_BY_ENUM = {v[0]: k for k, v in _DTYPES.items()}


def _pem(value):
    """PEM bytes from a path or from bytes; None stays None."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


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
        options = [("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1)]
        if tls is None:
            tls = any(a is not None for a in (tls_ca, tls_cert, tls_key, tls_server_name))
        if not tls:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            if (tls_cert is None) != (tls_key is None):
                raise ValueError("tls_cert and tls_key go together: mutual TLS needs both")
            if tls_server_name is not None:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(tls_ca), private_key=_pem(tls_key),
                certificate_chain=_pem(tls_cert))
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = pb_grpc.EmbeddingServiceStub(self._channel)
        self._timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._channel.close()

    def look_up(self, ids, table="", dtype=None, timeout=None):
        """Rows of `ids` (an int, or an int array of any shape) as a new, writable numpy array of
        shape ids.shape + (dim,): (dim,) for one id, (n, dim) for a list of n, (b, s, dim) for
        [b, s] ids.

        dtype: "float32", "float16", "bfloat16" (returned as float32, exactly) or None (the
        table's own); numpy's float32 and float16 types are taken for their names. Anything else
        raises ValueError.
        """
        if dtype is not None and not isinstance(dtype, str):
            try:
                dtype = np.dtype(dtype).name
            except TypeError:
                pass
        if dtype is not None and dtype not in _DTYPES:
            raise ValueError("dtype must be one of %s or None, not %r"
                             % (", ".join(repr(d) for d in _DTYPES), dtype))
        ids = np.asarray(ids, dtype=np.int64)
        request = pb.LookUpRequest(table=table, ids=ids.ravel().tolist(), shape=list(ids.shape))
        if dtype is not None:
            request.dtype = _DTYPES[dtype][0]
        response = self._stub.LookUp(request, timeout=timeout or self._timeout)
        name = _BY_ENUM[response.dtype]
        # frombuffer views the message's immutable bytes (a read-only array): every dtype is
        # copied out once, so each answer owns its memory and is writable.
        rows = np.frombuffer(response.embeddings, dtype=_DTYPES[name][1])
        if name == "bfloat16":
            rows = (rows.astype(np.uint32) << 16).view(np.float32)
        else:
            rows = rows.astype(rows.dtype.newbyteorder("="), copy=True)
        # The server answers an empty request shape (one id, ids.shape == ()) as [1, dim].
        dim = response.shape[-1]
        return rows.reshape(ids.shape + (dim,))

    def list_tables(self, timeout=None):
        """[{name, rows, dim, dtype, device, is_default}, ...], the default table first."""
        response = self._stub.ListTables(pb.ListTablesRequest(), timeout=timeout or self._timeout)
        return [dict(name=t.name, rows=t.rows, dim=t.dim, dtype=_BY_ENUM.get(t.dtype, "unknown"),
                     device=t.device, is_default=t.is_default) for t in response.tables]
