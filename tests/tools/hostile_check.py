#!/usr/bin/env python3
"""Hostile clients the server must survive, from outside (tests/tools/hostile_check.sh):

  slow_metrics: HOLD connections to the metrics port send a request one byte at a time and never
      finish it (slow loris); scrapes from a good client must keep being answered, each within
      SCRAPE_LIMIT_S.

  hostile_check.py slow_metrics METRICS_PORT
"""
import socket
import sys
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


def main(argv):
    if len(argv) == 3 and argv[1] == "slow_metrics":
        slow_metrics(int(argv[2]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
