"""Issue 21, item 5: calls that their client resets leave the queue before their gather.

Starts the real server (CPU) with a slow batch (--max_queue_delay_us, so that requests wait in
the queue) and, on raw HTTP/2 connections (tests/tools/h2_grpc.py):
  1. opens --queued LookUps, waits until the server has queued all their ids (its metrics), then
     resets every stream: the calls must be dropped when their batch forms, counted in
     embedding_dropped_requests_total{reason="cancelled"}, and their ids never gathered;
  2. rapid reset: --streams times HEADERS, DATA, RST_STREAM in a tight loop (each stream reset
     --lag streams later). gRPC hands many of these calls to the handler without their message
     (the reset was read first), the others are queued and then reset; every call of the attack
     must end CANCELLED (grpc_server_handled_total), and none be gathered;
  3. a good client (Python grpcio, its own connection) is then served the right rows.
Every wait is on a condition (the server's metrics), with a deadline.
With --measure_only (for a server without the change) it reports instead of checking.

  rapid_reset_check.py SERVER [--queued=200] [--streams=3000] [--lag=4] [--measure_only]
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

ROWS, DIM, SEED = 1000, 64, 5
IDS = list(range(16))
DEADLINE = 30  # seconds, for every wait
LOOKUP = {"grpc_method": "LookUp"}


def lookup_codes(m):
    """{code: count} of the LookUps the server has answered."""
    codes = {}
    for key, value in m.items():
        if key.startswith("grpc_server_handled_total{") and 'grpc_method="LookUp"' in key:
            code = key.split('grpc_code="')[1].split('"')[0]
            codes[code] = codes.get(code, 0) + value
    return codes


def delta(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--queued", type=int, default=200)
    parser.add_argument("--streams", type=int, default=3000)
    # Streams opened between a stream's request and its reset (0: reset at once). With a lag,
    # gRPC reads some calls' message before their reset arrives: those are queued, then reset.
    parser.add_argument("--lag", type=int, default=4)
    parser.add_argument("--measure_only", action="store_true")
    # How long a batch waits for more requests: the queue the reset calls wait in (measure only
    # below 3 s, the time the checks allow the server to see every reset).
    parser.add_argument("--queue_delay_us", type=int, default=3_000_000)
    args = parser.parse_args()
    table = demo_table(ROWS, DIM, SEED)
    start = time.monotonic()
    failures, report = [], []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.server,
                        [f"--demo_table={ROWS}x{DIM}", f"--demo_seed={SEED}", "--device=cpu",
                         f"--max_queue_delay_us={args.queue_delay_us}"],
                        os.path.join(tmp, "server.log"))
        try:
            m0 = server.metrics()
            message = lookup_request(IDS)

            # 1. Queued, then reset.
            c = RawConnection(server.grpc_port)
            sids = [c.start_lookup(message) for _ in range(args.queued)]
            c.send()
            wait_for(f"{args.queued} LookUps queued", lambda: metric(
                server.metrics(), "embedding_queue_ids") == args.queued * len(IDS), DEADLINE)
            for sid in sids:
                c.reset(sid)
            c.send()

            # 2. Rapid reset.
            r = RawConnection(server.grpc_port)
            open_sids = []
            for _ in range(args.streams):
                r.wait_for_window(len(message) + 64, DEADLINE)
                open_sids.append(r.start_lookup(message))
                r.send()
                if len(open_sids) > args.lag:
                    r.reset(open_sids.pop(0))
                    r.send()
            for sid in open_sids:
                r.reset(sid)
            r.send()
            started = args.queued + args.streams
            # Once the server has read every frame (a PING's ACK), wait until every call it
            # started is answered and the queue is empty, twice in a row with nothing new.
            c.round_trip(DEADLINE)
            r.round_trip(DEADLINE)
            last = [None]

            def all_answered():
                m = server.metrics()
                n = metric(m, "grpc_server_started_total", **LOOKUP)
                done = (sum(lookup_codes(m).values()) == n and
                        metric(m, "embedding_queue_ids") == 0 and last[0] == n)
                last[0] = n
                return done and m

            wait_for("the server answers every LookUp of the attack", all_answered, DEADLINE)
            m1 = server.metrics()
            reached = (metric(m1, "grpc_server_started_total", **LOOKUP) -
                       metric(m0, "grpc_server_started_total", **LOOKUP))
            codes = delta(lookup_codes(m1), lookup_codes(m0))
            dropped = (metric(m1, "embedding_dropped_requests_total", reason="cancelled") -
                       metric(m0, "embedding_dropped_requests_total", reason="cancelled"))
            gathered = metric(m1, "embedding_ids_total") - metric(m0, "embedding_ids_total")
            report.append(
                f"{args.queued} streams reset once queued, then {args.streams} reset in a tight "
                f"loop: {reached:.0f} of {started} reached the handler; answered {codes}; "
                f"dropped from the queue as cancelled: {dropped:.0f}; ids gathered: "
                f"{gathered:.0f}")
            c.close()
            r.close()

            # 3. A good client right after.
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                stub = pb_grpc.EmbeddingServiceStub(channel)
                ids = np.random.default_rng(1).integers(0, ROWS, size=8)
                got = stub.LookUp(pb.LookUpRequest(ids=ids.tolist()), timeout=DEADLINE)
                rows = np.frombuffer(got.embeddings, dtype="<f4").reshape(len(ids), DIM)
                if not np.array_equal(rows, table[ids]):
                    failures.append("the good client got wrong rows")
                report.append("a good client right after: OK, right rows")

            if not args.measure_only:
                if codes.get("CANCELLED", 0) != reached or len(codes) != 1:
                    failures.append(f"every call of the attack should be CANCELLED: {codes}")
                if dropped < args.queued:
                    failures.append(f"{dropped:.0f} queued calls dropped as cancelled, want at "
                                    f"least the {args.queued} reset once queued")
                if gathered != 0:
                    failures.append(f"{gathered:.0f} ids of reset calls were gathered")
        finally:
            server.stop()
    print("\n".join(report))
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"rapid_reset_check: passed in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
