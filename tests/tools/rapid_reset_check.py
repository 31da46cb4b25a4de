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
    # Enough for the memory the calls took to be worth returning (about 550 MiB at 30,000).
    parser.add_argument("--streams", type=int, default=30000)
    # Streams opened between a stream's request and its reset (0: reset at once). With a lag,
    # gRPC reads some calls' message before their reset arrives: those are queued, then reset.
    parser.add_argument("--lag", type=int, default=4)
    parser.add_argument("--measure_only", action="store_true")
    # How far above its level before the attack the resident set may stay once it is over.
    parser.add_argument("--rss_bound_mib", type=int, default=64)
    # Under a sanitizer the allocator keeps what is freed (malloc_trim does not reach it).
    parser.add_argument("--no_rss_bound", action="store_true")
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
                         f"--max_queue_delay_us={args.queue_delay_us}",
                         # No batch fills early: a call is gathered only once its delay is over.
                         "--max_batch_ids=1048576"],
                        os.path.join(tmp, "server.log"))
        try:
            m0 = server.metrics()
            rss0 = server.rss()
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
            # The memory the attack's calls took goes back to the system once they are gone
            # (MemoryReturner, issue 41 item 4): wait for the resident set to come back.
            peak = server.rss()
            bound = rss0 + (args.rss_bound_mib << 20)
            try:
                wait_for(f"the resident set back within {args.rss_bound_mib} MiB of before",
                         lambda: server.rss() <= bound, DEADLINE)
                back = "back"
            except TimeoutError:
                back = "NOT back"
                returned = metric(server.metrics(), "embedding_memory_returned_bytes_total")
                report.append(f"embedding_memory_returned_bytes_total {returned:.0f}; the "
                              f"server's log on memory: " + " | ".join(
                                  line for line in server.text().splitlines()
                                  if "MiB" in line))
                if not args.measure_only and not args.no_rss_bound:
                    failures.append(f"resident memory stayed {server.rss() - rss0 >> 20} MiB "
                                    f"above its level before the attack")
            report.append(f"resident memory: {rss0 >> 20} MiB before, {peak >> 20} MiB once "
                          f"every call was answered, {server.rss() >> 20} MiB after ({back} "
                          f"within {args.rss_bound_mib} MiB)")

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
                # A call of the tight loop may be answered before its reset reaches the server
                # (gRPC starts the handler first): a few, never more than 1 in 100.
                answered_ok = codes.get("OK", 0)
                if set(codes) - {"CANCELLED", "OK"} or answered_ok > reached / 100:
                    failures.append(f"every call of the attack should be CANCELLED (a few OK): "
                                    f"{codes}")
                if dropped < args.queued:
                    failures.append(f"{dropped:.0f} queued calls dropped as cancelled, want at "
                                    f"least the {args.queued} reset once queued")
                if gathered > answered_ok * len(IDS):
                    failures.append(f"{gathered:.0f} ids gathered for {answered_ok:.0f} calls "
                                    f"answered OK: reset calls were gathered")
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
