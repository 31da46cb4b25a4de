#!/usr/bin/env python3
"""Our server against the gRPC-only reference under ghz (an independent client), in turns.

For each size (ids x dim) and concurrency: ghz, closed loop, over min(concurrency, 8) connections,
with `--duration-stop=wait`, sends the same kind of call (random ids of a 100,000-row demo table)
first to embedding-reference-server (the same API answering a prebuilt answer of the right size:
no table, no gather), then to embedding-server. Prints a markdown table: calls/s, payload MB/s
(OK answers x answer bytes / s), p50/p99 and the non-OK counts of each, and ours / reference.
  service_ghz_benchmark.py SERVER REFERENCE GHZ [--device=cuda] [--sizes=16x128,256x768,2048x768]
      [--concurrencies=16,256] [--duration=4] [--out=FILE.md]
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
import ghz_run  # noqa: E402
from local_server import Server  # noqa: E402

ROWS = 100000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the reference server exited ({proc.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    sys.exit("the reference server did not listen")


def data_file(ids, directory):
    """Eight requests of `ids` random ids (ghz sends them round robin), as ghz's JSON."""
    rng = random.Random(ids)
    calls = [{"ids": [str(rng.randrange(ROWS)) for _ in range(ids)]} for _ in range(8)]
    path = os.path.join(directory, f"ids{ids}.json")
    with open(path, "w") as f:
        json.dump(calls, f)
    return path


def row(size, c, who, r, answer_bytes):
    rate = r["ok"] / r["seconds"] if r["seconds"] else 0
    bad = r["calls"] - r["ok"]
    return (rate * answer_bytes / 1e6,
            f"| {size} | {c} | {who} | {rate:,.0f} | {rate * answer_bytes / 1e6:,.1f} | "
            f"{(r['p50_ms'] or 0) * 1e3:,.0f} | {(r['p99_ms'] or 0) * 1e3:,.0f} | {bad} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("server")
    p.add_argument("reference")
    p.add_argument("ghz")
    p.add_argument("--device", default="cuda")
    p.add_argument("--sizes", default="16x128,256x768,2048x768")
    p.add_argument("--concurrencies", default="16,256")
    p.add_argument("--duration", type=float, default=4)
    p.add_argument("--out")
    args = p.parse_args()
    lines = ["| size | callers | server | calls/s | payload MB/s | p50 us | p99 us | non-OK |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    ratios = []
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            ids, dim = (int(x) for x in size.split("x"))
            answer_bytes = ids * dim * 4
            data = data_file(ids, tmp)
            port = free_port()
            ref = subprocess.Popen([args.reference, f"--grpc_address=127.0.0.1:{port}",
                                    f"--dim={dim}", f"--rows={ROWS}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ours = None
            try:
                wait_port(port, ref)
                ours = Server(args.server, [f"--demo_table={ROWS}x{dim}", f"--device={args.device}",
                                            "--drain_seconds=0"], os.path.join(tmp, "server.log"))
                for c in (int(x) for x in args.concurrencies.split(",")):
                    ghz_run.run(args.ghz, port, data, c, 1)  # warm-up
                    mb_ref, line_ref = row(size, c, "reference",
                                           ghz_run.run(args.ghz, port, data, c, args.duration),
                                           answer_bytes)
                    ghz_run.run(args.ghz, ours.grpc_port, data, c, 1)
                    mb_ours, line_ours = row(size, c, "ours",
                                             ghz_run.run(args.ghz, ours.grpc_port, data, c,
                                                         args.duration), answer_bytes)
                    ratio = mb_ours / mb_ref if mb_ref else float("nan")
                    ratios.append(ratio)
                    for line in (line_ref, line_ours + f" ours / reference **{ratio:.2f}**"):
                        lines.append(line)
                        print(line, flush=True)
            finally:
                ref.terminate()
                ref.wait()
                if ours is not None:
                    ours.stop()
    summary = f"ours / reference payload MB/s: {min(ratios):.2f} to {max(ratios):.2f}"
    print(summary)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines + ["", summary]) + "\n")


if __name__ == "__main__":
    main()
