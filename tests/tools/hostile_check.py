#!/usr/bin/env python3
"""Hostile clients the server must survive, from outside (tests/tools/hostile_check.sh):

  slow_metrics: HOLD connections to the metrics port send a request one byte at a time and never
      finish it (slow loris); scrapes from a good client must keep being answered, each within
      SCRAPE_LIMIT_S.

  slow_flood: SLOW connections to the metrics port at once (issue 41, item 6), more than the 8
      threads the port once had: some send a request a byte at a time and never finish it, some
      stop inside the request line, some connect and send nothing. While they are held, scrapes
      must each be answered within SCRAPE_LIMIT_S; the server must close every slow connection
      within CLOSE_LIMIT_S of its opening (its request timeout is 5 s), and a scrape must have been
      answered while all of them were still open.

  hostile_check.py slow_metrics METRICS_PORT
  hostile_check.py slow_flood METRICS_PORT
"""
import select
import socket
import sys
import threading
import time
import urllib.request

HOLD = 4
SCRAPES = 5
SCRAPE_LIMIT_S = 5.0


def slow_metrics(port):
    loris = []
    for _ in range(HOLD):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x")  # and never the rest
        loris.append(s)
    try:
        for i in range(SCRAPES):
            start = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                            timeout=SCRAPE_LIMIT_S * 4) as r:
                    body = r.read()
            except OSError as e:  # a timeout too
                sys.exit(f"FAIL: scrape {i} with {HOLD} slow connections open: {e!r}")
            took = time.monotonic() - start
            if r.status != 200 or b"embedding_" not in body:
                sys.exit(f"FAIL: scrape {i}: status {r.status}, {len(body)} bytes")
            if took > SCRAPE_LIMIT_S:
                sys.exit(f"FAIL: scrape {i} took {took:.1f} s with {HOLD} slow connections open "
                         f"(limit {SCRAPE_LIMIT_S} s)")
            # Each slow client sends one more byte between scrapes: it stays open and unfinished.
            for s in loris:
                s.sendall(b"x")
        print(f"ok: {SCRAPES} scrapes answered with {HOLD} slow-loris connections open")
    finally:
        for s in loris:
            s.close()


SLOW = 16
CLOSE_LIMIT_S = 12.0  # the server's request timeout (5 s) and room for a loaded machine
DRIBBLE_INTERVAL_S = 0.25


def _scrape_once(port):
    """Seconds one scrape took; exits with FAIL if it failed or took over SCRAPE_LIMIT_S."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=SCRAPE_LIMIT_S) as r:
            body = r.read()
    except OSError as e:  # a timeout too
        sys.exit(f"FAIL: a scrape with slow connections open failed or took over "
                 f"{SCRAPE_LIMIT_S} s: {e!r}")
    took = time.monotonic() - start
    if r.status != 200 or b"embedding_" not in body:
        sys.exit(f"FAIL: a scrape: status {r.status}, {len(body)} bytes")
    return took


def _closed_by_server(s):
    """Whether the server has closed `s` (EOF or reset; any answer it sent first is read)."""
    try:
        while select.select([s], [], [], 0)[0]:
            if not s.recv(4096):
                return True
    except OSError:
        return True
    return False


def slow_flood(port):
    kinds = ["dribble", "request_line", "silent"]
    slow = []  # (socket, kind, opened at)
    for i in range(SLOW):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        kind = kinds[i % len(kinds)]
        if kind == "dribble":
            s.sendall(b"G")
        elif kind == "request_line":
            s.sendall(b"GET /metr")
        slow.append((s, kind, time.monotonic()))
    stop = threading.Event()

    def dribble():
        # One more byte of an endless request (its Host header grows) to each dribbling
        # connection, every DRIBBLE_INTERVAL_S, until the server closes it.
        request = b"ET /metrics HTTP/1.1\r\nHost: x"
        sent = 0
        while not stop.wait(DRIBBLE_INTERVAL_S):
            byte = request[sent:sent + 1] or b"x"
            sent += 1
            for s, kind, _ in slow:
                if kind == "dribble":
                    try:
                        s.send(byte)
                    except OSError:
                        pass

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    closed_after = {}  # index -> seconds from its opening to the server's close
    scrapes_all_open = 0
    scrape_times = []
    try:
        deadline = slow[-1][2] + CLOSE_LIMIT_S
        while len(closed_after) < SLOW:
            all_open = not closed_after
            took = _scrape_once(port)
            scrape_times.append(took)
            for i, (s, _, opened) in enumerate(slow):
                if i not in closed_after and _closed_by_server(s):
                    closed_after[i] = time.monotonic() - opened
            if all_open and len(closed_after) == 0:
                scrapes_all_open += 1  # answered while every slow connection was held
            if time.monotonic() > deadline:
                still = sorted({slow[i][1] for i in range(SLOW) if i not in closed_after})
                sys.exit(f"FAIL: {SLOW - len(closed_after)} of {SLOW} slow connections "
                         f"({', '.join(still)}) still open {CLOSE_LIMIT_S} s after they opened")
            time.sleep(0.05)  # the poll's interval, not a wait for the server
    finally:
        stop.set()
        dribbler.join()
        for s, _, _ in slow:
            s.close()
    if scrapes_all_open == 0:
        sys.exit("FAIL: no scrape was answered while all the slow connections were open")
    print(f"ok: {len(scrape_times)} scrapes answered with up to {SLOW} slow connections open "
          f"({scrapes_all_open} while all were), the slowest in {max(scrape_times):.3f} s; the "
          f"server closed every slow connection {min(closed_after.values()):.1f} to "
          f"{max(closed_after.values()):.1f} s after it opened")


def main(argv):
    if len(argv) == 3 and argv[1] == "slow_metrics":
        slow_metrics(int(argv[2]))
        return 0
    if len(argv) == 3 and argv[1] == "slow_flood":
        slow_flood(int(argv[2]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
