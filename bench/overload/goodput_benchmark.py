#!/usr/bin/env python3
"""Goodput under overload (issue 21, item 6): answers received within their deadline, with the
server's admission by deadline on and off, measured with the real ghz.

For each server mode (--deadline_admission_fraction=F, and 0 for off) it starts the server on
loopback, then:
  1. finds the peak: closed-loop ghz at each --peak_concurrency, every call with --timeout, and
     takes the best rate of OK answers (answers that arrive after the deadline are errors to
     ghz, so OK means in time);
  2. overloads it: --overload_concurrency callers over --connections connections with the same
     deadline, closed loop (every caller sends again at once, as in the issue), and open loop at
     --overload_factor times the peak rate (ghz --rps);
and prints one row per run: offered calls/s, goodput (OK/s), goodput against the peak of the
same run, the codes the callers got, the OK answers' p50 and p99, and the server's own counts
(LookUps answered OK, late answers, calls refused as would-be-late, deadline drops).

  goodput_benchmark.py SERVER GHZ [--device=cuda] [--dim=768] [--ids=256] [--timeout=250ms]
      [--duration=15] [--json=FILE] [-- extra server flags]
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from local_server import Server  # noqa: E402

METHOD = "embedding.v1.EmbeddingService/LookUp"


def server_counts(m):
    """The server's own view: LookUps answered OK, late answers, would-be-late refusals (calls),
    deadline drops in the queue."""
    def total(pattern):
        return sum(v for k, v in m.items() if re.fullmatch(pattern, k))
    return {
        "server_ok": total(r'grpc_server_handled_total\{.*grpc_code="OK".*grpc_method="LookUp".*\}'
                           r'|grpc_server_handled_total\{.*grpc_method="LookUp".*grpc_code="OK".*\}'),
        "late_answers": total(r"embedding_late_answers_total\{.*\}"),
        "refused_late_ids": total(r'embedding_rejected_ids_total\{.*reason="would_be_late".*\}'),
        "deadline_drops": total(r'embedding_dropped_requests_total\{.*reason="deadline".*\}'),
    }


def ghz(binary, port, ids, concurrency, connections, duration, timeout, rps=0, prefix=()):
    data = json.dumps({"ids": ids})
    cmd = list(prefix) + [binary, "--insecure", "--call", METHOD, "-d", data,
                          "-c", str(concurrency), "--connections", str(connections),
                          "-z", f"{duration}s", "--duration-stop=wait", "-t", timeout,
                          "-O", "json", f"127.0.0.1:{port}"]
    if rps:
        cmd += ["--rps", str(int(rps))]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.DEVNULL, check=False)
        out.seek(0)
        report = json.load(out)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = report["total"] / 1e9
    ghz_cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / seconds
    codes = report.get("statusCodeDistribution") or {}
    ok = codes.get("OK", 0)
    lat = {d["percentage"]: d["latency"] / 1e6 for d in report.get("latencyDistribution") or []}
    return {
        "calls": report["count"], "seconds": seconds, "offered_per_s": report["count"] / seconds,
        "ok": ok, "goodput_per_s": ok / seconds, "codes": codes,
        "ok_p50_ms": lat.get(50), "ok_p99_ms": lat.get(99), "ghz_cores": ghz_cpu,
    }


def delta(after, before):
    return {k: after[k] - before.get(k, 0) for k in after}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("server")
    p.add_argument("ghz")
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--ids", type=int, default=256)
    p.add_argument("--timeout", default="250ms")
    p.add_argument("--duration", type=float, default=15)
    p.add_argument("--peak_duration", type=float, default=8)
    p.add_argument("--peak_concurrency", default="64,256,1024")
    p.add_argument("--overload_concurrency", type=int, default=4096)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--overload_factor", type=float, default=10)
    p.add_argument("--modes", default="0.5,0",
                   help="server modes to run, each a --deadline_admission_fraction (0: admission "
                        "off), with ':hold' for --hold_late_calls")
    p.add_argument("--json", help="append one JSON record per run to this file")
    p.add_argument("--log_dir", help="keep each server's log in this folder")
    p.add_argument("--server_cpus", default="",
                   help="CPUs the server runs on (taskset -c LIST); empty: any")
    p.add_argument("--ghz_cpus", default="", help="CPUs ghz runs on (taskset -c LIST); empty: any")
    p.add_argument("--server_flags", default="",
                   help="more flags for the server, space-separated")
    p.add_argument("server_args", nargs="*")
    a = p.parse_args()
    ids = [(i * 7919) % a.rows for i in range(a.ids)]
    server_prefix = ("taskset", "-c", a.server_cpus) if a.server_cpus else ()
    ghz_prefix = ("taskset", "-c", a.ghz_cpus) if a.ghz_cpus else ()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = a.log_dir or tmp
        for mode in a.modes.split(","):
            fraction, _, hold = mode.partition(":")
            flags = [f"--deadline_admission_fraction={fraction}"]
            if hold:
                flags.append("--hold_late_calls")
            server = Server(a.server, [f"--demo_table={a.rows}x{a.dim}", f"--device={a.device}"]
                            + flags + a.server_args + a.server_flags.split(),
                            os.path.join(tmp, f"server-{mode}.log"),
                            server_prefix)
            mode = f"admit {mode}" if float(fraction) > 0 else "admission off"
            try:
                runs = []
                peak = 0.0
                for c in [int(x) for x in a.peak_concurrency.split(",")]:
                    before, cpu = server_counts(server.metrics()), server.cpu_seconds()
                    r = ghz(a.ghz, server.grpc_port, ids, c, min(c, a.connections),
                            a.peak_duration, a.timeout, prefix=ghz_prefix)
                    r.update(delta(server_counts(server.metrics()), before))
                    r["server_cores"] = (server.cpu_seconds() - cpu) / r["seconds"]
                    r.update(run=f"peak c={c}", mode=mode)
                    peak = max(peak, r["goodput_per_s"])
                    runs.append(r)
                overloads = [("closed loop", 0), (f"open {a.overload_factor:g}x peak",
                                                   a.overload_factor * peak)]
                for name, rps in overloads:
                    before, cpu = server_counts(server.metrics()), server.cpu_seconds()
                    r = ghz(a.ghz, server.grpc_port, ids, a.overload_concurrency, a.connections,
                            a.duration, a.timeout, rps, prefix=ghz_prefix)
                    r.update(delta(server_counts(server.metrics()), before))
                    r["server_cores"] = (server.cpu_seconds() - cpu) / r["seconds"]
                    r.update(run=f"c={a.overload_concurrency} {name}", mode=mode)
                    runs.append(r)
                for r in runs:
                    r["peak_per_s"] = peak
                    r["of_peak"] = r["goodput_per_s"] / peak if peak else 0
                rows += runs
            finally:
                server.stop()
    print(f"Goodput: {a.ids} ids x {a.dim} float32 a call, deadline {a.timeout}, "
          f"{a.connections} connections, device {a.device}")
    head = (f"{'mode':<15} {'run':<28} {'offered/s':>10} {'OK/s':>9} {'of peak':>8} "
            f"{'p50 ms':>7} {'p99 ms':>7} {'srv OK':>8} {'late':>7} {'refused':>8} "
            f"{'cores s/g':>9} codes")
    print(head)
    print("-" * len(head))
    for r in rows:
        codes = ", ".join(f"{k} {v}" for k, v in sorted(r["codes"].items()))
        p50 = f"{r['ok_p50_ms']:.1f}" if r["ok_p50_ms"] is not None else "-"
        p99 = f"{r['ok_p99_ms']:.1f}" if r["ok_p99_ms"] is not None else "-"
        print(f"{r['mode']:<15} {r['run']:<28} {r['offered_per_s']:>10.0f} "
              f"{r['goodput_per_s']:>9.0f} {r['of_peak']:>8.2f} {p50:>7} {p99:>7} "
              f"{r['server_ok']:>8.0f} {r['late_answers']:>7.0f} "
              f"{r['refused_late_ids'] / a.ids:>8.0f} "
              f"{r['server_cores']:>4.1f}/{r['ghz_cores']:<4.1f} {codes}")
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, ids=a.ids, dim=a.dim, timeout=a.timeout,
                                        device=a.device)) + "\n")


if __name__ == "__main__":
    main()
