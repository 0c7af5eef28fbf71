"""The textgen CLI and the Python client with an encoder-decoder model (issue 20).

A live textgen_server serves the tiny random encoder-decoder checkpoint that
tests/testing/make_tiny_seq2seq.py writes into a temporary directory (--model is ignored: the
checkpoint is made here). What they show:
  - `textgen generate --source` streams the same text as the Python client's
    generate(source=...); --json carries usage.source_tokens; the tap table names the
    cross rows ("cross L1 H0"), one weight per source token;
  - a missing source is the server's FAILED_PRECONDITION, in one line, exit 1; --source
    with --source_ids is a usage error (exit 2);
  - `textgen attention --source --out` draws every kind as a section, and every cell of
    every section is the colour of the weight the server serves (attention_png_check
    --source), cross panels with the source's tokens as columns;
  - `--html` embeds the maps with their kinds: cross maps T rows of S weights;
  - the Python client's attention(source=...) has encoder (S x S), decoder (T x T) and
    cross (T x S) maps, rows summing to 1;
  - HTTP: a completion's `prompt` is the source (the same answer as gRPC's, usage counting
    the source), `echo` is an OpenAI-shaped 400, the tap's cross rows say so, GET
    /v1/models reports the architecture, POST /v1/attention takes "source".

    /usr/bin/python3 tests/client/seq2seq_client_test.py --server_bin build/server/textgen_server \
        --model unused --cli build/client/textgen \
        --png_check build/tests/client/attention_png_check
"""

import json
import os
import urllib.error
import urllib.request
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "client", "python"))
from live_server import parse_args, start_with_http  # noqa: E402

import grpc  # noqa: E402
from textgen_client import TextgenClient, textgen_pb2  # noqa: E402

ARGS = None
SOURCE = "3rd of March 99"
ENCODER_LAYERS, DECODER_LAYERS, HEADS = 3, 2, 2


