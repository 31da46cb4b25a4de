#!/usr/bin/env python3
"""Three shards on one host against one whole-table server (docs/benchmarks.md, shards).

Starts one server of the seeded demo table (--rows x --dim float32) and --shards servers of the
same table, each with --shard=K/N, all on --device; then, per concurrency, runs bench/sharded's
sharded_load against the whole server (EmbeddingClient) and against the shards (ShardedClient,
which splits each call's ids over the shards, calls them in parallel and puts the rows back),
each for --seconds after a warm-up. Prints calls/s, ids/s, p50 and p99 of each, and the client's
own work per call (splitting the ids and placing the rows, timed without RPCs).

Usage:
  python3 bench/sharded/sharded_benchmark.py --server build/service/embedding-server \
      --load build/bench/sharded/sharded_load [--device cpu] [--out results.md]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import report  # noqa: E402
from local_server import Server  # noqa: E402


def load(binary, target_flag, a, concurrency):
    out = subprocess.run([binary, target_flag, f"--batch={a.batch}",
                          f"--concurrency={concurrency}", f"--seconds={a.seconds}",
                          f"--warmup_seconds={a.warmup}"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"sharded_load failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--load", required=True, help="the sharded_load binary")
    p.add_argument("--device", default="cpu")
    p.add_argument("--shards", type=int, default=3)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--concurrency", default="1,16")
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", default="")
    a = p.parse_args()

    common = [f"--demo_table={a.rows}x{a.dim}", f"--device={a.device}", "--drain_seconds=0",
              f"--max_request_ids={max(a.batch, 65536)}"]
    logs = tempfile.mkdtemp(prefix="sharded_bench_")
    servers = [Server(a.server, common, os.path.join(logs, "whole.log"))]
    for k in range(a.shards):
        servers.append(Server(a.server, common + [f"--shard={k}/{a.shards}"],
                              os.path.join(logs, f"shard{k}.log")))
    results = []
    try:
        whole = f"--whole=127.0.0.1:{servers[0].grpc_port}"
        shards = "--shards=" + ",".join(f"127.0.0.1:{s.grpc_port}" for s in servers[1:])
        for c in [int(x) for x in a.concurrency.split(",")]:
            for name, flag in (("one server, whole table", whole),
                               (f"{a.shards} shards, ShardedClient", shards)):
                r = load(a.load, flag, a, c)
                r.update(server=name, concurrency=c)
                results.append(r)
    finally:
        for s in servers:
            s.stop()
    lines = [f"demo table {a.rows} x {a.dim} float32 on {a.device}, calls of {a.batch} uniform "
             f"random ids, {a.seconds} s per run after {a.warmup} s, {os.cpu_count()} CPUs",
             "", "| server | c | calls/s | ids/s | p50 ms | p99 ms | client split us | "
             "client place us |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rate = r["calls"] / r["seconds"]
        sharded = "ShardedClient" in r["server"]
        lines.append(f"| {r['server']} | {r['concurrency']} | {rate:,.0f} | "
                     f"{rate * r['batch'] / 1e6:,.2f} M | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f"{r['split_us']:.1f} | {r['place_us']:.1f} |" if sharded else
                     f"| {r['server']} | {r['concurrency']} | {rate:,.0f} | "
                     f"{rate * r['batch'] / 1e6:,.2f} M | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f" | |")
    report.write("\n".join(lines), results, a.out)


if __name__ == "__main__":
    main()
