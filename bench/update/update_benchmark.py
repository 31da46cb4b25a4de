#!/usr/bin/env python3
"""Row updates under load (issue 23, section 6): how fast one client's UpdateRows stream is
applied, how long an update takes from its arrival to its visibility, and what a steady stream of
updates costs the lookups' p99, all against one server in one run.

It starts the server on loopback (--demo_table=ROWSxDIM, an insecure loopback admin port), then:
  1. reference: LookUps whose answers are as large as one update message (--rows_per_message
     rows), closed loop: the bytes a second gRPC carries in the other direction on this host;
  2. updates, as fast as answered (update_load, --window messages in flight): rows/s applied,
     the client's send-to-answer p50/p99, and the server's arrival-to-visible p50/p99 (from
     embedding_update_visible_seconds, the difference of two scrapes);
  3. lookups: the peak rate (closed loop, --peak_concurrency callers of --lookup_ids ids), then
     open loop at half of it, first alone and then beside updates at --update_rate rows/s; the
     p99 of each and their ratio.
Prints a table and, with --json FILE, appends the figures as one JSON line.

  update_benchmark.py SERVER CLIENT UPDATE_LOAD [--device=cuda] [--rows=1000000] [--dim=128]
      [--rows_per_message=4096] [--window=4] [--update_rate=100000] [--duration=10]
      [--json=FILE] [-- extra server flags]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from local_server import Server  # noqa: E402


def bench(client, port, args):
    """One `embedding-client bench --json` run; its JSON."""
    out = subprocess.run([client, f"--target=127.0.0.1:{port}", "bench", "--json"] + args,
                         check=False, capture_output=True, text=True)
    if not out.stdout.strip():
        sys.exit(f"bench failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def histogram(metrics, name, table):
    """Cumulative bucket counts {le: count} of one table's histogram."""
    buckets = {}
    prefix = f'{name}_bucket{{'
    for key, value in metrics.items():
        if key.startswith(prefix) and f'table="{table}"' in key:
            le = re.search(r'[{,]le="([^"]+)"', key).group(1)
            buckets[float("inf") if le == "+Inf" else float(le)] = value
    return buckets


def quantile(before, after, q):
    """The q-quantile (upper bucket bound) of the observations between two scrapes."""
    counts = sorted((le, after[le] - before.get(le, 0)) for le in after)
    total = counts[-1][1] if counts else 0
    if total == 0:
        return 0.0
    for le, count in counts:
        if count >= q * total:
            return le
    return float("inf")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("server")
    p.add_argument("client")
    p.add_argument("update_load")
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--rows_per_message", type=int, default=4096)
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--update_rate", type=float, default=100_000)
    p.add_argument("--lookup_ids", type=int, default=256)
    p.add_argument("--peak_concurrency", type=int, default=64)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--json", default="")
    p.add_argument("extra", nargs="*")
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(a.server, [f"--demo_table={a.rows}x{a.dim}", f"--device={a.device}",
                                   "--admin_address=127.0.0.1:0", "--admin_insecure"] + a.extra,
                        os.path.join(tmp, "server.log"))
        try:
            port, admin = server.grpc_port, server.admin_port
            seconds = f"{a.duration}s"
            r = {"rows": a.rows, "dim": a.dim, "device": a.device,
                 "rows_per_message": a.rows_per_message, "window": a.window}

            ref = bench(a.client, port, [f"--ids_per_request={a.rows_per_message}",
                                         "--concurrency=4", f"--duration={seconds}"])
            r["reference_lookup_mb_per_s"] = ref["payload_mb_per_s"]
            r["reference_lookup_rows_per_s"] = ref["ids_per_s"]

            before = histogram(server.metrics(), "embedding_update_visible_seconds", "demo")
            load = subprocess.run(
                [a.update_load, f"--target=127.0.0.1:{port}", f"--admin_target=127.0.0.1:{admin}",
                 f"--rows_per_message={a.rows_per_message}", f"--window={a.window}",
                 f"--duration_s={a.duration}"], check=True, capture_output=True, text=True)
            upd = json.loads(load.stdout.strip().splitlines()[-1])
            after = histogram(server.metrics(), "embedding_update_visible_seconds", "demo")
            r["update_rows_per_s"] = upd["rows_per_s"]
            r["update_mb_per_s"] = upd["rows_per_s"] * a.dim * 4 / 1e6
            r["update_ack_us"] = upd["ack_us"]
            r["update_visible_us"] = {"p50": quantile(before, after, 0.5) * 1e6,
                                      "p99": quantile(before, after, 0.99) * 1e6}

            peak = bench(a.client, port, [f"--ids_per_request={a.lookup_ids}",
                                          f"--concurrency={a.peak_concurrency}",
                                          "--connections=4", f"--duration={seconds}"])
            half = peak["rps"] / 2
            r["lookup_peak_rps"] = peak["rps"]
            open_loop = [f"--ids_per_request={a.lookup_ids}", f"--rps={half:.0f}",
                         "--connections=4", f"--duration={seconds}"]
            alone = bench(a.client, port, open_loop)
            writer = subprocess.Popen(
                [a.update_load, f"--target=127.0.0.1:{port}", f"--admin_target=127.0.0.1:{admin}",
                 f"--rows_per_message={a.rows_per_message}", f"--window={a.window}",
                 f"--rows_per_second={a.update_rate}", f"--duration_s={a.duration + 2}"],
                stdout=subprocess.PIPE, text=True)
            beside = bench(a.client, port, open_loop)
            steady = json.loads(writer.communicate()[0].strip().splitlines()[-1])
            r["lookup_rps"] = half
            r["lookup_p99_us_alone"] = alone["latency_us"]["p99"]
            r["lookup_p99_us_with_updates"] = beside["latency_us"]["p99"]
            r["lookup_p50_us_alone"] = alone["latency_us"]["p50"]
            r["lookup_p50_us_with_updates"] = beside["latency_us"]["p50"]
            r["steady_update_rows_per_s"] = steady["rows_per_s"]
            r["p99_ratio"] = r["lookup_p99_us_with_updates"] / r["lookup_p99_us_alone"]
        finally:
            server.stop()

    print(f"row updates, {a.rows} x {a.dim} float32 on {a.device}, "
          f"{a.rows_per_message} rows a message, {a.window} in flight")
    print(f"  reference: lookups of {a.rows_per_message} rows  "
          f"{r['reference_lookup_rows_per_s']:>12,.0f} rows/s  "
          f"{r['reference_lookup_mb_per_s']:>8,.0f} MB/s")
    print(f"  updates, one stream              {r['update_rows_per_s']:>12,.0f} rows/s  "
          f"{r['update_mb_per_s']:>8,.0f} MB/s   send->answer p50 {r['update_ack_us']['p50']:,.0f} "
          f"p99 {r['update_ack_us']['p99']:,.0f} us;  arrival->visible p50 <= "
          f"{r['update_visible_us']['p50']:,.0f} p99 <= {r['update_visible_us']['p99']:,.0f} us")
    print(f"  lookups of {a.lookup_ids} ids: peak {r['lookup_peak_rps']:,.0f}/s; at half "
          f"({half:,.0f}/s) p99 {r['lookup_p99_us_alone']:,.0f} us alone, "
          f"{r['lookup_p99_us_with_updates']:,.0f} us beside {r['steady_update_rows_per_s']:,.0f} "
          f"update rows/s (x{r['p99_ratio']:.2f})")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
