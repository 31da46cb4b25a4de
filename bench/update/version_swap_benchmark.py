#!/usr/bin/env python3
"""A version swap under load (issue 23, section 6): a table served from a version directory is
swapped for its next version (EmbeddingAdminService.LoadVersion) while ghz drives lookups, and the
lookups before, during and after the swap are compared: calls, non-OK answers, p50 and p99.

It writes DIR/1 and DIR/2 (--rows x --dim float32 .npy files, every element 1.0 and 2.0), starts
the server on --device with --table=t=DIR and a loopback admin port, then runs ghz three times
(--duration seconds each): before, during (LoadVersion is called --swap_after seconds in) and
after. The Python stubs come from --stubs (scripts/gen-python-stubs makes them), so the GPU host
needs no protoc.

  version_swap_benchmark.py SERVER GHZ --stubs=DIR [--device=cuda] [--rows=20971520] [--dim=128]
      [--dir=/tmp/emb-versions] [--ids=256] [--concurrency=16] [--duration=10] [--json=FILE]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from local_server import Server  # noqa: E402

METHOD = "embedding.v1.EmbeddingService/LookUp"


def write_version(dir_, version, rows, dim, value):
    import numpy as np
    tmp = os.path.join(dir_, f".incoming-{version}")
    os.makedirs(tmp)
    table = np.lib.format.open_memmap(os.path.join(tmp, "t.npy"), mode="w+", dtype=np.float32,
                                      shape=(rows, dim))
    step = max(1, (64 << 20) // (dim * 4))
    for first in range(0, rows, step):
        table[first:first + step] = value
    table.flush()
    del table
    os.rename(tmp, os.path.join(dir_, str(version)))


def ghz(binary, port, ids, concurrency, duration):
    cmd = [binary, "--insecure", "--call", METHOD, "-d", json.dumps({"table": "t", "ids": ids}),
           "-c", str(concurrency), "-z", f"{duration}s", "--duration-stop=wait", "-O", "json",
           f"127.0.0.1:{port}"]
    with tempfile.TemporaryFile() as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.DEVNULL, check=False)
        out.seek(0)
        report = json.load(out)
    codes = report.get("statusCodeDistribution") or {}
    lat = {d["percentage"]: d["latency"] / 1e3 for d in report.get("latencyDistribution") or []}
    return {"calls": report["count"], "rps": report["rps"], "codes": codes,
            "non_ok": sum(v for k, v in codes.items() if k != "OK"),
            "p50_us": lat.get(50), "p99_us": lat.get(99)}


def server_non_ok(server):
    """LookUps the server answered with a code other than OK, so far (ghz's own count also holds
    the calls it cuts when its run ends: CANCELLED, UNAVAILABLE)."""
    return sum(v for k, v in server.metrics().items()
               if k.startswith("grpc_server_handled_total{") and 'grpc_method="LookUp"' in k
               and 'grpc_code="OK"' not in k)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("server")
    p.add_argument("ghz")
    p.add_argument("--stubs", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=20971520)  # x 128 float32: 10 GiB
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--dir", default="/tmp/emb-versions")
    p.add_argument("--ids", type=int, default=256)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--swap_after", type=float, default=2)
    p.add_argument("--json", default="")
    a = p.parse_args()
    sys.path.insert(0, a.stubs)
    import grpc
    from embedding.v1 import embedding_admin_pb2, embedding_admin_pb2_grpc

    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    start = time.monotonic()
    write_version(a.dir, 1, a.rows, a.dim, 1.0)
    print(f"wrote version 1, {a.rows} x {a.dim} float32, in {time.monotonic() - start:.1f} s")
    ids = [(i * 7919) % a.rows for i in range(a.ids)]
    r = {"rows": a.rows, "dim": a.dim, "bytes": a.rows * a.dim * 4, "device": a.device,
         "ids": a.ids, "concurrency": a.concurrency}
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(a.server, [f"--table=t={a.dir}", f"--device={a.device}",
                                   "--admin_address=127.0.0.1:0", "--admin_insecure"],
                        os.path.join(tmp, "server.log"))
        try:
            write_version(a.dir, 2, a.rows, a.dim, 2.0)  # after start-up, which took version 1
            def phase(name):
                before = server_non_ok(server)
                r[name] = ghz(a.ghz, server.grpc_port, ids, a.concurrency, a.duration)
                r[name]["server_non_ok"] = server_non_ok(server) - before

            phase("before")
            admin = embedding_admin_pb2_grpc.EmbeddingAdminServiceStub(
                grpc.insecure_channel(f"127.0.0.1:{server.admin_port}"))
            swap = {}

            def load():
                time.sleep(a.swap_after)  # into the ghz run
                t0 = time.monotonic()
                answer = admin.LoadVersion(embedding_admin_pb2.LoadVersionRequest(table="t"),
                                           timeout=600)
                swap["seconds"] = time.monotonic() - t0
                swap["version"] = answer.version

            loader = threading.Thread(target=load)
            loader.start()
            phase("during")
            loader.join()
            r["swap_seconds"] = swap.get("seconds")
            r["swapped_to"] = swap.get("version")
            phase("after")
            r["server_log_tail"] = [line for line in server.text().splitlines()
                                    if "version" in line][-3:]
        finally:
            server.stop()
    shutil.rmtree(a.dir, ignore_errors=True)
    print(f"version swap of a {r['bytes'] / 2**30:.1f} GiB table on {a.device} under ghz "
          f"({a.concurrency} callers, {a.ids} ids x {a.dim}); LoadVersion took "
          f"{r['swap_seconds']:.2f} s, now version {r['swapped_to']}")
    print(f"{'phase':<8} {'calls':>8} {'req/s':>9} {'server non-OK':>13} {'p50 us':>8} "
          f"{'p99 us':>8}  ghz's codes (its cut at the end of a run included)")
    for phase in ("before", "during", "after"):
        x = r[phase]
        print(f"{phase:<8} {x['calls']:>8} {x['rps']:>9.0f} {x['server_non_ok']:>13.0f} "
              f"{x['p50_us']:>8.0f} {x['p99_us']:>8.0f}  {x['codes']}")
    print(f"p99 during / before: {r['during']['p99_us'] / r['before']['p99_us']:.2f}")
    for line in r["server_log_tail"]:
        print("  server:", line)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
