"""Hostile HTTP/2 clients against the hardened front (deploy/proxy/nghttpx.conf) and, for the
figure before it, against the server itself (tests/deploy/proxy_check.sh runs this).

  proxy_check.py PROXY_PORT PROXY_PID SERVER_PORT SERVER_PID CLIENT CAP

PROXY_PID is nghttpx's main process (its worker is a child: both are counted); CLIENT is
embedding-client, the good caller; CAP the
proxy's worker-frontend-connections. The frames are written by hand (no HTTP/2 library would send
them): a header block is literal fields without indexing, which needs no HPACK state.

  streams     200 streams opened on one connection that never acknowledges SETTINGS: the proxy
              advertises and keeps its limit (the first 128 open, the other 72 REFUSED_STREAM),
              then ends the connection for its missing SETTINGS acknowledgement.
  continuation  CONTINUATION floods (HEADERS without END_HEADERS, then 16 KiB CONTINUATION
              frames in a loop, no SETTINGS acknowledgement), one connection after another for
              FLOOD_S: the proxy closes each within a second, neither process grows past its
              bound, and a good caller is served throughout.
  rapid_reset HEADERS, DATA, RST_STREAM in a loop on one connection: the proxy ends it (libnghttp2's
              reset rate limit) and a good caller is served.
  connections the proxy's connection cap (worker-frontend-connections, read from the config):
              one more connection is refused, and a good caller is served once they close.
  direct      (informational) the same CONTINUATION flood straight at the server for DIRECT_S:
              how fast it grows (gRPC 1.51 carries no fix). Run last: the server keeps that memory.
"""
import os
import re
import resource
import select
import socket
import struct
import subprocess
import sys
import threading
import time

FLOOD_S = 5.0
DIRECT_S = 3.0
# Bounds on growth of resident memory during the flood through the proxy (VmRSS, sampled every
# 20 ms). Measured: the server grows by well under 1 MB, nghttpx (main + worker) by about 1 MB.
SERVER_GROWTH_BOUND = 32 << 20
PROXY_GROWTH_BOUND = 32 << 20
PROXY_RSS_BOUND = 64 << 20
LOOKUP_PATH = b"/embedding.v1.EmbeddingService/LookUp"

DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY, CONTINUATION = 0x0, 0x1, 0x3, 0x4, 0x7, 0x9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
NO_ERROR, SETTINGS_TIMEOUT, REFUSED_STREAM, CANCEL = 0x0, 0x4, 0x7, 0x8
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out = bytearray([limit])
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A header field as HPACK's literal without indexing, new name (RFC 7541, 6.2.2)."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


REQUEST_BLOCK = b"".join(literal(n, v) for n, v in [
    (b":method", b"POST"), (b":scheme", b"http"), (b":path", LOOKUP_PATH),
    (b":authority", b"localhost"), (b"content-type", b"application/grpc"), (b"te", b"trailers")])
FLOOD_FRAGMENT = frame(CONTINUATION, 0, 1, literal(b"x-flood", b"a" * 16000))


def lookup_message(ids):
    packed = b"".join(bytes([i]) for i in ids)  # ids < 128: one varint byte each
    message = b"\x12" + bytes([len(packed)]) + packed  # LookUpRequest.ids, packed
    return b"\x00" + struct.pack(">I", len(message)) + message


class Frames:
    """Reads the peer's frames from a socket; `closed` once it ends the connection."""

    def __init__(self, sock):
        self.sock, self.buf, self.closed = sock, b"", False

    def read(self, timeout):
        """Frames that arrive within `timeout` seconds (stops early at end of connection)."""
        deadline = time.monotonic() + timeout
        out = []
        while not self.closed and time.monotonic() < deadline:
            ready, _, _ = select.select([self.sock], [], [], min(0.05, deadline - time.monotonic()))
            if ready:
                try:
                    data = self.sock.recv(1 << 16)
                except ConnectionResetError:
                    data = b""
                if not data:
                    self.closed = True
                self.buf += data
            while len(self.buf) >= 9 and len(self.buf) >= 9 + int.from_bytes(self.buf[:3], "big"):
                n = int.from_bytes(self.buf[:3], "big")
                kind, flags = self.buf[3], self.buf[4]
                stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                out.append((kind, flags, stream, self.buf[9:9 + n]))
                self.buf = self.buf[9 + n:]
        return out


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))  # our SETTINGS; theirs is never acknowledged
    return sock


