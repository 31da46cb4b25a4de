"""One closed-loop ghz run of LookUp against a local server, summarised: the calls, the OK ones,
the seconds, the status codes and p50/p99 in ms. Shared by the service benchmarks under bench/
that read the same summary (imported after putting this folder on sys.path)."""

import json
import subprocess
import tempfile

METHOD = "embedding.v1.EmbeddingService/LookUp"


def run(binary, port, data_path, concurrency, duration, max_recv="256MB", method=METHOD):
    """ghz at `concurrency` callers over min(concurrency, 8) connections for `duration` seconds,
    sending the JSON request(s) in `data_path` (an array: round robin) to `method`."""
    cmd = [binary, "--insecure", "--call", method, "-D", data_path, "-c", str(concurrency),
           "--connections", str(min(concurrency, 8)), "-z", f"{duration}s",
           "--duration-stop=wait", "-t", "20s",
           "--max-recv-message-size", max_recv, "-O", "json", f"127.0.0.1:{port}"]
    with tempfile.TemporaryFile() as out:
        subprocess.run(cmd, stdout=out, stderr=subprocess.DEVNULL, check=False)
        out.seek(0)
        report = json.load(out)
    codes = report.get("statusCodeDistribution") or {}
    lat = {d["percentage"]: d["latency"] / 1e6 for d in report.get("latencyDistribution") or []}
    return {"calls": report["count"], "ok": codes.get("OK", 0), "seconds": report["total"] / 1e9,
            "codes": codes, "p50_ms": lat.get(50), "p99_ms": lat.get(99)}
