#!/usr/bin/env python3
"""One multi-feature call against the calls it replaces, through the service (issue 43's
service figures; docs/benchmarks.md).

One server with --tables tables of --rows x --dim float32 (the same .npy file under each name),
and per batch size B (samples) and concurrency, three ways to look up one inference's features
(one id per feature per sample, B x tables ids in all, the same bytes answered):
  features  one LookUpFeatures call: every table a feature of B bags of one id, pooled (sum), the
            answer [B, tables x dim] (TorchRec's KeyedTensor);
  26 calls  one LookUp per table of B ids, sent concurrently (ghz round-robins the tables'
            requests; inferences/s = calls/s / tables);
  one call  one LookUp of all B x tables ids on a single table: the best a call did before.
Under ghz (closed loop; the inferences/s, p50/p99 of a call and the non-OK calls) and through a
Python grpc.aio client, as an inference server would call (one inference at a time per task: the
26 calls are awaited together).

Usage (a bundle with the server and ghz, the Python stubs on PYTHONPATH):
  python3 bench/features/feature_service_benchmark.py --server .gpu/embedding-server \
      --ghz .gpu/ghz --device cuda:0 [--out results.md]
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import ghz_run  # noqa: E402
import report  # noqa: E402
from local_server import Server  # noqa: E402

FEATURES = "embedding.v1.EmbeddingService/LookUpFeatures"


def ghz(binary, port, data, concurrency, duration, method=ghz_run.METHOD):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
        path = f.name
    try:
        return ghz_run.run(binary, port, path, concurrency, duration, max_recv="256MB",
                           method=method)
    finally:
        os.unlink(path)


def requests(tables, batch, rows, rng):
    """The three ways' ghz JSON: one features call, the tables' calls, one call of all ids."""
    ids = [[rng.randrange(rows) for _ in range(batch)] for _ in range(tables)]
    features = {"batch_size": batch, "features": [
        {"name": f"f{t}", "table": f"t{t}", "ids": ids[t], "pooling": "POOLING_SUM",
         "lengths": [1] * batch} for t in range(tables)]}
    per_table = [{"table": f"t{t}", "ids": ids[t]} for t in range(tables)]
    one = {"table": "t0", "ids": [i for t in ids for i in t]}
    return features, per_table, one


async def aio_rates(port, tables, batch, rows, concurrency, seconds):
    """Inferences/s and p50 (ms) of each way through grpc.aio, `concurrency` tasks each looping
    one inference at a time, for `seconds` a way."""
    import grpc
    from embedding.v1 import embedding_service_pb2 as pb
    from embedding.v1 import embedding_service_pb2_grpc as pb_grpc
    rng = random.Random(7)
    ids = [[rng.randrange(rows) for _ in range(batch)] for _ in range(tables)]
    features = pb.LookUpFeaturesRequest(batch_size=batch, features=[
        pb.Feature(name=f"f{t}", table=f"t{t}", ids=ids[t], pooling=pb.POOLING_SUM)
        for t in range(tables)])
    per_table = [pb.LookUpRequest(table=f"t{t}", ids=ids[t]) for t in range(tables)]
    one = pb.LookUpRequest(table="t0", ids=[i for t in ids for i in t])
    options = [("grpc.max_receive_message_length", -1)]
    results = {}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = pb_grpc.EmbeddingServiceStub(channel)
        ways = {
            "features": lambda: stub.LookUpFeatures(features),
            f"{tables} calls": lambda: asyncio.gather(*[stub.LookUp(r) for r in per_table]),
            "one call": lambda: stub.LookUp(one),
        }
        for name, infer in ways.items():
            await infer()  # warm
            latencies = []
            end = time.monotonic() + seconds

            async def loop():
                while time.monotonic() < end:
                    t0 = time.perf_counter()
                    await infer()
                    latencies.append(time.perf_counter() - t0)
            t0 = time.monotonic()
            await asyncio.gather(*[loop() for _ in range(concurrency)])
            results[name] = (len(latencies) / (time.monotonic() - t0),
                             statistics.median(latencies) * 1e3)
    return results


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--ghz", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batches", default="16,64,512")
    p.add_argument("--concurrency", default="16,64,256")
    p.add_argument("--aio_concurrency", default="1,8,32")
    p.add_argument("--duration", type=int, default=3)
    p.add_argument("--out", default="")
    a = p.parse_args()

    work = tempfile.mkdtemp()
    table = os.path.join(work, "t.npy")
    np.save(table, np.random.default_rng(3).standard_normal((a.rows, a.dim), dtype=np.float32))
    log = os.path.join(work, "server.log")
    server = Server(a.server, [f"--table=t{t}={table}" for t in range(a.tables)]
                    + [f"--device={a.device}", "--max_response_bytes=268435456"], log)
    rng = random.Random(1)
    rows = []
    try:
        for batch in [int(b) for b in a.batches.split(",")]:
            features, per_table, one = requests(a.tables, batch, a.rows, rng)
            for c in [int(x) for x in a.concurrency.split(",")]:
                runs = {"features": ghz(a.ghz, server.grpc_port, features, c, a.duration,
                                        FEATURES),
                        f"{a.tables} calls": ghz(a.ghz, server.grpc_port, per_table, c,
                                                 a.duration),
                        "one call": ghz(a.ghz, server.grpc_port, one, c, a.duration)}
                per = {n: r["ok"] / r["seconds"] / (a.tables if "calls" in n else 1)
                       for n, r in runs.items()}
                for name, r in runs.items():
                    rows.append({
                        "client": "ghz", "batch": batch, "concurrency": c, "way": name,
                        "inferences_per_s": per[name], "p50_ms": r["p50_ms"],
                        "p99_ms": r["p99_ms"], "non_ok": r["calls"] - r["ok"],
                        "vs_one_call": per[name] / max(per["one call"], 1e-9),
                        "vs_calls": per[name] / max(per[f"{a.tables} calls"], 1e-9)})
            for c in [int(x) for x in a.aio_concurrency.split(",")]:
                got = asyncio.run(aio_rates(server.grpc_port, a.tables, batch, a.rows, c,
                                            a.duration))
                for name, (rate, p50) in got.items():
                    rows.append({
                        "client": "grpc.aio", "batch": batch, "concurrency": c, "way": name,
                        "inferences_per_s": rate, "p50_ms": p50, "p99_ms": None, "non_ok": 0,
                        "vs_one_call": rate / max(got["one call"][0], 1e-9),
                        "vs_calls": rate / max(got[f"{a.tables} calls"][0], 1e-9)})
    finally:
        server.stop()
    lines = [f"{a.tables} tables of {a.rows} x {a.dim} float32 on {a.device}; one id per feature "
             "per sample; inferences/s (26 calls: calls/s / tables)", "",
             "| client | batch | c | way | inferences/s | p50 ms | p99 ms | non-OK | vs one call "
             "| vs 26 calls |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p99 = "" if r["p99_ms"] is None else f"{r['p99_ms']:.2f}"
        lines.append(f"| {r['client']} | {r['batch']} | {r['concurrency']} | {r['way']} | "
                     f"{r['inferences_per_s']:,.0f} | {r['p50_ms']:.2f} | {p99} | {r['non_ok']} | "
                     f"{r['vs_one_call']:.2f} | {r['vs_calls']:.2f} |")
    report.write("\n".join(lines) + "\n", rows, a.out)


if __name__ == "__main__":
    main()