def rss(pid):
    """VmRSS of `pid` in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)[1]) * 1024
    except (OSError, TypeError):
        return 0


def process_tree(pid):
    """`pid` and its children (nghttpx's main process and its worker)."""
    pids = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def tree_rss(pids):
    return sum(rss(p) for p in pids)


class Sampler(threading.Thread):
    """Samples a set of processes' total RSS every 20 ms until stopped; keeps the peak."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak, self.stop = pids, tree_rss(pids), threading.Event()

    def run(self):
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, tree_rss(self.pids))


class GoodCaller(threading.Thread):
    """Calls LookUp through `target` with embedding-client, one call after another, until
    stopped; counts answers and failures (the last failure's message kept)."""

    def __init__(self, client, target):
        super().__init__(daemon=True)
        self.args = [client, f"--target={target}", "--timeout=5s", "lookup", "1", "2", "3"]
        self.ok, self.failed, self.error, self.stop = 0, 0, "", threading.Event()

    def run(self):
        while not self.stop.is_set():
            r = subprocess.run(self.args, capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and r.stdout.startswith("shape [3, "):
                self.ok += 1
            else:
                self.failed += 1
                self.error = (r.stderr or r.stdout).strip()[-300:]

    def finish(self):
        self.stop.set()
        self.join(60)
        return self.ok, self.failed


def one_call(client, target):
    r = subprocess.run([client, f"--target={target}", "--timeout=5s", "lookup", "1", "2", "3"],
                       capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and r.stdout.startswith("shape [3, ")


def streams(proxy_port):
    opened = time.monotonic()
    sock = connect(proxy_port)
    reader = Frames(sock)
    sock.sendall(b"".join(frame(HEADERS, END_HEADERS, 2 * i + 1, REQUEST_BLOCK) for i in range(200)))
    # No request ends (no END_STREAM): every stream the proxy accepts stays open at the server.
    got = reader.read(1.0)
    limit = None
    for kind, flags, _, payload in got:
        if kind == SETTINGS and not flags & ACK:
            fields = {int.from_bytes(payload[i:i + 2], "big"): int.from_bytes(payload[i + 2:i + 6], "big")
                      for i in range(0, len(payload), 6)}
            limit = fields.get(SETTINGS_MAX_CONCURRENT_STREAMS)
    refused = sorted(s for k, _, s, p in got if k == RST_STREAM and int.from_bytes(p, "big") == REFUSED_STREAM)
    check(limit == 128, f"streams: the proxy advertises SETTINGS_MAX_CONCURRENT_STREAMS {limit} (want 128)")
    check(len(refused) == 72 and refused[0] == 2 * 128 + 1,
          f"streams: of 200 streams on one connection that never acknowledges SETTINGS, "
          f"{len(refused)} were refused with REFUSED_STREAM from stream {refused[:1]} on "
          "(want 72, from the 129th, stream 257)")
    other = [(k, s) for k, _, s, p in got if k == RST_STREAM and int.from_bytes(p, "big") != REFUSED_STREAM]
    check(not other, f"streams: the 128 streams within the limit stay open (other resets: {other[:5]})")
    rest = reader.read(10.0)
    goaway = [p for k, _, _, p in rest if k == GOAWAY]
    code = int.from_bytes(goaway[0][4:8], "big") if goaway else None
    check(reader.closed and code == SETTINGS_TIMEOUT,
          f"streams: the proxy ends the connection {time.monotonic() - opened:.1f} s after it "
          f"opened, with GOAWAY {code} (want SETTINGS_TIMEOUT, 4, within 5 s of its SETTINGS)")
    sock.close()


def flood_once(port, deadline):
    """One CONTINUATION flood until the peer closes or `deadline`; (bytes sent, seconds to close
    or None)."""
    sock = connect(port)
    start = time.monotonic()
    sock.sendall(frame(HEADERS, 0, 1, REQUEST_BLOCK))  # no END_HEADERS: a header block begins
    sock.setblocking(False)
    sent = 0
    chunk = FLOOD_FRAGMENT * 4
    try:
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 0.05)
            if readable:
                try:
                    while sock.recv(1 << 16):
                        pass
                    return sent, time.monotonic() - start  # end of connection
                except BlockingIOError:
                    pass
            if writable:
                try:
                    sent += sock.send(chunk)
                except BlockingIOError:
                    pass
    except (BrokenPipeError, ConnectionResetError):
        return sent, time.monotonic() - start
    finally:
        sock.close()
    return sent, None


def continuation(proxy_port, proxy_pids, server_pid, client):
    server_before, proxy_before = rss(server_pid), tree_rss(proxy_pids)
    samplers = [Sampler([server_pid]), Sampler(proxy_pids)]
    for s in samplers:
        s.start()
    caller = GoodCaller(client, f"127.0.0.1:{proxy_port}")
    caller.start()
    deadline = time.monotonic() + FLOOD_S
    closes, open_at_end, sent = [], 0, 0
    while time.monotonic() < deadline:
        started = time.monotonic()
        n, took = flood_once(proxy_port, deadline)
        sent += n
        if took is not None:
            closes.append(took)
        elif deadline - started > 1.0:  # not just cut short by the end of the flood
            open_at_end += 1
    ok, failed = caller.finish()
    for s in samplers:
        s.stop.set()
        s.join()
    server_peak, proxy_peak = samplers[0].peak, samplers[1].peak
    print(f"continuation flood through the proxy, {FLOOD_S:.0f} s: {len(closes)} connections, "
          f"{sent / 1e6:.0f} MB written to their sockets; server RSS {server_before / 1e6:.1f} -> peak "
          f"{server_peak / 1e6:.1f} MB, proxy RSS {proxy_before / 1e6:.1f} -> peak "
          f"{proxy_peak / 1e6:.1f} MB; good calls {ok} OK, {failed} failed", flush=True)
    check(closes and open_at_end == 0 and max(closes) < 1.0,
          f"continuation: the proxy closed every flood connection ({len(closes)}, slowest after "
          f"{max(closes, default=0) * 1e3:.1f} ms; {open_at_end} open for over a second)")
    check(server_peak - server_before < SERVER_GROWTH_BOUND,
          f"continuation: the server grew by {(server_peak - server_before) / 1e6:.1f} MB "
          f"(bound {SERVER_GROWTH_BOUND >> 20} MiB)")
    check(proxy_peak - proxy_before < PROXY_GROWTH_BOUND and proxy_peak < PROXY_RSS_BOUND,
          f"continuation: the proxy grew by {(proxy_peak - proxy_before) / 1e6:.1f} MB to "
          f"{proxy_peak / 1e6:.1f} MB (bounds {PROXY_GROWTH_BOUND >> 20} MiB growth, "
          f"{PROXY_RSS_BOUND >> 20} MiB in all)")
    check(ok >= 1 and failed == 0,
          f"continuation: a good caller was served during the flood ({ok} OK, {failed} failed"
          + (f"; last: {caller.error}" if failed else "") + ")")
    check(one_call(client, f"127.0.0.1:{proxy_port}"), "continuation: and after it")


def rapid_reset(proxy_port, client):
    sock = connect(proxy_port)
    reader = Frames(sock)
    message = lookup_message([1, 2])
    stream, deadline = 1, time.monotonic() + 10
    try:
        while not reader.closed and time.monotonic() < deadline:
            batch = b""
            for _ in range(100):
                batch += (frame(HEADERS, END_HEADERS, stream, REQUEST_BLOCK)
                          + frame(DATA, END_STREAM, stream, message)
                          + frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL)))
                stream += 2
            sock.sendall(batch)
            reader.read(0)
    except (BrokenPipeError, ConnectionResetError):
        pass
    got = reader.read(2.0)
    goaway = [p for k, _, _, p in got if k == GOAWAY]
    last = int.from_bytes(goaway[0][:4], "big") & 0x7FFFFFFF if goaway else None
    sock.close()
    check(bool(goaway) and last is not None and last < 4000,
          f"rapid_reset: the proxy sent GOAWAY (last stream {last}) after {stream // 2} streams "
          "were opened and reset (libnghttp2's reset rate limit: a burst of 1,000)")
    check(one_call(client, f"127.0.0.1:{proxy_port}"), "rapid_reset: a good caller is served after it")


def connections(proxy_port, cap, client):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = cap + 64
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    if min(need, hard) < need:
        print(f"skip: connections: the open-files limit {hard} is below the cap {cap} + 64")
        return
    held = []
    try:
        for _ in range(cap):
            s = socket.create_connection(("127.0.0.1", proxy_port), timeout=5)
            s.sendall(PREFACE + frame(SETTINGS, 0, 0))
            held.append(s)
        # Each held connection has been accepted once the proxy has sent it its SETTINGS.
        for s in held:
            s.settimeout(5)
            s.recv(9)
        extra = socket.create_connection(("127.0.0.1", proxy_port), timeout=5)
        extra.sendall(PREFACE + frame(SETTINGS, 0, 0))
        extra.settimeout(5)
        try:
            refused = extra.recv(1 << 16) == b""
        except (ConnectionResetError, socket.timeout):
            refused = True
        extra.close()
        check(refused, f"connections: with {cap} connections open, one more is closed at once")
    finally:
        for s in held:
            s.close()
    # The proxy notices the closed connections on its next loop; a good caller is then served.
    deadline = time.monotonic() + 10
    while not one_call(client, f"127.0.0.1:{proxy_port}"):
        if time.monotonic() > deadline:
            check(False, "connections: no good call served within 10 s of closing them")
            return
        time.sleep(0.1)
    check(True, "connections: once they close, a good caller is served")


def direct(server_port, server_pid):
    before = rss(server_pid)
    start = time.monotonic()
    sent, took = flood_once(server_port, start + DIRECT_S)
    elapsed = time.monotonic() - start
    after = rss(server_pid)
    print(f"informational: the same flood straight at the server for {elapsed:.1f} s: "
          f"{sent / 1e6:.0f} MB written, the connection "
          + ("stayed open" if took is None else f"closed after {took:.1f} s")
          + f"; server RSS {before / 1e6:.0f} -> {after / 1e6:.0f} MB, "
          f"{(after - before) / 1e6 / elapsed:.0f} MB/s", flush=True)


def main(argv):
    if len(argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    proxy_port, proxy_pid, server_port, server_pid = (int(a) for a in argv[1:5])
    client, cap = argv[5], int(argv[6])
    proxy_pids = process_tree(proxy_pid)
    check(len(proxy_pids) == 2, f"nghttpx runs as a main process and one worker ({proxy_pids})")
    streams(proxy_port)
    continuation(proxy_port, proxy_pids, server_pid, client)
    rapid_reset(proxy_port, client)
    connections(proxy_port, cap, client)
    direct(server_port, server_pid)
    if failures:
        print(f"FAIL: {len(failures)} check(s) failed (above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
