#!/usr/bin/python3
"""The repository's nginx config in front of two textgen_server replicas on loopback.

  nginx_lb_test.py --server build/server/textgen_server --model models/shakespeare-char
      --nginx_entrypoint deploy/nginx/entrypoint.sh
      --client_dir client/python --stubs build/client/python

nginx runs as compose's nginx container runs it: deploy/nginx/entrypoint.sh renders
deploy/nginx/nginx.conf.template with render.sh for the given upstreams (here the two
loopback replicas; in compose the service name) and starts nginx.

1. 40 streamed generations over ONE client channel (one HTTP/2 connection to nginx) all
   succeed, and each replica's textgen_requests_total{code="OK"} has a share (> 0 each,
   sum 40): nginx balances per call, not per connection.
2. While streams keep coming, one replica is SIGKILLed: every call started after it is gone
   succeeds (nginx passes a refused connection on to the other replica and marks the dead
   one failed). Calls that were streaming from it when it died are cut (INTERNAL or
   UNAVAILABLE); they are reported, not asserted, since how many there are is timing.
3. On a fresh pair, one replica gets SIGTERM instead: the calls streaming at that moment all
   finish (the drain), it exits 0, and every call started after it exited succeeds. Calls
   that reach it while it drains are refused with UNAVAILABLE, which nginx cannot retry
   (gRPC status is not an HTTP status); they are reported, not asserted.
"""

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc

from replicas import Cluster, import_client

PROMPT = "ROMEO:"
NEW_TOKENS = 24
# Failover and drain are what this test checks, not the per-client rate limit
# (frontdoor_rapid_reset does that): on a fast CPU the shipped model's 24-token calls take a few
# milliseconds, and 4 threads then send more than the template's default 200 calls a second,
# which nginx answers with 429 (UNAVAILABLE) by design.
CALLS_PER_SECOND = 100000


def generate(client, seed: int, first_token_at=None) -> str:
    """One streamed generation; checks it is whole and returns its text. first_token_at, a
    list, gets the time.monotonic() of the first token."""
    stream = client.generate(PROMPT, max_new_tokens=NEW_TOKENS, temperature=0.8, seed=seed,
                             timeout=60)
    tokens = []
    for t in stream:
        if first_token_at is not None and not first_token_at:
            first_token_at.append(time.monotonic())
        if not t.is_prompt:
            tokens.append(t)
    if stream.finished is None:
        raise AssertionError(f"seed {seed}: the stream ended without a Finished message")
    if stream.finished.usage.generated_tokens != len(tokens) or not tokens:
        raise AssertionError(f"seed {seed}: {len(tokens)} tokens streamed, Finished says "
                             f"{stream.finished.usage.generated_tokens}")
    return "".join(t.text for t in tokens)


def calls_around(client, disrupt):
    """Runs generations on 4 threads; after 8 have ended calls disrupt() (which returns once
    the replica is gone), then goes on until 24 calls have started after that. Returns
    [(start, first token, end, outcome)] (time.monotonic(); first token inf if none) and
    the times disrupt() began and returned."""
    results = []
    lock = threading.Lock()
    stop = threading.Event()
    seeds = iter(range(1000, 100000))

    def worker():
        while not stop.is_set():
            with lock:
                seed = next(seeds)
            start = time.monotonic()
            first = []
            try:
                generate(client, seed, first)
                outcome = "OK"
            except grpc.RpcError as e:
                outcome = f"{e.code().name}: {e.details()}"
            with lock:
                results.append((start, first[0] if first else float("inf"), time.monotonic(),
                                outcome))

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for w in workers:
        w.start()
    t_signal = t_gone = float("inf")
    try:
        while True:
            with lock:
                if len(results) >= 8:
                    break
            time.sleep(0.01)
        t_signal = time.monotonic()
        disrupt()
        t_gone = time.monotonic()
        deadline = t_gone + 50
        while time.monotonic() < deadline:
            with lock:
                if sum(1 for r in results if r[0] > t_gone) >= 24:
                    break
            time.sleep(0.01)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=60)
    return results, t_signal, t_gone


