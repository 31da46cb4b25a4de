"""Issue 41, item 1: the admin listener holds no memory for callers it must refuse.

Starts the real server (CPU) with the admin service on mutual TLS and one allowed writer, then on
raw HTTP/2 over TLS (tests/tools/h2_grpc.py):
  1. a caller with no client certificate: refused in the handshake, before any HTTP/2 frame is
     read (the server never sends its SETTINGS);
  2. a caller whose certificate the CA signed but who is not on the allow-list opens
     --connections connections of --streams SaveTable calls each, every one announcing a
     message of --admin_max_message_bytes and sending its bytes as fast as flow control allows:
     the server's resident memory grows by at most the admin listener's memory quota (plus
     --slack_mib), however much the caller tries to send;
  3. the allowed writer then saves the table: OK (the flood left the listener serving).
Every wait is on a condition with a deadline. --measure_only reports instead of checking.

  admin_flood_check.py SERVER CERT_DIR [--connections=3] [--streams=32] [--measure_only]
"""

import argparse
import os
import re
import select
import ssl
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

from h2_grpc import RawConnection, Server, wait_for

ROWS, DIM = 1000, 64
SAVE_PATH = "/embedding.v1.EmbeddingAdminService/SaveTable"
MAX_MESSAGE = 64 << 20  # --admin_max_message_bytes (the default)
QUOTA = 4 * MAX_MESSAGE  # the admin listener's memory quota: docs/operations.md
STALL_SECONDS = 3  # the flood ends once no stream has been given room to send for this long
DEADLINE = 60


def tls_context(cert_dir, client=None):
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=f"{cert_dir}/ca.pem")
    if client is not None:
        context.load_cert_chain(f"{cert_dir}/{client}.pem", f"{cert_dir}/{client}.key")
    return context


def no_certificate(server, admin_port, cert_dir):
    """Step 1: True when the server ends the connection without sending an HTTP/2 frame."""
    try:
        c = RawConnection(admin_port, tls=tls_context(cert_dir))
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True  # refused in the handshake itself (TLS 1.2)
    # TLS 1.3: the client's side of the handshake ends before the server has checked the client's
    # certificate; the server's refusal is an alert read with the first data.
    c.start_call(SAVE_PATH, struct.pack(">BI", 0, MAX_MESSAGE - 16), end_stream=False)
    c.send()
    deadline = time.monotonic() + DEADLINE
    while not c.closed and time.monotonic() < deadline:
        select.select([c.sock], [], [], 0.05)
        c.read_available()
    refused = c.closed
    c.close()
    return refused


def flood(admin_port, cert_dir, connections, streams):
    """Step 2: bytes sent by the flood before the server stopped giving room."""
    chunk = bytes(1 << 20)
    conns = [RawConnection(admin_port, tls=tls_context(cert_dir, "client"))
             for _ in range(connections)]
    open_streams = []  # (connection, stream id, bytes still to send)
    for c in conns:
        for _ in range(streams):
            sid = c.start_call(SAVE_PATH, struct.pack(">BI", 0, MAX_MESSAGE - 16),
                               end_stream=False)
            open_streams.append([c, sid, MAX_MESSAGE - 16])
        c.send()
    sent = 0
    last_progress = time.monotonic()
    while time.monotonic() - last_progress < STALL_SECONDS:
        progress = False
        for s in open_streams:
            c, sid, left = s
            if c.closed or left == 0 or c.streams[sid].trailers or c.streams[sid].reset:
                continue
            try:
                n = c.send_data(sid, chunk[:min(left, len(chunk))])
            except Exception:  # the server reset the stream or ended the connection
                n = 0
            s[2] -= n
            sent += n
            progress = progress or n > 0
        for c in conns:
            c.read_available()
        if progress:
            last_progress = time.monotonic()
        else:
            select.select([c.sock for c in conns if not c.closed], [], [], 0.05)
    return conns, sent


def save(client, admin_target, cert_dir, table):
    return subprocess.run(
        [client, f"--table={table}", f"--admin_target={admin_target}",
         f"--admin_tls_ca={cert_dir}/ca.pem", f"--admin_tls_cert={cert_dir}/writer.pem",
         f"--admin_tls_key={cert_dir}/writer.key", "--admin_tls_server_name=localhost", "--timeout=30", "save"],
        capture_output=True, text=True, timeout=DEADLINE)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("client")
    parser.add_argument("cert_dir")
    parser.add_argument("--connections", type=int, default=3)
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--slack_mib", type=int, default=128)
    parser.add_argument("--measure_only", action="store_true")
    # Under a sanitizer the allocator's quarantine and redzones are not the server's memory.
    parser.add_argument("--no_rss_bound", action="store_true")
    args = parser.parse_args()
    start = time.monotonic()
    failures, report = [], []
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "t", "1"))
        rows = np.random.default_rng(7).standard_normal((ROWS, DIM)).astype(np.float32)
        np.save(os.path.join(tmp, "t", "1", "t.npy"), rows)
        server = Server(args.server, [
            f"--table=t={tmp}/t", "--device=cpu",
            "--admin_address=127.0.0.1:0", f"--admin_tls_cert={args.cert_dir}/server.pem",
            f"--admin_tls_key={args.cert_dir}/server.key",
            f"--admin_tls_client_ca={args.cert_dir}/ca.pem",
            "--admin_allowed_identities=spiffe://emb.test/writer"],
            os.path.join(tmp, "server.log"))
        try:
            admin_port = int(re.search(r"admin service \(UpdateRows\) on [^ ]*:(\d+)",
                                       server.text()).group(1))
            rss0 = server.rss()

            refused = no_certificate(server, admin_port, args.cert_dir)
            report.append(f"1. no client certificate: {'refused' if refused else 'SERVED'}")
            if not refused:
                failures.append("a caller with no client certificate got through the handshake")

            conns, sent = flood(admin_port, args.cert_dir, args.connections, args.streams)
            grown = server.rss() - rss0
            report.append(
                f"2. {args.connections} connections x {args.streams} SaveTable calls of "
                f"{MAX_MESSAGE >> 20} MiB from a caller off the allow-list: {sent >> 20} MiB "
                f"sent before the server stopped giving room; resident memory +{grown >> 20} MiB "
                f"(quota {QUOTA >> 20} MiB)")
            if not args.no_rss_bound and grown > QUOTA + (args.slack_mib << 20):
                failures.append(f"the flood grew the server by {grown >> 20} MiB, more than the "
                                f"quota {QUOTA >> 20} MiB + {args.slack_mib} MiB")
            for c in conns:
                c.close()

            result = save(args.client, f"127.0.0.1:{admin_port}", args.cert_dir, "t")
            report.append(f"3. the writer's save after the flood: "
                          f"{'OK' if result.returncode == 0 else result.stderr.strip()}")
            if result.returncode != 0:
                failures.append(f"the writer could not save after the flood: {result.stderr}")
        finally:
            server.stop()
    print("\n".join(report))
    if failures and not args.measure_only:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"admin_flood_check: passed in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
