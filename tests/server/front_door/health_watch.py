"""gRPC health latency and a server's resident memory, measured from a process of its own.

Watch(target, pid) starts a process that calls grpc.health.v1 Check every 20 ms (5 s deadline)
and reads the server's VmRSS, until stop(); then its figures are on the object: p99_ms, max_ms,
failures, checks, peak_rss_mib (tests/server/amplification_test.py uses it too). The process is separate
because attacking threads in the test's own process hold Python's interpreter lock, and a check
timed there would measure that wait, not the server.
"""

import multiprocessing
import time


def rss_mib(pid):
    """The process's resident memory (VmRSS) in MiB; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _watch(target, pid, stop, results):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    channel = grpc.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    health.Check(health_pb2.HealthCheckRequest(), timeout=30)  # Connected before timing.
    latencies, failures, peak = [], 0, 0.0
    while not stop.is_set():
        start = time.monotonic()
        try:
            health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError:
            failures += 1
        latencies.append((time.monotonic() - start) * 1e3)
        peak = max(peak, rss_mib(pid))
        time.sleep(0.02)
    channel.close()
    results.put((latencies, failures, peak))


class Watch:
    def __init__(self, target, pid):
        context = multiprocessing.get_context("spawn")  # No fork of gRPC's threads.
        self._stop = context.Event()
        self._results = context.Queue()
        self._process = context.Process(target=_watch,
                                        args=(target, pid, self._stop, self._results))
        self._process.start()

    def stop(self):
        self._stop.set()
        latencies, self.failures, self.peak_rss_mib = self._results.get(timeout=60)
        self._process.join(60)
        latencies.sort()
        self.checks = len(latencies)
        self.max_ms = latencies[-1] if latencies else 0.0
        self.p99_ms = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] \
            if latencies else 0.0
        return self

    def summary(self):
        return (f"health p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms over "
                f"{self.checks} checks, {self.failures} failed; peak {self.peak_rss_mib:.0f} MiB")