class Seq2seqClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "tiny-seq2seq")
        subprocess.run([sys.executable, os.path.join(REPO, "tests", "testing", "make_tiny_seq2seq.py"),
                        cls.model], check=True)
        cls.server, cls.http_port = start_with_http(ARGS.server_bin, cls.model)
        cls.client = TextgenClient(cls.server.target, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()
        cls.tmp.cleanup()

    def cli(self, *args):
        proc = subprocess.run([ARGS.cli, "--server", self.server.target, *args],
                              capture_output=True, timeout=120)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def test_info_says_encoder_decoder(self):
        info = self.client.info()
        self.assertEqual(info.architecture, "encoder-decoder")
        self.assertEqual(info.num_encoder_layers, ENCODER_LAYERS)
        self.assertEqual(info.num_layers, DECODER_LAYERS)
        rc, out, err = self.cli("info")
        self.assertEqual(rc, 0, err)
        self.assertIn('architecture: "encoder-decoder"', out)
        self.assertIn("num_encoder_layers: 3", out)

    def test_generate_with_source_equals_the_python_client(self):
        rc, out, err = self.cli("generate", "--source", SOURCE, "--max_new_tokens", "10")
        self.assertEqual(rc, 0, err)
        tokens = list(self.client.generate(source=SOURCE, max_new_tokens=10))
        self.assertTrue(tokens)
        self.assertEqual(out, "".join(t.text for t in tokens))
        # Token ids for the source: the same answer.
        ids = [t[0] for t in self.client.tokenize(SOURCE)]
        again = self.client.generate(source_ids=ids, max_new_tokens=10)
        self.assertEqual([t.id for t in again], [t.id for t in tokens])

        rc, out, err = self.cli("generate", "--json", "--source", SOURCE,
                                "--max_new_tokens", "3")
        self.assertEqual(rc, 0, err)
        finished = [json.loads(line) for line in out.splitlines()][-1]["finished"]
        self.assertEqual(finished["usage"]["source_tokens"], len(SOURCE))
        self.assertEqual(finished["usage"]["prompt_tokens"], 1)  # [BOS]

    def test_tap_table_names_cross_rows(self):
        rc, out, err = self.cli("generate", "--source", SOURCE, "--max_new_tokens", "2",
                                "--attention_tap", "--tap_layers", "1", "--tap_heads", "0")
        self.assertEqual(rc, 0, err)
        rows = [line.split("\t") for line in out.splitlines() if line.startswith("\t")]
        self.assertEqual([r[1] for r in rows], ["L1 H0", "cross L1 H0"] * 2)
        for cells in rows[1::2]:
            weights = [float(w) for w in cells[2].split(" ")]
            self.assertEqual(len(weights), len(SOURCE))
            self.assertAlmostEqual(sum(weights), 1.0, places=3)

    def test_source_errors(self):
        rc, out, err = self.cli("generate", "--prompt", "19")
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertEqual(err.splitlines(), [
            "textgen: FAILED_PRECONDITION: this is an encoder-decoder model: send `source` "
            "(the text or token ids its encoder reads); `prompt` is optional (the start of "
            "the answer)"])
        rc, _, err = self.cli("generate", "--source", "a", "--source_ids", "1")
        self.assertEqual(rc, 2)
        self.assertIn("--source and --source_ids exclude each other", err)
        with self.assertRaises(grpc.RpcError) as caught:
            list(self.client.generate(source=""))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("source.text is empty", caught.exception.details())

    def test_attention_png_draws_every_kind_cell_by_cell(self):
        png = os.path.join(self.tmp.name, "s2s.png")
        rc, _, err = self.cli("attention", "--source", SOURCE, "--prompt", "1999",
                              "--out", png)
        self.assertEqual(rc, 0, err)
        t, s = 5, len(SOURCE)  # [BOS] 1 9 9 9; one token per character.
        self.assertIn(f"sections (rows x columns): encoder self {s}x{s}, decoder self "
                      f"{t}x{t}, cross {t}x{s}", err)
        check = subprocess.run([ARGS.png_check, "--server", self.server.target, "--png", png,
                                "--prompt", "1999", "--source", SOURCE],
                               capture_output=True, timeout=120)
        self.assertEqual(check.returncode, 0, check.stderr.decode())
        report = check.stdout.decode()
        self.assertIn(f"cross: 2 layers x 2 heads, {t}x{s} of {t}x{s} tokens", report)
        self.assertIn(f"encoder self: 3 layers x 2 heads, {s}x{s}", report)
        self.assertIn(f"decoder self: 2 layers x 2 heads, {t}x{t}", report)

    def test_attention_html_embeds_kinds(self):
        html = os.path.join(self.tmp.name, "s2s.html")
        rc, _, err = self.cli("attention", "--source", SOURCE, "--html", html)
        self.assertEqual(rc, 0, err)
        with open(html, encoding="utf-8") as f:
            data = json.loads(f.read().split('id="data">')[1].split("</script>")[0])
        self.assertEqual("".join(tok["text"] for tok in data["source_tokens"]), SOURCE)
        self.assertEqual([tok["id"] for tok in data["tokens"]], [97])  # [BOS] alone
        s = len(SOURCE)
        kinds = {}
        for m in data["maps"]:
            kinds.setdefault(m["kind"], []).append(m)
            rows = {"cross": 1, "decoder_self": 1, "encoder_self": s}[m["kind"]]
            self.assertEqual(len(m["weights"]), rows)
            for row in m["weights"]:
                self.assertEqual(len(row), 1 if m["kind"] == "decoder_self" else s)
                self.assertAlmostEqual(sum(row), 1.0, places=2)
        self.assertEqual({k: len(v) for k, v in kinds.items()},
                         {"encoder_self": 6, "decoder_self": 4, "cross": 4})

    def test_python_attention_with_source(self):
        att = self.client.attention("19", source=SOURCE)
        s, t = len(SOURCE), 3
        self.assertEqual("".join(att.source_tokens), SOURCE)
        self.assertEqual(att.token_ids[0], 97)
        self.assertEqual(att.layers, [0, 1])
        self.assertEqual(att.encoder_layers, [0, 1, 2])
        self.assertEqual(att.heads, [0, 1])
        for maps, rows, keys in ((att.weights, t, t), (att.encoder_weights, s, s),
                                 (att.cross_weights, t, s)):
            for per_head in maps:
                for m in per_head:
                    self.assertEqual(len(m), rows)
                    for row in m:
                        self.assertEqual(len(row), keys)
                        self.assertAlmostEqual(sum(row), 1.0, places=5)
        # The absent prompt is [BOS]; a decoder-only style call without a source fails.
        self.assertEqual(self.client.attention(source=SOURCE).token_ids, [97])
        with self.assertRaises(grpc.RpcError) as caught:
            self.client.attention("19")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    # ---- HTTP ------------------------------------------------------------------------------

    def http(self, path, body=None):
        """(status, parsed JSON or the raw text for event streams)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as e:
            text, status = e.read().decode(), e.code
        return status, (text if text.startswith("data:") else json.loads(text))

    def test_http_completion_prompt_is_the_source(self):
        status, reply = self.http("/v1/completions", {"prompt": SOURCE, "max_tokens": 8,
                                                      "temperature": 0})
        self.assertEqual(status, 200, reply)
        tokens = list(self.client.generate(source=SOURCE, max_new_tokens=8))
        self.assertEqual(reply["choices"][0]["text"], "".join(t.text for t in tokens))
        self.assertEqual(reply["usage"]["prompt_tokens"], len(SOURCE))
        self.assertEqual(reply["usage"]["completion_tokens"], len(tokens))

        status, reply = self.http("/v1/completions", {"prompt": SOURCE, "echo": True})
        self.assertEqual(status, 400)
        self.assertEqual(reply["error"]["type"], "invalid_request_error")
        self.assertEqual(reply["error"]["param"], "echo")
        self.assertIn("encoder-decoder", reply["error"]["message"])

        status, events = self.http("/v1/completions", {
            "prompt": SOURCE, "max_tokens": 2, "stream": True,
            "attention_tap": {"layers": [0], "heads": [1]}})
        self.assertEqual(status, 200, events)
        chunks = [json.loads(e[6:]) for e in events.split("\n\n")
                  if e.startswith("data: {")]
        rows = [r for c in chunks for r in c["choices"][0].get("attention", [])]
        self.assertEqual([r.get("kind") for r in rows], [None, "cross"] * 2)
        for cross in rows[1::2]:
            self.assertEqual(len(cross["weights"]), len(SOURCE))

        status, models = self.http("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(models["data"][0]["architecture"], "encoder-decoder")
        self.assertEqual(models["data"][0]["num_encoder_layers"], ENCODER_LAYERS)

    def test_http_attention_takes_a_source(self):
        status, att = self.http("/v1/attention", {"source": SOURCE, "prompt": [97, 20]})
        self.assertEqual(status, 200, att)
        self.assertEqual("".join(t["text"] for t in att["source_tokens"]), SOURCE)
        self.assertEqual([t["id"] for t in att["tokens"]], [97, 20])
        self.assertEqual(att["num_encoder_layers"], ENCODER_LAYERS)
        cross = [m for m in att["maps"] if m["kind"] == "cross"]
        self.assertEqual(len(cross), DECODER_LAYERS * HEADS)
        for m in cross:
            self.assertEqual([len(r) for r in m["weights"]], [len(SOURCE)] * 2)
        status, err = self.http("/v1/attention", {"prompt": "19"})
        self.assertEqual(status, 400)  # FAILED_PRECONDITION is a 400, as OpenAI has no 412
        self.assertIn("send `source`", err["error"]["message"])


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
