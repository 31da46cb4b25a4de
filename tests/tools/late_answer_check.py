"""Issue 21, item 6: an answer that the server finished OK but that did not reach its client
before the call's deadline is counted late (embedding_late_answers_total), so that the server's
metrics no longer say all is well while its callers time out.

Starts the real server (CPU) and, on a raw HTTP/2 connection (tests/tools/h2_grpc.py) that never
credits the DATA it receives, sends LookUps with a deadline (grpc-timeout) whose answers are
larger than the connection's initial flow-control window: the server finishes each OK and gRPC
can send only the first 65,535 bytes of answers, so every call is cancelled at its deadline with
its answer unsent. The check waits (on the server's metrics, with a deadline) until each is
counted late, and checks that the server counted them answered OK too, that a call finished in
time is not counted, and that a good client (Python grpcio, its own connection) is served.

  late_answer_check.py SERVER
"""

import argparse
import os
import sys
import tempfile
import time

import grpc
import numpy as np

from demo_table import demo_table
from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc
from h2_grpc import RawConnection, Server, lookup_request, metric, wait_for

ROWS, DIM, SEED = 1000, 64, 7
LATE = 3                # calls whose answers cannot be sent
ANSWER_IDS = 512        # 512 x 64 float32: 128 KiB an answer, past the 64 KiB window
DEADLINE = 30           # seconds, for every wait
LOOKUP = {"grpc_method": "LookUp"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    args = parser.parse_args()
    table = demo_table(ROWS, DIM, SEED)
    start = time.monotonic()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.server,
                        [f"--demo_table={ROWS}x{DIM}", f"--demo_seed={SEED}", "--device=cpu"],
                        os.path.join(tmp, "server.log"))
        try:
            m0 = server.metrics()
            # In time: a small answer fits the window and is sent before its deadline.
            c = RawConnection(server.grpc_port)
            small = c.start_lookup(lookup_request([1, 2, 3]), headers=[("grpc-timeout", "20S")])
            c.send()
            wait_for("the small answer arrives", lambda: (
                c.read_available(), c.streams[small].grpc_status() is not None)[1], DEADLINE)
            if c.streams[small].grpc_status() != 0:
                failures.append(f"the small call ended {c.streams[small].grpc_status()}, want OK")
            # Late: answers that cannot pass the window, with a 300 ms deadline.
            message = lookup_request([i % ROWS for i in range(ANSWER_IDS)])
            for _ in range(LATE):
                c.start_lookup(message, headers=[("grpc-timeout", "300m")])
            c.send()

            def counted_late():
                m = server.metrics()  # this client reads nothing more: no window is credited
                return metric(m, "embedding_late_answers_total") == LATE and m

            m1 = wait_for(f"{LATE} late answers counted", counted_late, DEADLINE)
            ok = (metric(m1, "grpc_server_handled_total", grpc_code="OK", **LOOKUP) -
                  metric(m0, "grpc_server_handled_total", grpc_code="OK", **LOOKUP))
            if ok != LATE + 1:
                failures.append(f"the server counted {ok:.0f} LookUps OK, want {LATE + 1} "
                                f"(the late ones were finished OK; they never arrived)")
            print(f"{LATE} answers held back by flow control past their 300 ms deadline: "
                  f"embedding_late_answers_total {LATE}; the server counted {ok:.0f} LookUps OK, "
                  f"one sent in time")
            c.close()

            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                stub = pb_grpc.EmbeddingServiceStub(channel)
                ids = np.random.default_rng(2).integers(0, ROWS, size=16)
                got = stub.LookUp(pb.LookUpRequest(ids=ids.tolist()), timeout=DEADLINE)
                rows = np.frombuffer(got.embeddings, dtype="<f4").reshape(len(ids), DIM)
                if not np.array_equal(rows, table[ids]):
                    failures.append("the good client got wrong rows")
            if metric(server.metrics(), "embedding_late_answers_total") != LATE:
                failures.append("an answer sent in time was counted late")
        finally:
            server.stop()
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"late_answer_check: passed in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
