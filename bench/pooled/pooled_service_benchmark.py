#!/usr/bin/env python3
"""Pooled against unpooled calls through the service, under the real ghz (docs/benchmarks.md §13).

One server (a demo float32 table, --rows x --dim, on --device) and, for each concurrency, two ghz
runs of the same ids: 256 bags x 32 ids a call as a pooled sum (LookUpRequest.pooling with a 2-D
shape, whose last axis is the bag: the answer is [256, dim]) and as a plain lookup (the answer is
[256, 32, dim]). Both answer float32. Printed per run: calls/s, ids/s, the answer's payload bytes
per call, p50 and p99, and the server's gather time per batch from /metrics.

Usage (a bundle with the server and ghz; scripts/gpu-check runs it):
  python3 bench/pooled/pooled_service_benchmark.py --server .gpu/embedding-server \
      --ghz .gpu/ghz --device cuda:0 [--out results.md]
"""

import argparse
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import ghz_run  # noqa: E402
import report  # noqa: E402
from local_server import Server  # noqa: E402


def ghz(binary, port, data, concurrency, duration):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
        data_path = f.name
    try:
        return ghz_run.run(binary, port, data_path, concurrency, duration, max_recv="64MB")
    finally:
        os.unlink(data_path)


def gather_seconds(server):
    m = server.metrics()
    total = sum(v for k, v in m.items() if k.startswith("embedding_gather_duration_seconds_sum"))
    count = sum(v for k, v in m.items() if k.startswith("embedding_gather_duration_seconds_count"))
    return total, count


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--ghz", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--bags", type=int, default=256)
    p.add_argument("--bag", type=int, default=32)
    p.add_argument("--concurrency", default="16,64")
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--out", default="")
    a = p.parse_args()

    rng = random.Random(1)
    ids = [rng.randrange(a.rows) for _ in range(a.bags * a.bag)]
    cases = {
        "pooled sum": {"ids": ids, "shape": [a.bags, a.bag], "pooling": "POOLING_SUM"},
        "unpooled": {"ids": ids, "shape": [a.bags, a.bag]},
    }
    log = tempfile.NamedTemporaryFile(suffix=".log", delete=False).name
    server = Server(a.server, [f"--demo_table={a.rows}x{a.dim}", f"--device={a.device}",
                               "--max_response_bytes=268435456"], log)
    rows = []
    try:
        for c in [int(x) for x in a.concurrency.split(",")]:
            for name, data in cases.items():
                g0, n0 = gather_seconds(server)
                r = ghz(a.ghz, server.grpc_port, data, c, a.duration)
                g1, n1 = gather_seconds(server)
                answer_rows = a.bags if name == "pooled sum" else a.bags * a.bag
                rows.append({
                    "case": name, "concurrency": c, "calls_per_s": r["ok"] / r["seconds"],
                    "ids_per_s": r["ok"] * len(ids) / r["seconds"],
                    "payload_bytes": answer_rows * a.dim * 4,
                    "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
                    "gather_us_per_batch": (g1 - g0) / max(n1 - n0, 1) * 1e6,
                    "not_ok": sum(v for k, v in r["codes"].items() if k not in ("OK", "Canceled")),
                    "codes": r["codes"]})
    finally:
        server.stop()
    lines = [f"Pooled vs unpooled calls, {a.bags} bags x {a.bag} ids, dim {a.dim} float32, "
             f"{a.rows} rows, device {a.device}, ghz {a.duration} s per run",
             "",
             "| case | c | calls/s | ids/s | answer bytes/call | p50 ms | p99 ms | gather us/batch | failed (not OK, not cancelled at the end) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['concurrency']} | {r['calls_per_s']:,.0f} | "
                     f"{r['ids_per_s'] / 1e6:,.2f} M | {r['payload_bytes']:,} | "
                     f"{r['p50_ms'] or 0:.3f} | {r['p99_ms'] or 0:.3f} | "
                     f"{r['gather_us_per_batch']:.1f} | {r['not_ok']} |")
    report.write("\n".join(lines), rows, a.out)


if __name__ == "__main__":
    main()
