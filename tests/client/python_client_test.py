"""client/python/textgen_client.py against a live textgen_server.

The streamed tokens equal the CLI's (--json) for the same request; attention comes back
shaped [layer][head][q][k] with rows summing to 1 and zeros above the diagonal; errors are
grpc.RpcError with the server's status code; the example runs.
"""

import json
import math
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "client", "python"))
from live_server import LiveServer, closed_port, parse_args  # noqa: E402

import grpc  # noqa: E402
from textgen_client import TextgenClient  # noqa: E402

ARGS = None


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.model)
        cls.client = TextgenClient(cls.server.target, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def cli_tokens(self, *flags):
        proc = subprocess.run([ARGS.cli, "--server", self.server.target, "generate", "--json",
                               *flags], capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return [json.loads(line)["token"] for line in proc.stdout.splitlines()
                if "token" in json.loads(line)]

    def test_generate_streams_what_the_cli_streams(self):
        for kwargs, flags in (
                (dict(max_new_tokens=100), ["--max_new_tokens", "100"]),
                (dict(max_new_tokens=80, temperature=0.9, top_k=30, seed=99),
                 ["--max_new_tokens", "80", "--temperature", "0.9", "--top_k", "30",
                  "--seed", "99"])):
            with self.subTest(kwargs=kwargs):
                stream = self.client.generate("ROMEO:", **kwargs)
                tokens = list(stream)
                expected = self.cli_tokens("--prompt", "ROMEO:", *flags)
                self.assertEqual([t.text for t in tokens], [t["text"] for t in expected])
                self.assertEqual([t.id for t in tokens], [t["id"] for t in expected])
                self.assertEqual(stream.finished.usage.generated_tokens, len(tokens))
                self.assertEqual(stream.finished.reason, 1)  # FINISH_REASON_LENGTH

    def test_text_joins_the_tokens(self):
        text = self.client.generate("JULIET:", max_new_tokens=50).text()
        tokens = self.cli_tokens("--prompt", "JULIET:", "--max_new_tokens", "50")
        self.assertEqual(text, "".join(t["text"] for t in tokens))

    def test_attention_has_bertviz_shape_and_is_causal(self):
        prompt = "ROMEO:\nBut soft"
        info = self.client.info()
        att = self.client.attention(prompt)
        t = len(prompt)  # character-level model
        self.assertEqual("".join(att.tokens), prompt)
        self.assertEqual(att.layers, list(range(info.num_layers)))
        self.assertEqual(att.heads, list(range(info.num_heads)))
        self.assertEqual(len(att.weights), info.num_layers)
        for layer in att.weights:
            self.assertEqual(len(layer), info.num_heads)
            for head in layer:
                self.assertEqual(len(head), t)
                for q, row in enumerate(head):
                    self.assertEqual(len(row), t)
                    self.assertTrue(math.isclose(sum(row), 1.0, abs_tol=1e-5), sum(row))
                    self.assertTrue(all(w == 0.0 for w in row[q + 1:]), row)
                    self.assertTrue(all(w >= 0.0 for w in row))
        # A selection is the same numbers as the full maps' entries.
        some = self.client.attention(prompt, layers=[1], heads=[0, 2])
        self.assertEqual((some.layers, some.heads), ([1], [0, 2]))
        self.assertEqual(some.weights[0][0], att.weights[1][0])
        self.assertEqual(some.weights[0][1], att.weights[1][2])

    def test_errors_are_rpc_errors_with_the_status(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.client.generate("x", temperature=-1).text()
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("temperature", e.exception.details())
        with self.assertRaises(grpc.RpcError) as e:
            self.client.attention("ROMEO:", layers=[99])
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with TextgenClient(f"127.0.0.1:{closed_port()}", timeout=30) as nowhere:
            with self.assertRaises(grpc.RpcError) as e:
                nowhere.health()
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_cancel_ends_the_stream(self):
        stream = self.client.generate("ROMEO:", max_new_tokens=250)
        tokens = iter(stream)
        next(tokens)
        stream.cancel()
        with self.assertRaises(grpc.RpcError) as e:
            list(tokens)
        self.assertEqual(e.exception.code(), grpc.StatusCode.CANCELLED)
        self.assertIsNone(stream.finished)

    def test_health_info_tokenize_and_round_robin(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.info().tokenizer, "char")
        self.assertEqual([text for _, text in self.client.tokenize("Hi\n")], ["H", "i", "\n"])
        port = self.server.port
        with TextgenClient(f"ipv4:127.0.0.1:{port},127.0.0.1:{port}",
                           lb_policy="round_robin") as rr:
            self.assertEqual(rr.health(), "SERVING")
            self.assertEqual(rr.generate("ROMEO:", max_new_tokens=20).text(),
                             self.client.generate("ROMEO:", max_new_tokens=20).text())

    def test_example_runs(self):
        env = dict(os.environ)
        stubs = env.pop("TEXTGEN_PY_STUBS", os.path.join(REPO, "build", "client", "python"))
        proc = subprocess.run(
            [sys.executable, os.path.join(REPO, "client", "python", "example.py"),
             "--target", self.server.target, "--max_new_tokens", "30", "--stubs", stubs],
            capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("health: SERVING", proc.stdout)
        self.assertIn("--- 30 tokens, seed 1", proc.stdout)
        self.assertIn("attention: 6 layers x 4 heads x 6 x 6", proc.stdout)


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
