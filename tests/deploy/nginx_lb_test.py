#!/usr/bin/python3
"""The repository's nginx config in front of two textgen_server replicas on loopback.

  nginx_lb_test.py --server build/server/textgen_server --model models/shakespeare-char
      --render deploy/nginx/render.sh --template deploy/nginx/nginx.conf.template
      --client_dir client/python --stubs build/client/python

1. 40 streamed generations over ONE client channel (one HTTP/2 connection to nginx) all
   succeed, and each replica's textgen_requests_total{code="OK"} has a share (> 0 each,
   sum 40): nginx balances per call, not per connection.
2. While streams keep coming, one replica is SIGKILLed: every call started after it is gone
   succeeds (nginx retries a refused connection on the other replica and marks the dead
   one failed). Calls that were streaming from it when it died are cut; they are reported,
   not asserted, since how many there are depends on timing.
"""

import argparse
import concurrent.futures
import os
import signal
import sys
import tempfile
import threading
import time

import grpc

from replicas import Cluster, import_client

PROMPT = "ROMEO:"
NEW_TOKENS = 24


def generate(client, seed: int) -> str:
    """One streamed generation; checks it is whole and returns its text."""
    stream = client.generate(PROMPT, max_new_tokens=NEW_TOKENS, temperature=0.8, seed=seed,
                             timeout=60)
    tokens = [t for t in stream if not t.is_prompt]
    if stream.finished is None:
        raise AssertionError(f"seed {seed}: the stream ended without a Finished message")
    if stream.finished.usage.generated_tokens != len(tokens) or not tokens:
        raise AssertionError(f"seed {seed}: {len(tokens)} tokens streamed, Finished says "
                             f"{stream.finished.usage.generated_tokens}")
    return "".join(t.text for t in tokens)


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("server", "model", "render", "template", "client_dir", "stubs"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args()
    textgen_client = import_client(args.client_dir, args.stubs)

    with tempfile.TemporaryDirectory(prefix="textgen-nginx-") as workdir, \
            Cluster(args.server, args.model, workdir) as cluster:
        a, b = cluster.start_replicas(2, "--num_slots=4", "--drain_seconds=2")
        port = cluster.start_nginx(args.render, args.template, [a.address, b.address])
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

            # --- 2. SIGKILL one replica while calls keep coming. ---
            results = []  # (started after the kill?, outcome)
            lock = threading.Lock()
            killed = threading.Event()
            stop = threading.Event()
            seeds = iter(range(1000, 100000))

            def worker():
                while not stop.is_set():
                    with lock:
                        seed = next(seeds)
                    after = killed.is_set()  # Read before the call starts.
                    try:
                        generate(client, seed)
                        outcome = "OK"
                    except grpc.RpcError as e:
                        outcome = f"{e.code().name}: {e.details()}"
                    with lock:
                        results.append((after, outcome))

            workers = [threading.Thread(target=worker) for _ in range(4)]
            for w in workers:
                w.start()
            try:
                # Let calls run on both replicas, then kill b in the middle of them.
                while True:
                    with lock:
                        if len(results) >= 8:
                            break
                    time.sleep(0.01)
                ok_a_before = a.ok_count()
                Cluster.kill(b, signal.SIGKILL)
                killed.set()
                # Keep going until 24 calls have started (and ended) after the kill.
                deadline = time.monotonic() + 50
                while time.monotonic() < deadline:
                    with lock:
                        if sum(1 for after, _ in results if after) >= 24:
                            break
                    time.sleep(0.01)
            finally:
                stop.set()
                for w in workers:
                    w.join(timeout=60)

        before = [o for after, o in results if not after]
        after = [o for after, o in results if after]
        cut = [o for o in before if o != "OK"]
        print(f"before/at the kill: {len(before)} calls, {len(cut)} cut: {cut}")
        print(f"after the kill: {len(after)} calls, "
              f"{sum(o == 'OK' for o in after)} OK")
        assert len(after) >= 24, f"only {len(after)} calls started after the kill"
        failed = [o for o in after if o != "OK"]
        assert not failed, f"calls started after the kill failed: {failed}"
        gained = a.ok_count() - ok_a_before
        assert gained >= len(after), \
            f"the survivor served every call after the kill ({gained} < {len(after)})"
        log = cluster.nginx_error_log()
        assert b.address in log, "nginx logged the dead upstream it skipped"
        print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
