"""Test helpers: textgen_server replicas and nginx on loopback, torn down on exit.

Used by the deploy tests (tests/deploy/CMakeLists.txt). Every process started here is
killed when the Cluster context exits, whatever happened.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional

WAIT_SECONDS = 60  # Upper bound for any one wait; a healthy run takes a fraction of it.


def free_port() -> int:
    """A port the kernel has just handed out (bind to 0), free again when this returns."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def import_client(client_dir: str, stubs_dir: str):
    """Imports client/python/textgen_client.py with the stubs the build generated."""
    os.environ["TEXTGEN_PY_STUBS"] = stubs_dir
    sys.path.insert(0, stubs_dir)
    sys.path.insert(0, client_dir)
    import textgen_client  # noqa: E402
    return textgen_client


def parse_requests_total(text: str) -> Dict[str, int]:
    """textgen_requests_total by code, from a Prometheus text page."""
    counts = {}
    for m in re.finditer(r'^textgen_requests_total\{code="([A-Z_]+)"\} (\d+)$', text, re.M):
        counts[m.group(1)] = int(m.group(2))
    return counts


def scrape(metrics_port: int) -> str:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


def wait_for_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {WAIT_SECONDS} s")


def stop_and_show_log(proc: subprocess.Popen, log) -> None:
    """Kills proc if it still runs and prints the tail of its log (an open text file)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.seek(0)
    print(log.read()[-1500:], end="")


class Replica:
    def __init__(self, name: str, proc: subprocess.Popen, port: int, metrics_port: int,
                 log_path: str):
        self.name, self.proc, self.port = name, proc, port
        self.metrics_port, self.log_path = metrics_port, log_path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self) -> Dict[str, int]:
        return parse_requests_total(scrape(self.metrics_port))

    def ok_count(self) -> int:
        return self.requests().get("OK", 0)


class Cluster:
    """Starts N textgen_server replicas (and optionally nginx); kills them all on exit."""

    def __init__(self, server: str, model: str, workdir: str):
        self.server, self.model, self.workdir = server, model, workdir
        self.replicas: List[Replica] = []
        self.nginx: Optional[subprocess.Popen] = None
        self.nginx_port = 0
        self._logs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.nginx is not None:
            # nginx's workers outlive a killed master: end its whole process group.
            try:
                os.killpg(self.nginx.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        procs = [r.proc for r in self.replicas] + ([self.nginx] if self.nginx else [])
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for f in self._logs:
            f.close()
        if exc[0] is not None:
            self.dump_logs()

    def dump_logs(self) -> None:
        for path in sorted(os.listdir(self.workdir)):
            full = os.path.join(self.workdir, path)
            if path.endswith(".log") and os.path.isfile(full):
                with open(full, errors="replace") as f:
                    tail = f.read()[-3000:]
                print(f"--- {path} (tail) ---\n{tail}", file=sys.stderr)

    def start_replicas(self, n: int, *extra_flags: str) -> List[Replica]:
        started = []
        for i in range(n):
            name = f"replica{len(self.replicas)}"
            port, metrics_port = free_port(), free_port()
            log_path = os.path.join(self.workdir, f"{name}.log")
            log = open(log_path, "w")
            self._logs.append(log)
            proc = subprocess.Popen(
                [self.server, f"--model={self.model}", "--host=127.0.0.1", f"--port={port}",
                 f"--metrics_port={metrics_port}", *extra_flags],
                stdout=log, stderr=subprocess.STDOUT)
            replica = Replica(name, proc, port, metrics_port, log_path)
            self.replicas.append(replica)
            started.append(replica)
        for r in started:
            wait_for_port(r.port, r.proc, r.name)
            wait_for_port(r.metrics_port, r.proc, f"{r.name} metrics")
        return started

    def start_nginx(self, entrypoint: str, upstreams: List[str],
                    calls_per_second: Optional[int] = None) -> int:
        """Runs the nginx image's entrypoint (deploy/nginx/entrypoint.sh: render the
        repository's template for these upstreams, then nginx in the foreground), with its
        per-client rate limit (CALLS_PER_SECOND) where given, else the template's default."""
        self.nginx_port = free_port()
        env = dict(os.environ, UPSTREAMS=" ".join(upstreams), LISTEN_PORT=str(self.nginx_port),
                   NGINX_PREFIX=os.path.join(self.workdir, "nginx"))
        if calls_per_second is not None:
            env["CALLS_PER_SECOND"] = str(calls_per_second)
        self.nginx_log = os.path.join(self.workdir, "nginx.log")
        log = open(self.nginx_log, "w")
        self._logs.append(log)
        # Its own process group: nginx's workers outlive a killed master (see __exit__).
        self.nginx = subprocess.Popen([entrypoint], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(self.nginx_port, self.nginx, "nginx")
        return self.nginx_port

    def nginx_output(self) -> str:
        """nginx's error and access logs (the entrypoint sends both to stdout/stderr)."""
        with open(self.nginx_log, errors="replace") as f:
            return f.read()

    @staticmethod
    def kill(replica: Replica, sig: int = signal.SIGKILL) -> None:
        """Sends sig and waits until the process is gone."""
        replica.proc.send_signal(sig)
        replica.proc.wait(timeout=WAIT_SECONDS)
