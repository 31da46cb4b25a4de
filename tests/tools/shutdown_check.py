"""What callers see when the server is stopped under load: a rolling update's SIGTERM.

Starts the real server, keeps CALLERS threads calling LookUp over CONNECTIONS separate
connections (Python grpcio, a client we did not write), sends SIGTERM, and checks that:
  - every call gets OK with the right rows, or UNAVAILABLE (which clients retry elsewhere):
    never CANCELLED, a reset, or another code;
  - calls keep succeeding during the drain (--drain_seconds);
  - the server exits 0.
Half the callers stop at their first UNAVAILABLE, as callers that move to another replica
would; the other half keep calling until the server has exited, as a load generator does.

  shutdown_check.py SERVER [--callers=N] [--connections=N] [--repeats=N] [--device=cpu]
"""

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

from demo_table import demo_table
from embedding.v1 import embedding_service_pb2 as pb
from embedding.v1 import embedding_service_pb2_grpc as pb_grpc

ROWS, DIM, SEED = 3000, 20, 11
IDS_PER_CALL = 16
DRAIN_SECONDS = 1


def start_server(binary, device, log):
    proc = subprocess.Popen(
        [binary, f"--demo_table={ROWS}x{DIM}", f"--demo_seed={SEED}", f"--device={device}",
         "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
         f"--drain_seconds={DRAIN_SECONDS}", "--shutdown_timeout_seconds=20"],
        stderr=log, stdout=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = open(log.name).read()
        if "health SERVING" in text:
            port = re.search(r"gRPC listening on [^ ]*:(\d+)", text).group(1)
            return proc, int(port)
        if proc.poll() is not None:
            sys.exit(f"FAIL: server exited at start-up:\n{text}")
        time.sleep(0.05)
    proc.kill()
    sys.exit("FAIL: server not serving after 120 s")


class Caller(threading.Thread):
    def __init__(self, stub, seed, table, sigterm_at, persistent, server_gone):
        super().__init__(daemon=True)
        self.persistent, self.server_gone = persistent, server_gone
        self.stub, self.rng, self.table = stub, np.random.default_rng(seed), table
        self.sigterm_at = sigterm_at  # a one-element list, set by the main thread
        self.codes = collections.Counter()
        self.ok_after_sigterm = 0
        self.wrong_rows = 0
        self.first_bad = None
        self.started = threading.Event()

    def run(self):
        while True:
            ids = self.rng.integers(0, ROWS, size=IDS_PER_CALL)
            request = pb.LookUpRequest(ids=ids.tolist(), shape=[IDS_PER_CALL])
            try:
                response = self.stub.LookUp(request, timeout=30)
            except grpc.RpcError as e:
                self.codes[e.code().name] += 1
                if e.code() != grpc.StatusCode.UNAVAILABLE and self.first_bad is None:
                    self.first_bad = f"{e.code().name}: {e.details()}"
                if not self.persistent or self.server_gone.is_set():
                    return  # a real caller would go to another replica now
                continue
            self.codes["OK"] += 1
            rows = np.frombuffer(response.embeddings, dtype="<f4").reshape(IDS_PER_CALL, DIM)
            if not np.array_equal(rows, self.table[ids]):
                self.wrong_rows += 1
            if self.sigterm_at[0] is not None:
                self.ok_after_sigterm += 1
            if self.codes["OK"] >= 5:
                self.started.set()


def one_run(args, table, run):
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        proc, port = start_server(args.server, args.device, log)
        channels = [
            grpc.insecure_channel(f"127.0.0.1:{port}",
                                  options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(args.connections)
        ]
        sigterm_at = [None]
        server_gone = threading.Event()
        callers = [Caller(pb_grpc.EmbeddingServiceStub(channels[i % args.connections]),
                          1000 * run + i, table, sigterm_at, i % 2 == 1, server_gone)
                   for i in range(args.callers)]
        for c in callers:
            c.start()
        for c in callers:
            if not c.started.wait(60):
                proc.kill()
                sys.exit(f"FAIL: a caller made no 5 calls in 60 s\n{open(log.name).read()}")
        sigterm_at[0] = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        server_gone.set()
        for c in callers:
            c.join(timeout=60)
        for ch in channels:
            ch.close()
        codes = sum((c.codes for c in callers), collections.Counter())
        bad = [c.first_bad for c in callers if c.first_bad]
        hung = sum(c.is_alive() for c in callers)
        wrong = sum(c.wrong_rows for c in callers)
        drained = sum(c.ok_after_sigterm for c in callers)
        print(f"run {run}: exit {code}; {dict(codes)}; {drained} OK after SIGTERM; "
              f"{len(bad)} callers saw another code{': ' + bad[0] if bad else ''}")
        failures = []
        if code != 0:
            failures.append(f"server exited {code}")
        if bad:
            failures.append(f"{len(bad)} callers got a code other than OK or UNAVAILABLE")
        if wrong:
            failures.append(f"{wrong} answers had wrong rows")
        if hung:
            failures.append(f"{hung} callers still calling 60 s after the server exited")
        if drained == 0:
            failures.append("no call succeeded after SIGTERM (the drain should keep serving)")
        if failures:
            print("FAIL: " + "; ".join(failures) + "\n" + open(log.name).read())
        return not failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--callers", type=int, default=24)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    table = demo_table(ROWS, DIM, SEED)
    passed = sum(one_run(args, table, run) for run in range(1, args.repeats + 1))
    print(f"shutdown_check: {passed} of {args.repeats} runs passed "
          f"({args.callers} callers on {args.connections} connections)")
    return 0 if passed == args.repeats else 1


if __name__ == "__main__":
    sys.exit(main())
