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
        kt = c.look_up_features({                             # every feature of 2 samples
            "user": dict(table="users", ids=[7, 9], pooling="sum"),  # one id a sample
            "clicks": dict(table="items", ids=[1, 2, 3], lengths=[2, 1], pooling="sum")})
        kt.pooled                                             # [2, users' dim + items' dim]

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


from ._common import LoadedVersion, SavedVersion, TableVersion, UpdateAck
from .admin import EmbeddingAdminClient, RowWriter, update_request
from .features import FeaturesAnswer, features_from_kjt
from .lookup import EmbeddingClient
from .sharded import IdRangeError, ShardedClient, ShardError, shard_service_config

__all__ = [
    "EmbeddingAdminClient",
    "EmbeddingClient",
    "FeaturesAnswer",
    "IdRangeError",
    "LoadedVersion",
    "RowWriter",
    "SavedVersion",
    "ShardError",
    "ShardedClient",
    "TableVersion",
    "UpdateAck",
    "features_from_kjt",
    "shard_service_config",
    "update_request",
]
