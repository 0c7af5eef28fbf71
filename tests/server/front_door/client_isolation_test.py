"""Clients kept apart in the engine of a live textgen_server with --auth_tokens_file
(server/README.md "KV cache"), over gRPC on loopback:

- Prefix cache per client: client A sends a prompt, then client B the same prompt: B finds
  nothing cached (textgen_prefix_cache_hit_tokens_total does not move, and its usage reports
  no cached tokens), while A sending its prompt again is a hit of its whole blocks.
- Per-client KV share (--client_max_kv_fraction, default 0.5): with --num_slots 64
  --kv_cache_tokens 8192 (512 blocks of 16), client A opens 32 long streams (its
  --client_max_streams default) that would reserve all 512 blocks, and reads none of them:
  it holds at most 256 (textgen_kv_blocks{state="used"}), the rest of its streams wait, and
  client B's 8-token request finishes well within its deadline.

Metrics are read from --metrics_port with a --metrics_token_file token.
"""

import os
import re
import time
import unittest
import urllib.request

from common import LiveServer, TextgenClient, closed_port, parse_args, temp_dir, write

ARGS = None
WAIT = 60  # Bound on waits that should take a second or two (against hangs only).


def held_channel_options():
    """A small, fixed HTTP/2 window: a stream nobody reads stalls the server soon, so it
    stays open and keeps its blocks (the engine pauses that sequence)."""
    return [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024),
            ("grpc.use_local_subchannel_pool", 1)]


class ServerWithTokens:
    """A server with tokens "token-a" and "token-b" and a metrics port."""

    def __init__(self, *flags):
        directory = temp_dir("textgen_isolation_")
        tokens = write(os.path.join(directory, "tokens"),
                       "generate token-a\ngenerate token-b\n")
        metrics_token = write(os.path.join(directory, "metrics_token"), "scrape\n")
        self.metrics_port = closed_port()
        self.server = LiveServer(ARGS.server_bin, ARGS.model, f"--auth_tokens_file={tokens}",
                                 f"--metrics_port={self.metrics_port}",
                                 f"--metrics_token_file={metrics_token}", *flags)

    def metrics(self):
        """{name with labels: value} of every sample on /metrics."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                         headers={"Authorization": "Bearer scrape"})
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            text = response.read().decode()
        samples = {}
        for line in text.splitlines():
            match = re.match(r"^([a-zA-Z_:][^ ]*) ([-+0-9.eE]+|NaN)$", line)
            if match:
                samples[match.group(1)] = float(match.group(2))
        return samples

    def client(self, token, **kwargs):
        return TextgenClient(self.server.target, token=token, timeout=WAIT, **kwargs)

    def stop(self):
        self.server.stop()


class PrefixCachePerClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerWithTokens()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def hits(self):
        return self.server.metrics()["textgen_prefix_cache_hit_tokens_total"]

    def generate(self, token, prompt):
        """Sends prompt as `token`; the Finished message."""
        with self.server.client(token) as client:
            stream = client.generate(prompt, max_new_tokens=2, seed=1)
            stream.text()
            return stream.finished

    def cached_fields(self, finished):
        """Any usage field that reports cached tokens (none today): name -> value."""
        return {field.name: getattr(finished.usage, field.name)
                for field in finished.usage.DESCRIPTOR.fields if "cache" in field.name}

    def test_a_second_client_cannot_see_the_first_ones_prompt(self):
        # 100 characters of the character model: six full blocks of 16 before the last
        # token, which is always computed.
        prompt = ("ROMEO: But soft, what light through yonder window breaks? "
                  "It is the east, and Juliet is the sun. Arise, fair sun.")[:100]
        self.assertEqual(len(prompt), 100)
        before = self.hits()
        first = self.generate("token-a", prompt)
        self.assertEqual(first.usage.prompt_tokens, 100)
        self.assertEqual(self.hits(), before, "a cold cache")

        # Client B, the same text: no hit, in the metrics or in its usage.
        other = self.generate("token-b", prompt)
        self.assertEqual(self.hits(), before, "B must not find A's prompt cached")
        self.assertEqual(other.usage.prompt_tokens, 100)
        for name, value in self.cached_fields(other).items():
            self.assertEqual(value, 0, name)

        # Client A again: its own six blocks are found.
        self.generate("token-a", prompt)
        self.assertEqual(self.hits(), before + 96, "A finds its own prompt")
        # And B again finds its own copy.
        self.generate("token-b", prompt)
        self.assertEqual(self.hits(), before + 2 * 96)


class KvSharePerClientTest(unittest.TestCase):
    STREAMS = 32  # --client_max_streams' default with tokens: half of --num_slots.
    POOL_BLOCKS = 512  # --kv_cache_tokens 8192 in blocks of 16.

    def test_one_client_holds_at_most_its_share_while_another_finishes(self):
        server = ServerWithTokens("--num_slots=64", "--kv_cache_tokens=8192",
                                  "--stream_idle_timeout=120")
        a = server.client("token-a", options=held_channel_options())
        held = []
        try:
            share = self.POOL_BLOCKS // 2
            # Each stream may fill the model's whole context (256 positions: 16 blocks):
            # 32 of them would reserve all 512 blocks. Top logprobs make each message large,
            # so an unread stream stalls after a few tokens and keeps its blocks.
            for _ in range(self.STREAMS):
                held.append(a.generate("ROMEO:", max_new_tokens=1000, top_logprobs=20,
                                       timeout=300))
            deadline = time.monotonic() + WAIT * ARGS.time_scale
            metrics = server.metrics()
            while time.monotonic() < deadline:
                metrics = server.metrics()
                if (metrics["textgen_num_requests_running"]
                        + metrics["textgen_num_requests_waiting"] == self.STREAMS
                        and metrics['textgen_kv_blocks{state="used"}'] >= share):
                    break
                time.sleep(0.05)
            used = metrics['textgen_kv_blocks{state="used"}']
            print(f"client A: {metrics['textgen_num_requests_running']:.0f} running, "
                  f"{metrics['textgen_num_requests_waiting']:.0f} waiting, {used:.0f} of "
                  f"{self.POOL_BLOCKS} blocks used", flush=True)
            self.assertEqual(used, share, "A holds exactly its share: 16 streams of 16")
            self.assertEqual(metrics["textgen_num_requests_running"], self.STREAMS // 2)
            self.assertEqual(metrics["textgen_num_requests_waiting"], self.STREAMS // 2)

            # Client B's 8-token request is admitted beside A's and finishes.
            deadline_seconds = 10 * ARGS.time_scale
            with server.client("token-b") as b:
                started = time.monotonic()
                stream = b.generate("ROMEO:", max_new_tokens=8, timeout=deadline_seconds)
                text = stream.text()
                took = time.monotonic() - started
            print(f"client B's 8 tokens in {took * 1000:.0f} ms "
                  f"(deadline {deadline_seconds:.0f} s)", flush=True)
            self.assertEqual(stream.finished.usage.generated_tokens, 8, text)
            self.assertLess(took, deadline_seconds / 2)
            # A still holds no more than its share.
            metrics = server.metrics()
            self.assertLessEqual(metrics['textgen_kv_blocks{state="used"}'], share)
            self.assertEqual(metrics["textgen_num_requests_waiting"], self.STREAMS // 2)
        finally:
            for stream in held:
                stream.cancel()
            a.close()
            server.stop()


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
