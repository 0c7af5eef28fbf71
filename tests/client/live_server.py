"""A textgen_server process for the client tests: started on a port the system picks,
stopped (SIGTERM, then SIGKILL) when the test ends, even when it fails or is interrupted.

    with LiveServer(server_bin, model) as server:
        ...server.target...  # "127.0.0.1:PORT"

Also the tests' shared command line (parse_args; --chat_model selects a file's chat cases,
run_tests) and the chat model's held-out questions (heldout_cases).
"""

import argparse
import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

_RUNNING = []


def _stop_all():
    for server in list(_RUNNING):
        server.stop()


atexit.register(_stop_all)
# ctest kills a timed-out test with SIGTERM: stop the server before going.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


class LiveServer:
    def __init__(self, server_bin, model, *extra_flags):
        self._log = tempfile.NamedTemporaryFile(prefix="textgen_server_", suffix=".log",
                                                delete=False)
        self._proc = subprocess.Popen(
            [server_bin, "--model", model, "--host", "127.0.0.1", "--port", "0",
             "--drain_seconds", "2", *extra_flags],
            stdout=self._log, stderr=subprocess.STDOUT)
        _RUNNING.append(self)
        # Bounded wait for the port (against a hang, not a timing requirement).
        deadline = time.monotonic() + 120
        self.port = None
        while time.monotonic() < deadline and self._proc.poll() is None:
            match = re.search(r"serving on port (\d+)", self.log())
            if match:
                self.port = int(match.group(1))
                break
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise RuntimeError("textgen_server did not start:\n" + self.log())
        self.target = f"127.0.0.1:{self.port}"
        self.pid = self._proc.pid

    def log(self):
        with open(self._log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        if self not in _RUNNING:
            return
        _RUNNING.remove(self)
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        os.unlink(self._log.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def free_port():
    """A local port free now (it could be taken before the caller binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_port(server, wait=60):
    """The HTTP API's port (--http_port), from the server's log."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        match = re.search(r"HTTP API on https?://[^:]+:(\d+)/v1", server.log())
        if match:
            return int(match.group(1))
        time.sleep(0.05)
    raise RuntimeError("no HTTP port in the log:\n" + server.log())


def start_with_http(server_bin, model, *flags):
    """A server with the HTTP API on a free port; (server, its HTTP port)."""
    # A port picked here could be taken before the server binds it; retry once.
    for attempt in range(2):
        try:
            server = LiveServer(server_bin, model, f"--http_port={free_port()}", *flags)
            return server, http_port(server)
        except RuntimeError:
            if attempt == 1:
                raise


def closed_port():
    """A local port with nothing listening on it (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args():
    """The tests' own flags; the rest goes to unittest."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--server_bin", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--png_check")
    parser.add_argument("--chat_model",
                        help="run the chat cases (only) against this instruct model "
                             "(models/chat-instruct)")
    args, rest = parser.parse_known_args()
    return args, [sys.argv[0]] + rest


SKIP = 77


def skip_or_fail(name, reason):
    """Exits 77 (ctest's SKIP_RETURN_CODE), saying why; under CI=true fails instead."""
    if os.environ.get("CI") == "true":
        sys.exit(f"{name}: {reason}; under CI=true this is an error, not a skip")
    print(f"{name}: SKIPPED: {reason}")
    sys.exit(SKIP)


def heldout_cases(model, count=4):
    """The chat model's first `count` held-out conversations (its heldout.jsonl: {"task",
    "messages", "answer"} per line, the messages ending with the user's question), a
    subset of those the server's chat_e2e asserts (tests/server/http/chat_test.py)."""
    with open(os.path.join(model, "heldout.jsonl"), encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()][:count]
    if len(cases) < 2:
        raise RuntimeError(f"{model}/heldout.jsonl has fewer than 2 conversations")
    return cases


def run_tests(args, argv, chat_cases, name):
    """unittest.main over this test file's cases: with --chat_model only chat_cases (the
    TestCase classes that need the instruct model), after checking that the model is
    there (absent: skip, or fail under CI=true); without it every other class."""
    module = sys.modules["__main__"]
    classes = [c for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, unittest.TestCase)]
    if args.chat_model:
        if not os.path.isdir(args.chat_model):
            skip_or_fail(name, f"the chat model {args.chat_model} is absent (it is trained "
                               "and shipped by issue 30 item 7)")
        selected = [c for c in classes if c in chat_cases]
    else:
        selected = [c for c in classes if c not in chat_cases]
    unittest.main(argv=argv, defaultTest=[c.__name__ for c in selected], verbosity=2)
