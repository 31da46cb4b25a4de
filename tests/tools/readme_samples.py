"""Runs the marked samples of README.md and docs/*.md, so that what they show cannot rot.

A sample is the code block right after a line `<!-- readme_check: ... -->`. Its lines, with
backslash continuations joined, are, in order:
  - `embedding-client ...` or `build/client/embedding-client ...`: run with CLIENT, its target the
    server of the block (--target is put first, so a target in the line wins); the lines under it
    that start with `# ` are output it must print, in that order among its lines (whitespace runs
    compared as one space; a line ending in `...` is a prefix). It must exit 0.
  - `scripts/serve ...`: stops the block's server (SIGTERM) and starts SERVER with the line's
    flags, as scripts/serve does: --grpc_address and --metrics_address on loopback, here on free
    ports, --device=cpu and --drain_seconds=0 first, so the line's own flags win. A block without
    one calls a server started as a bare `scripts/serve` (the seeded 100000 x 128 demo table).
  - `mkdir ...` or `python3 ...`: run by bash (python3 is Debian's /usr/bin/python3).
  - anything else (grpcurl, ghz, ...) is skipped, saying so.
In every line, /tmp/emb becomes a folder of WORK, and an address HOST:PORT that a `scripts/serve`
line of the block gave for a port (--grpc_address, --metrics_address, --admin_address) becomes
the port its server really listens on.
    readme_samples.py ROOT SERVER CLIENT WORK
"""
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import time

ROOT, SERVER, CLIENT, WORK = sys.argv[1:]
os.makedirs(WORK, exist_ok=True)
EMB = os.path.join(WORK, "emb")
MARK = re.compile(r"^<!-- readme_check:.*-->$")
LOG_PORTS = {  # the flag, and how the server's log names the address it got
    "grpc_address": r"gRPC listening on [^ ]*:(\d+)",
    "metrics_address": r"metrics on http://[^ ]*:(\d+)/metrics",
    "admin_address": r"admin service \(UpdateRows\) on [^ ]*:(\d+),",
}


def blocks(path):
    """(line number, [lines]) of each marked code block of `path`."""
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        if MARK.match(line.strip()):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"FAIL: {path}:{i + 1}: a readme_check mark not before a block")
            end = lines.index("```", i + 2)
            joined, body = "", []
            for l in lines[i + 2:end]:
                joined += l[:-1] if l.endswith("\\") else l
                if not l.endswith("\\"):
                    body.append(joined)
                    joined = ""
            yield i + 1, body


class Server:
    def __init__(self, args, n):
        self.log = os.path.join(WORK, f"server.{n}.log")
        self.proc = subprocess.Popen(
            [SERVER, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
             "--device=cpu", "--drain_seconds=0"] + args,
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        for _ in range(600):
            text = open(self.log).read()
            if "health SERVING" in text:
                break
            if self.proc.poll() is not None:
                raise SystemExit(f"FAIL: the server exited:\n{text}")
            time.sleep(0.1)
        else:
            raise SystemExit(f"FAIL: the server is not serving:\n{text}")
        self.ports = {flag: re.search(p, text)[1] for flag, p in LOG_PORTS.items()
                      if re.search(p, text)}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def matches(expected, actual):
    """Whether the lines `expected` are among `actual`, in order."""
    norm = lambda s: " ".join(s.split())
    it = iter(actual)
    for e in expected:
        e = norm(e)
        prefix = e[:-3].rstrip() if e.endswith("...") else None
        if not any((norm(a).startswith(prefix) if prefix is not None else norm(a) == e)
                   for a in it):
            return False
    return True


def run_block(where, body, n):
    failures, server, mapping, count = [], None, {}, 0
    if not any(l.startswith("scripts/serve") for l in body):
        server = Server([], f"{n}.0")
    i = 0
    try:
        while i < len(body):
            line = body[i].replace("/tmp/emb", EMB)
            expected = []
            while i + 1 < len(body) and body[i + 1].startswith("# "):
                expected.append(body[i + 1][2:].replace("/tmp/emb", EMB))
                i += 1
            i += 1
            if not line.strip() or line.startswith("#"):
                continue
            if not line.startswith("scripts/serve"):
                for readme_addr, real in mapping.items():
                    line = line.replace(readme_addr, real)
            words = shlex.split(line, comments=True)
            if words[0] == "scripts/serve":
                if server:
                    server.stop()
                given = {}
                for k, w in enumerate(words[1:], 1):
                    m = re.match(r"--(\w+_address)=(.*):(\d+)$", w)
                    if m and m[1] in LOG_PORTS:
                        given[m[1]] = m[3]
                        words[k] = f"--{m[1]}=127.0.0.1:0"
                count += 1
                server = Server(words[1:], f"{n}.{count}")
                mapping = {}
                for flag, port in given.items():
                    for host in ("localhost", "127.0.0.1"):
                        mapping[f"{host}:{port}"] = f"127.0.0.1:{server.ports[flag]}"
            elif words[0] in ("embedding-client", "build/client/embedding-client"):
                cmd = [CLIENT, f"--target=127.0.0.1:{server.ports['grpc_address']}"] + words[1:]
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=60)
                if r.returncode != 0:
                    failures.append(f"{where}: `{line}` exited {r.returncode}:\n{r.stdout}")
                elif not matches(expected, r.stdout.splitlines()):
                    failures.append(f"{where}: `{line}` printed\n{r.stdout[:3000]}\n"
                                    "which lacks the lines shown:\n" + "\n".join(expected))
                count += 1
            elif words[0] in ("mkdir", "python3"):
                line = re.sub(r"(^|&& )python3 ", r"\1/usr/bin/python3 ", line)
                r = subprocess.run(["bash", "-c", line], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=60)
                if r.returncode != 0:
                    failures.append(f"{where}: `{line}` exited {r.returncode}:\n{r.stdout}")
            else:
                print(f"{where}: skipped (not run here): {line}")
    finally:
        if server:
            server.stop()
    return failures, count


def main():
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    failures, samples, commands = [], 0, 0
    for page in pages:
        for number, body in blocks(page):
            where = f"{os.path.relpath(page, ROOT)}:{number}"
            f, c = run_block(where, body, samples)
            failures += f
            samples += 1
            commands += c
    readme_samples = sum(1 for _ in blocks(os.path.join(ROOT, "README.md")))
    if readme_samples < 2:
        failures.append(f"README.md has {readme_samples} marked samples: the quick start's two "
                        "blocks should be")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    if failures:
        return 1
    print(f"samples: {samples} blocks, {commands} commands, as the pages show them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
