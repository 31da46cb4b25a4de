#!/usr/bin/env python3
"""The server's device-loss path end to end on a real GPU (scripts/gpu-check runs it).

The server runs on cuda:0 with libemb_cuda_fault_shim.so preloaded: once the fault file exists,
cudaEventSynchronize answers cudaErrorIllegalAddress, as a lost context would, and the next lookup
loses the device.
  A, scraped every second: a scrape after the fault reads embedding_device_lost{device} 1, the
     error's name in embedding_device_lost_error_info and embedding_health_status 0; the server
     then exits 1.
  B, never scraped: the server exits 1 at once.

  tests/gpu/device_loss_check.py BUNDLE_DIR   (holds embedding-server, embedding-client and
                                               libemb_cuda_fault_shim.so; LD_LIBRARY_PATH set)
EMB_TEST_DEVICE (default cuda:0) and EMB_TEST_PLACEMENT give the server's --device and
--placement: cuda:0,cuda:0 with rows checks a table split over two stores (the loss is reported
for cuda:0, the first device's).
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BUNDLE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".gpu")
DEVICES = os.environ.get("EMB_TEST_DEVICE", "cuda:0")
PLACEMENT = os.environ.get("EMB_TEST_PLACEMENT", "replicas")
# B's bound: the server exits as soon as the batch fails when nobody has scraped it.
UNSCRAPED_EXIT_S = 10


def start(fault_file):
    env = dict(os.environ, LD_PRELOAD=os.path.join(BUNDLE, "libemb_cuda_fault_shim.so"),
               EMB_FAULT_FILE=fault_file)
    server = subprocess.Popen(
        [f"{BUNDLE}/embedding-server", f"--device={DEVICES}", f"--placement={PLACEMENT}",
         "--demo_table=100000x64",
         "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"],
        env=env, stderr=subprocess.PIPE, text=True)
    log, grpc, metrics = [], None, None
    while not (log and "health SERVING" in log[-1]):
        line = server.stderr.readline()
        if not line:
            sys.exit("server exited before serving:\n" + "".join(log))
        log.append(line)
        m = re.search(r"gRPC listening on [^:]+:(\d+)", line)
        grpc = m[1] if m else grpc
        m = re.search(r"metrics on http://[^:]+:(\d+)/", line)
        metrics = m[1] if m else metrics
    threading.Thread(target=lambda: log.extend(iter(server.stderr.readline, "")),
                     daemon=True).start()
    return server, log, grpc, metrics


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def lookup(grpc):
    return subprocess.run([f"{BUNDLE}/embedding-client", f"--target=127.0.0.1:{grpc}", "lookup",
                           "1", "2"], capture_output=True, text=True, timeout=60)


def state_lines(metrics_text):
    return [line for line in metrics_text.splitlines()
            if re.match(r"embedding_(health_status|device_lost)", line)]


def watched(fault_file):
    """A: a scraper every second; the loss is in a scrape after the fault, then exit 1."""
    server, log, grpc, port = start(fault_file)
    before = scrape(port)
    print("A before:", state_lines(before))
    ok = lookup(grpc).returncode == 0 and 'embedding_device_lost{device="cuda:0"} 0' in before
    scrapes, stop, scraped = [], threading.Event(), threading.Event()

    def scraper():
        while not stop.is_set():
            try:
                scrapes.append((time.monotonic(), scrape(port)))
                scraped.set()
            except OSError as e:
                scrapes.append((time.monotonic(), f"ERROR {e}"))
            stop.wait(1.0)

    thread = threading.Thread(target=scraper)
    thread.start()
    scraped.wait(30)  # the server has been scraped recently: it waits for the next scrape
    open(fault_file, "w").close()
    fault_at = time.monotonic()
    r = lookup(grpc)
    print("A lookup after the fault: rc", r.returncode, r.stderr.strip()[-200:])
    rc = server.wait(timeout=120)
    exit_after = time.monotonic() - fault_at
    stop.set()
    thread.join()
    after = [s for at, s in scrapes if at > fault_at and not s.startswith("ERROR")]
    lost = [s for s in after if 'embedding_device_lost{device="cuda:0"} 1' in s]
    print(f"A: exit {rc} {exit_after:.2f} s after the fault; {len(after)} scrapes after it, "
          f"{len(lost)} with the loss")
    if lost:
        print("A lost scrape:", state_lines(lost[0]))
    print("A log tail:", "".join(log[-3:]))
    return (ok and rc == 1 and bool(lost) and
            'error="cudaErrorIllegalAddress"} 1' in lost[0] and
            "\nembedding_health_status 0\n" in lost[0])


def unwatched(fault_file):
    """B: never scraped; exit 1 at once."""
    server, log, grpc, _ = start(fault_file)
    open(fault_file, "w").close()
    fault_at = time.monotonic()
    lookup(grpc)
    rc = server.wait(timeout=120)
    exit_after = time.monotonic() - fault_at
    print(f"B: exit {rc} {exit_after:.2f} s after the fault (never scraped)")
    print("B log tail:", "".join(log[-2:]))
    return rc == 1 and exit_after < UNSCRAPED_EXIT_S


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ok = watched(os.path.join(tmp, "fault_a"))
        ok = unwatched(os.path.join(tmp, "fault_b")) and ok
    print("DEVICE LOSS CHECK", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
