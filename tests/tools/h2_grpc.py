"""A raw HTTP/2 gRPC client on Python's h2, for the checks that send what gRPC's own clients
never do: no SETTINGS acknowledgement, no flow-control credit, streams reset right after their
request. Also what those checks share: the server's metrics and resident memory, read from
outside, and waiting on a condition with a deadline."""

import re
import select
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.request

import h2.config
import h2.connection
import h2.events
import h2.exceptions

LOOKUP_PATH = "/embedding.v1.EmbeddingService/LookUp"


def _varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def lookup_request(ids):
    """A LookUpRequest { ids } as a gRPC message: the 5-byte prefix, then the packed ids."""
    packed = b"".join(_varint(i) for i in ids)
    message = b"\x12" + _varint(len(packed)) + packed  # field 2 (ids), length-delimited
    return struct.pack(">BI", 0, len(message)) + message


class Stream:
    """What came back on one stream: its headers, DATA bytes, trailers and reset."""

    def __init__(self):
        self.headers = {}
        self.trailers = {}
        self.data = 0
        self.reset = False

    def grpc_status(self):
        """The gRPC status code (int) from the trailers or a trailers-only answer, else None."""
        value = self.trailers.get("grpc-status", self.headers.get("grpc-status"))
        return None if value is None else int(value)

    def grpc_message(self):
        return self.trailers.get("grpc-message", self.headers.get("grpc-message", ""))


class RawConnection:
    """One HTTP/2 connection to the server on loopback.

    With ack_settings False, the server's SETTINGS frame is never acknowledged, so the server's
    SETTINGS_MAX_CONCURRENT_STREAMS never binds this client (nor does this client honour it).
    Received DATA is never credited back (no WINDOW_UPDATE): the server can send at most the
    initial 65,535 bytes of answers on the connection, and holds the rest."""

    def __init__(self, port, ack_settings=True, tls=None):
        """`tls`: an ssl.SSLContext for a TLS port (ALPN h2 is set here), else plaintext."""
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.scheme = "http"
        if tls is not None:
            tls.set_alpn_protocols(["h2"])
            self.sock = tls.wrap_socket(self.sock, server_hostname="localhost")
            self.scheme = "https"
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        if not ack_settings:
            # h2 acknowledges (and only then applies) the peer's settings here; this client never
            # does either.
            self.conn._acknowledge_settings = lambda: []
        self.conn.initiate_connection()
        self.streams = {}
        self.closed = False
        self._pong = None
        self._flush()

    def _flush(self):
        data = self.conn.data_to_send()
        if data and not self.closed:
            try:
                self.sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                self.closed = True

    def start_lookup(self, message, end_stream=True, headers=()):
        """Opens a LookUp stream with `message` (from lookup_request) and any further `headers`
        (such as ("grpc-timeout", "300m")); returns its stream id."""
        return self.start_call(LOOKUP_PATH, message, end_stream, headers)

    def start_call(self, path, data, end_stream=True, headers=()):
        """Opens a stream calling `path` (such as "/embedding.v1.EmbeddingService/LookUp") and
        sends `data`, gRPC's message framing included; returns its stream id."""
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [
            (":method", "POST"), (":scheme", self.scheme), (":path", path),
            (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"),
        ] + list(headers))
        if data or end_stream:
            self.conn.send_data(sid, data, end_stream=end_stream)
        self.streams[sid] = Stream()
        return sid

    def send_data(self, sid, data):
        """Sends `data` on stream `sid` (open), as far as flow control allows now; returns the
        bytes sent."""
        n = min(len(data), self.conn.local_flow_control_window(sid),
                self.conn.max_outbound_frame_size)
        if n > 0:
            self.conn.send_data(sid, data[:n])
            self._flush()
        return n

    def reset(self, sid):
        """Resets stream `sid` (CANCEL), unless the server has already ended it."""
        try:
            self.conn.reset_stream(sid, error_code=8)
        except h2.exceptions.StreamClosedError:
            return
        self.streams[sid].reset = True

    def send(self):
        """Sends what h2 has queued."""
        self._flush()

    def outbound_window(self):
        return self.conn.outbound_flow_control_window

    def wait_for_window(self, size, timeout):
        """Reads the server's frames until the connection lets `size` more bytes be sent."""
        deadline = time.monotonic() + timeout
        while self.conn.outbound_flow_control_window < size:
            if self.closed or time.monotonic() > deadline:
                raise TimeoutError(f"no flow-control window for {size} bytes in {timeout} s")
            select.select([self.sock], [], [], 0.05)
            self.read_available()

    def round_trip(self, timeout):
        """Sends a PING and reads until its ACK: the server has then read every frame before it."""
        payload = struct.pack(">Q", int(time.monotonic_ns()))
        self._pong = None
        self.conn.ping(payload)
        self._flush()
        deadline = time.monotonic() + timeout
        while self._pong != payload:
            if self.closed or time.monotonic() > deadline:
                raise TimeoutError(f"no PING ACK in {timeout} s")
            select.select([self.sock], [], [], 0.05)
            self.read_available()

    def read_available(self):
        """Reads what the server has sent so far without waiting for more."""
        self.sock.setblocking(False)
        try:
            while True:
                try:
                    data = self.sock.recv(1 << 20)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                except (ConnectionResetError, ssl.SSLError):
                    self.closed = True
                    break
                if not data:
                    self.closed = True
                    break
                self._handle(self.conn.receive_data(data))
        finally:
            self.sock.setblocking(True)
        self._flush()

    def _handle(self, events):
        for e in events:
            s = self.streams.get(getattr(e, "stream_id", None))
            if isinstance(e, h2.events.ResponseReceived) and s is not None:
                s.headers = dict(e.headers)
            elif isinstance(e, h2.events.TrailersReceived) and s is not None:
                s.trailers = dict(e.headers)
            elif isinstance(e, h2.events.DataReceived) and s is not None:
                s.data += len(e.data)  # never credited back: no WINDOW_UPDATE
            elif isinstance(e, h2.events.StreamReset) and s is not None:
                s.reset = True
            elif isinstance(e, h2.events.PingAckReceived):
                self._pong = e.ping_data
            elif isinstance(e, h2.events.ConnectionTerminated):
                self.closed = True

    def close(self):
        self.sock.close()


def scrape(metrics_port):
    """The server's /metrics as {'name{labels}': value}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
    values = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    return values


def metric(values, name, **labels):
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for key, value in values.items():
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?", key)
        if m is None or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += value
    return total


def rss_bytes(pid):
    """The process's resident set (VmRSS) in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_for(what, condition, timeout, interval=0.02):
    """Polls condition() until it returns a true value; returns it, or raises after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout} s: {what}")
        time.sleep(interval)


class Server:
    """The real server binary on loopback (any free ports), its log in `log_path`."""

    def __init__(self, binary, args, log_path, preexec_fn=None):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"] + args,
            stdout=self.log, stderr=self.log, preexec_fn=preexec_fn)
        try:
            wait_for("the server says health SERVING",
                     lambda: "health SERVING" in self.text() or self.proc.poll() is not None, 60)
        except TimeoutError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            sys.exit(f"FAIL: the server exited at start-up:\n{self.text()}")
        text = self.text()
        self.grpc_port = int(re.search(r"gRPC listening on [^ ]*:(\d+)", text).group(1))
        self.metrics_port = int(re.search(r"metrics on http://[^ ]*:(\d+)/metrics", text).group(1))
        self.pid = self.proc.pid

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def metrics(self):
        return scrape(self.metrics_port)

    def rss(self):
        return rss_bytes(self.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