def report(results, t_signal, t_gone):
    def summary(calls):
        bad = [o for o in calls if o != "OK"]
        return f"{len(calls)} calls, {len(calls) - len(bad)} OK, failed: {bad}"
    print("  streaming at the signal (first token before it, not ended):",
          summary(streaming_at(results, t_signal)))
    print("  started before the signal, no token yet:",
          summary([o for s, f, e, o in results if s < t_signal < e and f >= t_signal]))
    print("  started between the signal and the exit:",
          summary([o for s, _, _, o in results if t_signal <= s <= t_gone]))
    print("  started after the exit:", summary(started_after(results, t_gone)))


def streaming_at(results, t):
    return [o for _, first, end, o in results if first < t < end]


def started_after(results, t):
    return [o for start, _, _, o in results if start > t]


def check_render(render: str) -> None:
    """render.sh refuses bad input with a message, and renders what `nginx -t` accepts, in
    both modes (static addresses; one name resolved at run time)."""
    template = os.path.join(os.path.dirname(render), "nginx.conf.template")
    with tempfile.TemporaryDirectory() as tmp:
        for upstreams, port, expect in (("", "50051", "UPSTREAMS is empty"),
                                        ("textgen", "50051", "has no port"),
                                        ("textgen:50051", "grpc", "must be a port number")):
            out = subprocess.run([render, template, tmp], capture_output=True, text=True,
                                 env=dict(os.environ, UPSTREAMS=upstreams, LISTEN_PORT=port))
            assert out.returncode == 2 and expect in out.stderr, \
                f"render.sh with UPSTREAMS={upstreams!r} LISTEN_PORT={port}: {out.stderr}"
        out = subprocess.run([render, template, tmp], capture_output=True, text=True,
                             env=dict(os.environ, UPSTREAMS="10.0.0.1:50051,10.0.0.2:50051",
                                      LISTEN_PORT="8443"))
        assert out.returncode == 0, out.stderr
        with open(os.path.join(tmp, "nginx.conf")) as f:
            conf = f.read()
        assert conf.count("server 10.0.0.") == 2 and "listen 8443 http2;" in conf, conf
        nginx_t(tmp)
        # Resolved mode (compose): one NAME:PORT looked up at run time through RESOLVER.
        out = subprocess.run([render, template, tmp], capture_output=True, text=True,
                             env=dict(os.environ, UPSTREAMS="a:1,b:2", RESOLVER="10.0.0.53"))
        assert out.returncode == 2 and "one NAME:PORT" in out.stderr, out.stderr
        out = subprocess.run([render, template, tmp], capture_output=True, text=True,
                             env=dict(os.environ, UPSTREAMS="textgen:50051",
                                      RESOLVER="10.0.0.53", LISTEN_PORT="8443"))
        assert out.returncode == 0, out.stderr
        with open(os.path.join(tmp, "nginx.conf")) as f:
            conf = f.read()
        assert "resolver 10.0.0.53 valid=2s" in conf and "upstream textgen {" not in conf \
            and "set $textgen_replicas textgen:50051;" in conf \
            and "grpc_pass grpc://$textgen_replicas;" in conf, conf
        nginx_t(tmp)
    print("render.sh: refuses bad input; its output (static and resolved) passes nginx -t")


