"""The HTTP port's transport under hostile traffic (issue 29, item 1; server/http/
http_listener.h), labels frontdoor and e2e, against a live textgen_server:

- slowloris: 200 connections that each send one header byte every 2 s. Meanwhile, from a
  process of its own, GET /health and an 8-token completion over HTTP each answer within
  1 s, and gRPC health within --health_bound_ms p99; the trickling connections are closed
  at --http_head_timeout although they never stop sending;
- a 50 MB chunked body is a 413 naming --max_receive_message_bytes while resident memory
  stays < 100 MB above idle (and the server stops reading it); with a Content-Length the
  413 comes from the header alone;
- a head over --http_max_head_bytes is a 431;
- --http_max_connections_per_peer: the connection beyond it gets a 503 naming the flag,
  and once one closes, the address is served again;
- a streamed completion whose client stops reading is cut (its slot freed for the next
  request) within --stream_idle_timeout and a little, as on gRPC.
"""

import argparse
import json
import multiprocessing
import os
import select
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "tests", "server", "front_door"))
from common import parse_args  # noqa: E402
from health_watch import Watch, rss_mib  # noqa: E402
from live_server import start_with_http  # noqa: E402

ARGS = None
WAIT = 60  # Bound on waits (against hangs only).
SLOWLORIS_CONNECTIONS = 200
HTTP_ANSWER_BOUND_S = 1.0
CHUNKED_BYTES = 50 << 20
CHUNKED_MARGIN_MB = 100


