"""Issue 41, item 5: the server keeps listening after it runs out of file descriptors.

Starts the real server (CPU) with an open-file limit of --limit (hard and soft), then:
  1. opens --connections plain TCP connections to the gRPC port, more than the limit allows: the
     server accepts until it is out of descriptors, then sheds what comes (its log says so);
  2. while they are held, a new gRPC call fails (the server has no descriptor for it);
  3. once they are closed, a new connection's LookUp is answered with the right rows, and
     embedding_connections_shed_total counts the shed connections.
gRPC 1.51's listener alone stops accepting for good at step 1 (docs/reliability.md).
Every wait is on a condition with a deadline.

  fd_exhaustion_check.py SERVER [--limit=256] [--connections=400]
"""

import argparse
import os
import resource
import socket
import sys
import tempfile
import time

import grpc
import numpy as np

from demo_table import demo_table
from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc
from h2_grpc import Server, metric, wait_for

ROWS, DIM, SEED = 1000, 16, 3
DEADLINE = 60


def lookup(port, ids, timeout):
    """The rows of `ids` from a LookUp on a new connection, or the grpc.RpcError."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        got = pb_grpc.EmbeddingServiceStub(channel).LookUp(pb.LookUpRequest(ids=ids.tolist()),
                                                           timeout=timeout)
    return np.frombuffer(got.embeddings, dtype="<f4").reshape(len(ids), DIM)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--limit", type=int, default=256)
    parser.add_argument("--connections", type=int, default=400)
    args = parser.parse_args()
    start = time.monotonic()
    table = demo_table(ROWS, DIM, SEED)
    ids = np.random.default_rng(2).integers(0, ROWS, size=32)
    failures, report = [], []

    def limit_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.limit, args.limit))

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.server,
                        [f"--demo_table={ROWS}x{DIM}", f"--demo_seed={SEED}", "--device=cpu"],
                        os.path.join(tmp, "server.log"), preexec_fn=limit_files)
        try:
            # 1. More connections than descriptors.
            held = [socket.create_connection(("127.0.0.1", server.grpc_port))
                    for _ in range(args.connections)]
            # Ours, or gRPC's own line where no guard sheds (the check then fails below).
            wait_for("the server says it is out of file descriptors",
                     lambda: any(s in server.text() for s in
                                 ("out of file descriptors", "Too many open files")), DEADLINE)
            report.append(f"1. {args.connections} connections at an open-file limit of "
                          f"{args.limit}: the server ran out and shed what came")
            # 2. Held: a new call is not served.
            try:
                lookup(server.grpc_port, ids, 2)
                report.append("2. while held: a new call was served (descriptors to spare)")
            except grpc.RpcError as e:
                report.append(f"2. while held: a new call fails ({e.code().name})")
            # 3. Closed: served again.
            for s in held:
                s.close()
            began = time.monotonic()

            def served():
                try:
                    return [lookup(server.grpc_port, ids, 2)]
                except grpc.RpcError:
                    return None

            try:
                [rows] = wait_for("a new connection is served once the flood is gone", served,
                                  DEADLINE, interval=0.2)
                report.append(f"3. once closed: a new connection served after "
                              f"{time.monotonic() - began:.1f} s")
                if not np.array_equal(rows, table[ids]):
                    failures.append("the call after the flood got wrong rows")
            except TimeoutError as e:
                failures.append(str(e))
            if server.proc.poll() is not None:
                failures.append(f"the server exited ({server.proc.returncode})")
            else:
                shed = metric(server.metrics(), "embedding_connections_shed_total")
                report.append(f"   embedding_connections_shed_total {shed:.0f}")
                if shed <= 0:
                    failures.append("embedding_connections_shed_total did not count the shed "
                                    "connections")
        finally:
            server.stop()
            if failures:
                report.append("server log (the last 40 lines):\n" +
                              "\n".join(server.text().splitlines()[-40:]))
    print("\n".join(report))
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"fd_exhaustion_check: passed in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
