#!/usr/bin/env python3
"""The soak test (ctest label `soak`, issue 14 item 10): textgen_loadgen's soak mode
(bench/soak.h) against textgen_server built with AddressSanitizer.

Runs --seconds (180 in CI) of --streams concurrent streams, 20 % of requests cancelled
mid-stream and 10 % invalid, with random sampling settings; --http (25 %) of them go to
the HTTP API's POST /v1/completions instead of gRPC (plain, server-sent events, and
streams the client abandons after an event or two in the cancelled share), and asserts:
  - no unexpected status (loadgen checks each outcome against what was sent);
  - every KV slot free and the queue empty afterwards, and no call the server ended with
    a status the soak does not send for (from /metrics);
  - the server's resident memory at the end within --rss_growth of after the warm-up
    (10 %; ctest gives the AddressSanitizer run 25 %: its allocator's own memory grows
    ~8-28 KiB per request however small its quarantine and allocation stacks, measured
    with GCC's and clang's ASan alike, where the Release server stays flat, 55.6 -> 56.0
    MiB over 6,000 requests; textgen_soak_release holds a Release server to 10 %);
  - the server drains and exits 0 on SIGTERM, with no AddressSanitizer, LeakSanitizer
    or UndefinedBehaviorSanitizer report in its log.

The 30-minute run (not in CI: it needs a quiet machine):
  tests/server/soak_test.py build-asan/server/textgen_server build-asan/bench/textgen_loadgen \
      models/shakespeare-char --seconds 1800 --streams 64 --warmup 120
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("server")
parser.add_argument("loadgen")
parser.add_argument("model")
parser.add_argument("--seconds", type=float, default=180)
parser.add_argument("--warmup", type=float, default=60)
parser.add_argument("--streams", type=int, default=16)
parser.add_argument("--cancel", type=float, default=0.2)
parser.add_argument("--invalid", type=float, default=0.1)
parser.add_argument("--http", type=float, default=0.25,
                    help="share of requests over HTTP; 0 = gRPC only")
parser.add_argument("--rss_growth", type=float, default=0.10,
                    help="allowed growth of resident memory after the warm-up")
args = parser.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


env = dict(os.environ)
# A small quarantine so that ASan's own bookkeeping reaches its plateau within the
# warm-up; leaks are reported at exit.
env["ASAN_OPTIONS"] = "detect_leaks=1:quarantine_size_mb=16:malloc_context_size=8"
env["UBSAN_OPTIONS"] = "print_stacktrace=1"
metrics_port = free_port()
# --http_port takes no 0 (0 is "off"): a free port, as for the metrics.
http_port = free_port()
while http_port == metrics_port:
    http_port = free_port()
log = tempfile.NamedTemporaryFile("w+", prefix="soak_server_", suffix=".log", delete=False)
server = subprocess.Popen(
    [args.server, "--model", args.model, "--host", "127.0.0.1", "--port", "0",
     "--metrics_port", str(metrics_port), "--http_port", str(http_port),
     "--drain_seconds", "10"],
    stdout=log, stderr=subprocess.STDOUT, env=env)
port = None
for _ in range(1200):  # Bounded wait for the port (an ASan build starts slowly).
    m = re.search(r"serving on port (\d+)", open(log.name).read())
    if m:
        port = int(m.group(1))
        break
    if server.poll() is not None:
        break
    time.sleep(0.1)
if port is None:
    print(open(log.name).read())
    print("FAIL: the server never listened")
    server.kill()
    sys.exit(1)

loadgen = subprocess.run(
    [args.loadgen, f"--target=127.0.0.1:{port}", f"--metrics_target=127.0.0.1:{metrics_port}",
     f"--server_pid={server.pid}", f"--streams={args.streams}",
     f"--soak_seconds={args.seconds}", f"--soak_warmup_seconds={args.warmup}",
     "--soak_report_seconds=30", f"--soak_cancel_fraction={args.cancel}",
     f"--soak_invalid_fraction={args.invalid}", f"--http_target=127.0.0.1:{http_port}",
     f"--soak_http_fraction={args.http}", "--prompt_tokens=48",
     "--max_new_tokens=48", f"--soak_rss_growth={args.rss_growth}"], env=env)
server.send_signal(signal.SIGTERM)
try:
    server_rc = server.wait(timeout=60)
except subprocess.TimeoutExpired:
    server.kill()
    server_rc = server.wait()
server_log = open(log.name).read()
os.unlink(log.name)
reports = [line for line in server_log.splitlines()
           if re.search(r"AddressSanitizer|LeakSanitizer|runtime error:", line)]
failures = []
if loadgen.returncode != 0:
    failures.append(f"loadgen's soak checks failed (exit {loadgen.returncode})")
if server_rc != 0:
    failures.append(f"the server exited {server_rc} after SIGTERM")
if reports:
    failures.append("sanitizer reports in the server's log")
if failures:
    print(server_log[-20000:])
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1)
print("PASS: soak")