def nginx_t(prefix: str) -> None:
    out = subprocess.run([os.environ["NGINX"], "-t", "-e", "stderr", "-p", prefix, "-c",
                          "nginx.conf", "-g", f"pid {prefix}/nginx.pid;"],
                         capture_output=True, text=True)
    assert out.returncode == 0, f"nginx -t rejects the rendered config: {out.stderr}"


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("server", "model", "nginx_entrypoint", "client_dir", "stubs"):
        parser.add_argument(f"--{flag}", required=True)
    parser.add_argument("--nginx", default="nginx", help="the nginx binary")
    args = parser.parse_args()
    os.environ["NGINX"] = args.nginx  # Read by the entrypoint.
    textgen_client = import_client(args.client_dir, args.stubs)
    check_render(os.path.join(os.path.dirname(args.nginx_entrypoint), "render.sh"))

    with tempfile.TemporaryDirectory(prefix="textgen-nginx-") as workdir, \
            Cluster(args.server, args.model, workdir) as cluster:
        a, b = cluster.start_replicas(2, "--num_slots=4", "--drain_seconds=2")
        port = cluster.start_nginx(args.nginx_entrypoint, [a.address, b.address],
                                   CALLS_PER_SECOND)
        print(f"replicas {a.address} {b.address} behind nginx on 127.0.0.1:{port}")

        with textgen_client.TextgenClient(f"127.0.0.1:{port}") as client:
            # --- 1. 40 generations through nginx, spread over both replicas. ---
            with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
                texts = list(pool.map(lambda seed: generate(client, seed), range(40)))
            assert len(texts) == 40 and all(texts), "every generation returns text"
            ok_a, ok_b = a.ok_count(), b.ok_count()
            print(f"40 generations through nginx: {ok_a} on {a.name}, {ok_b} on {b.name}")
            assert ok_a > 0 and ok_b > 0, f"both replicas serve a share: {ok_a} and {ok_b}"
            assert ok_a + ok_b == 40, f"every call reached a replica once: {ok_a} + {ok_b}"
            assert sum(a.requests().values()) + sum(b.requests().values()) == 40, \
                "no call ended in an error on a replica"
            # The status of an OK call is in the trailers ($upstream_trailer_grpc_status).
            calls = [l for l in cluster.nginx_output().splitlines()
                     if '"POST /textgen.v1.TextGeneration/Generate' in l]
            ok = [l for l in calls if " 200 grpc-status=0 " in l]
            print(f"nginx access log: {len(ok)} of {len(calls)} calls logged with "
                  f"grpc-status=0, e.g. {calls[:1]}")
            assert len(calls) == 40 and len(ok) == 40, "the access log has every call's status"

            # --- 2. SIGKILL one replica while calls keep coming. ---
            ok_a_before = a.ok_count()
            results, t_signal, t_gone = calls_around(
                client, lambda: Cluster.kill(b, signal.SIGKILL))
        report(results, t_signal, t_gone)
        after = started_after(results, t_gone)
        assert len(after) >= 24, f"only {len(after)} calls started after the kill"
        failed = [o for o in after if o != "OK"]
        assert not failed, f"calls started after the kill failed: {failed}"
        gained = a.ok_count() - ok_a_before
        assert gained >= len(after), \
            f"the survivor served every call after the kill ({gained} < {len(after)})"
        log = cluster.nginx_output()
        errors = [l for l in log.splitlines() if "[error]" in l and b.address in l]
        print(f"nginx errors about {b.name} ({len(errors)}), first three:")
        for line in errors[:3]:
            print("  " + line[line.index("[error]"):][:220])
        assert f"upstream: \"grpc://{b.address}" in log, \
            "nginx logged the dead upstream it skipped"

    # --- 3. SIGTERM (graceful drain) instead, on a fresh pair. ---
    with tempfile.TemporaryDirectory(prefix="textgen-nginx-") as workdir, \
            Cluster(args.server, args.model, workdir) as cluster:
        a, b = cluster.start_replicas(2, "--num_slots=4", "--drain_seconds=30")
        port = cluster.start_nginx(args.nginx_entrypoint, [a.address, b.address],
                                   CALLS_PER_SECOND)
        with textgen_client.TextgenClient(f"127.0.0.1:{port}") as client:
            results, t_signal, t_gone = calls_around(
                client, lambda: Cluster.kill(b, signal.SIGTERM))
        print(f"SIGTERM: {b.name} exited with {b.proc.returncode}")
        assert b.proc.returncode == 0, "the drained replica exits 0"
        report(results, t_signal, t_gone)
        streaming = streaming_at(results, t_signal)
        assert all(o == "OK" for o in streaming), \
            f"calls streaming when SIGTERM came finish (the drain): {streaming}"
        after = started_after(results, t_gone)
        assert len(after) >= 24 and all(o == "OK" for o in after), \
            f"calls started after the drained replica exited succeed: {after}"
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
