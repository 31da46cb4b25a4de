"""A server under a benchmark: the embedding-server binary started on loopback ports, its log in a
file, its /metrics read as a dict, its CPU time. Shared by the benchmarks under bench/ (imported
after putting this folder on sys.path)."""

import os
import re
import subprocess
import sys
import time
import urllib.request


class Server:
    def __init__(self, binary, args, log_path, prefix=()):
        """`prefix`: words before the binary, e.g. ("taskset", "-c", "0-7")."""
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            list(prefix) + [binary, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"]
            + args,
            stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 600
        while "health SERVING" not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the server did not start:\n{self.text()}")
            time.sleep(0.1)
        text = self.text()
        self.grpc_port = int(re.search(r"gRPC listening on [^ ]*:(\d+)", text).group(1))
        self.metrics_port = int(re.search(r"metrics on http://[^ ]*:(\d+)/metrics", text).group(1))
        admin = re.search(r"admin service \(UpdateRows\) on [^ ]*:(\d+),", text)
        self.admin_port = int(admin.group(1)) if admin else 0

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def metrics(self):
        text = urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30).read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                values[key] = float(value)
        return values

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
