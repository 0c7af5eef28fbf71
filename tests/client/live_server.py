"""A textgen_server process for the client tests: started on a port the system picks,
stopped (SIGTERM, then SIGKILL) when the test ends, even when it fails or is interrupted.

    with LiveServer(server_bin, model) as server:
        ...server.target...  # "127.0.0.1:PORT"
"""

import argparse
import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

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
    args, rest = parser.parse_known_args()
    return args, [sys.argv[0]] + rest