def raw_request(port, head, body=b"", timeout=WAIT):
    """Sends `head` (the request line and headers, without the blank line) and `body` on
    a new connection; (status, body text) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head.encode() + b"\r\n\r\n" + body)
        return read_response(s)


def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head:
        return None, ""
    status = int(head.split(b" ")[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, rest.decode(errors="replace")


def completion_head(port, length):
    return (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}")


def _probe(port, stop, results):
    """GET /health and an 8-token completion over HTTP, each on a new connection, timed,
    until `stop`: in a process of its own (the attack's threads hold this one's GIL)."""
    body = json.dumps({"prompt": "ROMEO:", "max_tokens": 8, "temperature": 0}).encode()
    health, completions, failures = [], [], []
    while not stop.is_set():
        for kind, head, payload, into in (
                ("health", f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}", b"", health),
                ("completion", completion_head(port, len(body)), body, completions)):
            start = time.monotonic()
            try:
                status, _ = raw_request(port, head, payload, timeout=10)
                if status != 200:
                    failures.append(f"{kind}: {status}")
            except OSError as e:
                failures.append(f"{kind}: {e}")
            into.append(time.monotonic() - start)
        time.sleep(0.1)
    results.put((health, completions, failures))


class HttpProbe:
    def __init__(self, port):
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._results = context.Queue()
        self._process = context.Process(target=_probe, args=(port, self._stop, self._results))
        self._process.start()

    def stop(self):
        self._stop.set()
        self.health, self.completions, self.failures = self._results.get(timeout=WAIT)
        self._process.join(WAIT)
        return self


class SlowlorisTest(unittest.TestCase):
    def test_200_trickling_connections_while_health_and_completions_answer(self):
        head_timeout = 4 * ARGS.time_scale
        server, port = start_with_http(ARGS.server_bin, ARGS.model,
                                       f"--http_head_timeout={head_timeout}s")
        try:
            watch = Watch(server.target, server._proc.pid)
            probe = HttpProbe(port)
            time.sleep(1)
            sockets = []
            for _ in range(SLOWLORIS_CONNECTIONS):
                s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
                s.setblocking(False)
                sockets.append(s)
            opened = time.monotonic()
            prefix = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()
            sent = [0] * len(sockets)
            closed_at = [None] * len(sockets)
            # One byte per connection every 2 s, for as long as the server keeps it.
            while time.monotonic() - opened < head_timeout + 6:
                for i, s in enumerate(sockets):
                    if closed_at[i] is not None:
                        continue
                    try:
                        s.send(prefix[sent[i]:sent[i] + 1] if sent[i] < len(prefix) else b"a")
                        sent[i] += 1
                    except OSError:
                        closed_at[i] = time.monotonic() - opened
                readable, _, _ = select.select(
                    [s for i, s in enumerate(sockets) if closed_at[i] is None], [], [], 2.0)
                for s in readable:
                    i = sockets.index(s)
                    try:
                        if s.recv(4096) == b"":
                            closed_at[i] = time.monotonic() - opened
                    except OSError:
                        closed_at[i] = time.monotonic() - opened
            probe.stop()
            watch.stop()
            for s in sockets:
                s.close()
            still_open = sum(1 for t in closed_at if t is None)
            latest = max((t for t in closed_at if t is not None), default=0)
            print(f"slowloris: {SLOWLORIS_CONNECTIONS} connections, each sent a byte every 2 s "
                  f"(up to {max(sent)} bytes); closed by the server after <= {latest:.1f} s "
                  f"(--http_head_timeout={head_timeout:g}s), {still_open} still open; "
                  f"HTTP /health max {max(probe.health) * 1e3:.0f} ms over "
                  f"{len(probe.health)}, completion max {max(probe.completions) * 1e3:.0f} ms "
                  f"over {len(probe.completions)}; gRPC {watch.summary()}", flush=True)
            self.assertEqual(still_open, 0, "trickling connections outlived the head deadline")
            self.assertLess(latest, head_timeout + 3)
            self.assertEqual(probe.failures, [])
            self.assertGreater(len(probe.health), 3)
            self.assertLess(max(probe.health), HTTP_ANSWER_BOUND_S * ARGS.time_scale)
            self.assertLess(max(probe.completions), HTTP_ANSWER_BOUND_S * ARGS.time_scale)
            self.assertEqual(watch.failures, 0)
            self.assertLess(watch.p99_ms, ARGS.health_bound_ms)
        finally:
            server.stop()


class LimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server, cls.port = start_with_http(ARGS.server_bin, ARGS.model,
                                               "--http_max_connections_per_peer=8")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_50_mb_chunked_body_is_413_and_memory_stays_small(self):
        pid = self.server._proc.pid
        idle = rss_mib(pid)
        peak = [idle]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_mib(pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        s = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                  "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        sent = [0]

        def send_body():
            piece = 64 << 10
            chunk = f"{piece:x}\r\n".encode() + b"a" * piece + b"\r\n"
            try:
                while sent[0] < CHUNKED_BYTES:
                    s.sendall(chunk)
                    sent[0] += piece
                s.sendall(b"0\r\n\r\n")
            except OSError:
                pass  # The server answered and closed: what we expect.

        sender = threading.Thread(target=send_body)
        sender.start()
        status, body = read_response(s)
        sender.join(WAIT)
        s.close()
        done.set()
        sampler.join()
        print(f"50 MB chunked: {status} after {sent[0] / 2**20:.0f} MiB sent; resident idle "
              f"{idle:.0f} MiB, peak {peak[0]:.0f} MiB", flush=True)
        self.assertEqual(status, 413, body)
        self.assertIn("--max_receive_message_bytes", json.loads(body)["error"]["message"])
        self.assertLess(sent[0], CHUNKED_BYTES, "the server read the whole body")
        self.assertLess(peak[0] - idle, CHUNKED_MARGIN_MB)

    def test_content_length_over_the_limit_is_413_from_the_header(self):
        status, body = raw_request(self.port, completion_head(self.port, CHUNKED_BYTES))
        self.assertEqual(status, 413, body)

    def test_head_over_the_limit_is_431(self):
        status, body = raw_request(
            self.port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                       f"X-Big: {'b' * (32 << 10)}")
        self.assertEqual(status, 431, body)
        self.assertIn("--http_max_head_bytes", json.loads(body)["error"]["message"])

    def test_connections_per_address_are_capped(self):
        held = [socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
                for _ in range(8)]
        try:
            time.sleep(0.2)
            status, body = raw_request(
                self.port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{self.port}")
            self.assertEqual(status, 503, body)
            self.assertIn("--http_max_connections_per_peer",
                          json.loads(body)["error"]["message"])
            held.pop().close()
            time.sleep(0.2)
            status, body = raw_request(
                self.port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{self.port}")
            self.assertEqual(status, 200, body)
        finally:
            for s in held:
                s.close()


class StreamBackpressureTest(unittest.TestCase):
    def test_a_client_that_stops_reading_is_cut_and_its_slot_freed(self):
        idle_timeout = 2 * ARGS.time_scale
        server, port = start_with_http(ARGS.server_bin, ARGS.model, "--num_slots=8",
                                       f"--stream_idle_timeout={idle_timeout}")
        try:
            # A reader that takes nothing: a receive buffer of a few kB and no recv, so the
            # server's writes stall once its own send buffer is full. 8 choices of 250 tokens
            # with 5 logprobs each are ~790 kB of events, far more than both buffers hold.
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
            s.connect(("127.0.0.1", port))
            body = json.dumps({"prompt": "ROMEO:", "max_tokens": 250, "n": 8, "stream": True,
                               "logprobs": 5, "temperature": 1.0, "seed": 1}).encode()
            s.sendall(completion_head(port, len(body)).encode() + b"\r\n\r\n" + body)
            # The stalled stream holds all 8 slots before the other request is sent (sent
            # at once, the other could be admitted first and finish, and the test would
            # then read the first stream whole).
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                _, metrics = raw_request(port, f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}")
                if "textgen_kv_slots_in_use 8" in metrics:
                    break
                time.sleep(0.05)
            else:
                self.fail("the stalled stream never held the 8 slots")
            start = time.monotonic()
            # Another request needs a slot, and the stalled one holds all 8: it is served
            # once the stalled stream is cut.
            other = json.dumps({"prompt": "KING:", "max_tokens": 4}).encode()
            status, text = raw_request(port, completion_head(port, len(other)), other)
            waited = time.monotonic() - start
            print(f"a stalled stream's slot served the next request after {waited:.1f} s "
                  f"(--stream_idle_timeout={idle_timeout:g})", flush=True)
            self.assertEqual(status, 200, text)
            self.assertLess(waited, idle_timeout + 10 * ARGS.time_scale)
            # And the stalled stream was cut, not finished: either the listener gave up its
            # write (no [DONE] ever comes) or the engine's own unread-stream timeout ended
            # it first (an error event, RESOURCE_EXHAUSTED, then [DONE]).
            s.settimeout(WAIT)
            received = b""
            while True:
                try:
                    chunk = s.recv(1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                received += chunk
            s.close()
            self.assertIn(b"200 OK", received[:100])
            if b"[DONE]" in received:
                self.assertIn(b"resource_exhausted", received, received[-800:])
        finally:
            server.stop()


if __name__ == "__main__":
    ARGS, argv = parse_args()
    extra = argparse.ArgumentParser()
    extra.add_argument("--health_bound_ms", type=float, default=100)
    more, argv = extra.parse_known_args(argv)
    ARGS.health_bound_ms = more.health_bound_ms
    unittest.main(argv=argv)
