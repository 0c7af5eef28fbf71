#!/usr/bin/python3
"""Client-side load balancing without a proxy: two replicas, one client channel.

  round_robin_test.py --server build/server/textgen_server --model models/shakespeare-char
      --client_dir client/python --stubs build/client/python [--cli build/client/textgen]

The target lists both replicas (`ipv4:127.0.0.1:A,127.0.0.1:B`, what `dns:///` on a
Kubernetes headless Service resolves to). With gRPC's default pick_first policy every call
goes to one replica (the trap: one long-lived connection); with round_robin the calls of
the same channel spread over both. With --cli, the C++ CLI's round_robin over the same
target works (one call per process, so there is nothing for it to spread; see below).
"""

import argparse
import subprocess
import sys
import tempfile

from replicas import Cluster, import_client

CALLS = 20


def run_calls(textgen_client, target, lb_policy, seed0):
    with textgen_client.TextgenClient(target, lb_policy=lb_policy, timeout=60) as client:
        for seed in range(seed0, seed0 + CALLS):
            text = client.generate("JULIET:", max_new_tokens=16, temperature=0.8,
                                   seed=seed).text()
            assert text, f"seed {seed}: empty generation"


def shares(replicas, before):
    return [r.ok_count() - b for r, b in zip(replicas, before)]


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("server", "model", "client_dir", "stubs"):
        parser.add_argument(f"--{flag}", required=True)
    parser.add_argument("--cli", help="the C++ CLI (build/client/textgen), also checked")
    args = parser.parse_args()
    textgen_client = import_client(args.client_dir, args.stubs)

    with tempfile.TemporaryDirectory(prefix="textgen-rr-") as workdir, \
            Cluster(args.server, args.model, workdir) as cluster:
        replicas = cluster.start_replicas(2, "--num_slots=4")
        target = "ipv4:" + ",".join(r.address for r in replicas)
        print(f"target {target}")

        # pick_first (gRPC's default): one connection, every call on one replica.
        before = [r.ok_count() for r in replicas]
        run_calls(textgen_client, target, None, 0)
        pick_first = shares(replicas, before)
        print(f"pick_first: {pick_first}")
        assert sorted(pick_first) == [0, CALLS], \
            f"pick_first keeps every call on one replica: {pick_first}"

        # round_robin: the same channel's calls alternate over both.
        before = [r.ok_count() for r in replicas]
        run_calls(textgen_client, target, "round_robin", 100)
        rr = shares(replicas, before)
        print(f"round_robin (Python client): {rr}")
        assert all(n > 0 for n in rr) and sum(rr) == CALLS, \
            f"round_robin spreads calls over both replicas: {rr}"

        if args.cli:
            # The CLI makes one Generate call per process, i.e. one channel per call, so its
            # round_robin has nothing to rotate over: each process's call goes to whichever
            # address connects first (here nearly always the same one). Spreading needs
            # many calls on one channel, as above. What is checked for the CLI: it accepts
            # the multi-address target with round_robin, and every call succeeds.
            before = [r.ok_count() for r in replicas]
            for seed in range(CALLS):
                out = subprocess.run(
                    [args.cli, "--server", target, "--lb_policy", "round_robin", "generate",
                     "--prompt", "ROMEO:", "--max_new_tokens", "8", "--temperature", "0.8",
                     "--seed", str(seed)],
                    capture_output=True, text=True, timeout=60)
                assert out.returncode == 0, f"CLI failed ({out.returncode}): {out.stderr}"
                assert out.stdout.strip(), "the CLI printed the generated text"
            cli = shares(replicas, before)
            print(f"round_robin (CLI, {CALLS} processes of one call each): {cli}")
            assert sum(cli) == CALLS, f"each CLI call reached a replica once: {cli}"
        print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
