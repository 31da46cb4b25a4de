#!/usr/bin/env python3
"""A table larger than its GPU budget against the same table on the GPU, through the service
under the real ghz (docs/benchmarks.md, host tier).

Two servers in turn, each with the same demo float32 table (--rows x --dim) on --device: one with
the whole table in GPU memory, one with --gpu_memory_budget of a quarter of the table (--fraction),
so that the table lives in pinned host memory with a GPU cache of what the budget leaves. ghz
sends calls of --batch x --seq ids drawn from a power law (--exponent; ranks scattered over the
rows), round robin over --requests distinct calls, after a warm-up run that fills the cache.
Printed per server and concurrency: calls/s, ids/s, p50 and p99, the cache's hit rate over the
measured run (from /metrics), and calls/s against the GPU table's.

With --table=PATH (a float32 .npy) and --gpu-budget=BYTES, one server instead: that file's table
under that budget, host tier only (the 40 GiB table with a 4 GiB budget of docs/benchmarks.md).

With --client=PATH (embedding-client), the project's load generator sends the calls instead of
ghz: --batch x --seq ids a call drawn from its Zipf law of --exponent (ids in rank order), from a
pool of --pool-requests calls made before each run, more than a run sends, so that every call's
ids are fresh (ghz's --requests distinct calls repeat, and a cache holds them all after the
warm-up). The table says when a run sent more calls than its pool (ids then repeat).

Usage (a bundle with the server and ghz; scripts/gpu-check runs it):
  python3 bench/host_tier/host_tier_service_benchmark.py --server .gpu/embedding-server \
      --ghz .gpu/ghz --device cuda:0 [--out results.md]
  python3 bench/host_tier/host_tier_service_benchmark.py --server .gpu/embedding-server \
      --client .gpu/embedding-client --pool-requests 4096 --device cuda:0
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import ghz_run  # noqa: E402
import report  # noqa: E402
from local_server import Server  # noqa: E402


def power_law_ids(rows, exponent, n, rng):
    """n ids: rank r (from 0) has weight 1 / (r + 1)^exponent; ranks scattered over the rows by a
    multiplication modulo rows (a permutation: the multiplier is a prime that does not divide
    rows)."""
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    ranks = np.searchsorted(cdf, rng.random(n), side="left")
    ranks = np.minimum(ranks, rows - 1)
    multiplier = 2_654_435_761  # prime
    assert rows % multiplier != 0
    return (ranks.astype(np.int64) * multiplier) % rows, cdf


def cache_counts(server):
    m = server.metrics()
    hits = sum(v for k, v in m.items() if k.startswith("embedding_cache_hits_total"))
    misses = sum(v for k, v in m.items() if k.startswith("embedding_cache_misses_total"))
    return hits, misses


def client_run(client, port, concurrency, seconds, per, exponent, pool, seed):
    """One closed-loop run of embedding-client bench: its JSON report, plus ok (OK calls) and
    seconds, as ghz_run.run gives them. A connection for every 16 calls in flight (the server
    holds at most 256 MiB of unsent answers a connection: 16 of these 16 MiB answers). Calls that
    fail are in the report's codes (the client then exits 3)."""
    proc = subprocess.run(
        [client, f"--target=127.0.0.1:{port}", "bench", f"--concurrency={concurrency}",
         f"--connections={max(1, concurrency // 16)}",
         f"--duration={seconds}s", "--warmup=0", f"--ids_per_request={per}",
         "--id_distribution=zipf", f"--zipf_exponent={exponent}", f"--pool_requests={pool}",
         f"--seed={seed}", "--max_recv_message_size=268435456", "--timeout=60s", "--json"],
        capture_output=True, text=True)
    if proc.returncode not in (0, 3) or not proc.stdout.strip():
        raise RuntimeError(f"embedding-client bench exited {proc.returncode}: {proc.stderr}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    r["ok"] = r["codes"].get("OK", 0)
    r["seconds"] = r["duration_s"]
    r["p50_ms"] = r["ok_latency_us"]["p50"] / 1e3
    r["p99_ms"] = r["ok_latency_us"]["p99"] / 1e3
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--ghz", default="")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--rows", type=int, default=32 * 1024 * 1024)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--fraction", type=float, default=0.25, help="GPU budget / table bytes")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--exponent", type=float, default=1.05)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--concurrency", default="16,64")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--out", default="")
    p.add_argument("--table", default="", help="a float32 .npy to serve instead of a demo table")
    p.add_argument("--gpu-budget", type=int, default=0, help="with --table: its GPU budget, bytes")
    p.add_argument("--client", default="", help="embedding-client: its bench instead of ghz")
    p.add_argument("--pool-requests", type=int, default=4096,
                   help="with --client: calls made before each run, each with fresh ids")
    a = p.parse_args()
    if not a.client and not a.ghz:
        p.error("give --ghz or --client")
    if a.table:
        a.rows, a.dim = np.load(a.table, mmap_mode="r").shape

    rng = np.random.default_rng(1)
    ids, cdf = power_law_ids(a.rows, a.exponent, a.requests * a.batch * a.seq, rng)
    per = a.batch * a.seq
    data = [{"ids": ids[i * per:(i + 1) * per].tolist(), "shape": [a.batch, a.seq]}
            for i in range(a.requests)]
    data_path = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    with open(data_path, "w") as f:
        json.dump(data, f)
    table_bytes = a.rows * a.dim * 4
    budget = int(table_bytes * a.fraction)
    servers = {
        "table in GPU memory": [],
        f"budget {a.fraction:g} of the table (host tier)": [f"--gpu_memory_budget={budget}"],
    }
    table_args = [f"--demo_table={a.rows}x{a.dim}"]
    if a.table:
        servers = {f"{a.table}, GPU budget {a.gpu_budget / 2**30:g} GiB (host tier)": []}
        table_args = [f"--table=bench={a.table},gpu_budget={a.gpu_budget}"]
    results = []
    for name, extra in servers.items():
        log = tempfile.NamedTemporaryFile(suffix=".log", delete=False).name
        server = Server(a.server, table_args + [f"--device={a.device}",
                                   "--max_request_ids=65536", "--max_response_bytes=268435456"]
                        + extra, log)
        def run(c, seconds, seed):
            if a.client:
                return client_run(a.client, server.grpc_port, c, seconds, per, a.exponent,
                                  a.pool_requests, seed)
            return ghz_run.run(a.ghz, server.grpc_port, data_path, c, seconds)

        try:
            run(16, a.warmup, 1000)  # warms the cache
            for c in [int(x) for x in a.concurrency.split(",")]:
                h0, m0 = cache_counts(server)
                r = run(c, a.duration, c)
                h1, m1 = cache_counts(server)
                looked = (h1 - h0) + (m1 - m0)
                results.append({
                    "server": name, "concurrency": c, "calls_per_s": r["ok"] / r["seconds"],
                    "ids_per_s": r["ok"] * per / r["seconds"], "p50_ms": r["p50_ms"],
                    "p99_ms": r["p99_ms"],
                    "hit_rate": (h1 - h0) / looked if looked > 0 else None,
                    "not_ok": sum(v for k, v in r["codes"].items() if k not in ("OK", "Canceled")),
                    "codes": r["codes"],
                    "pool_cycled": bool(a.client) and r["requests"] > a.pool_requests})
        finally:
            server.stop()
        with open(log) as f:
            for line in f:
                if "loaded:" in line or "host memory" in line:
                    print(line.rstrip(), file=sys.stderr)
    os.unlink(data_path)
    gpu = {r["concurrency"]: r["calls_per_s"] for r in results if "GPU memory" in r["server"]}
    # Of the table's rows: the cache holds about (budget - slots - buffers) / row bytes.
    calls = (f"embedding-client bench, Zipf ids, {a.pool_requests} distinct calls a run (fresh "
             f"ids)" if a.client else f"ghz, {a.requests} distinct calls round robin")
    lines = [f"{a.rows} rows x {a.dim} float32 ({table_bytes / 2**30:.1f} GiB), calls of "
             f"{a.batch} x {a.seq} ids, power law {a.exponent} (the hottest 10% of rows take "
             f"{cdf[a.rows // 10 - 1]:.3f} of lookups), {calls}, "
             f"device {a.device}, {a.duration} s per run after a {a.warmup} s warm-up",
             "",
             "| server | c | calls/s | ids/s | p50 ms | p99 ms | hit rate | calls/s vs GPU table | failed |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ratio = r["calls_per_s"] / gpu[r["concurrency"]] if gpu.get(r["concurrency"]) else 0
        hit = f"{r['hit_rate']:.3f}" if r["hit_rate"] is not None else ""
        cycled = " (pool cycled: ids repeat)" if r["pool_cycled"] else ""
        lines.append(f"| {r['server']}{cycled} | {r['concurrency']} | {r['calls_per_s']:,.0f} | "
                     f"{r['ids_per_s'] / 1e6:,.1f} M | {r['p50_ms'] or 0:.2f} | "
                     f"{r['p99_ms'] or 0:.2f} | {hit} | {ratio:.2f} | {r['not_ok']} |")
    report.write("\n".join(lines), results, a.out)


if __name__ == "__main__":
    main()
