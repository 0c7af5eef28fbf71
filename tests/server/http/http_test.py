"""The HTTP API of a live textgen_server (server/http/http_server.h), label http (and e2e):

- the official `openai` npm SDK (tests/npm, pinned by its lock file) streams a completion and
  gets exactly the tokens, texts and log-probabilities gRPC Generate returns for the same
  prompt, seed and settings; non-streaming too; echo, stop strings, token-id prompts and
  stream_options.include_usage;
- HTTP and gRPC refuse the same bad request with the same message (one validation);
- every error status (400, 401, 403, 404, 413, 429, 503) with OpenAI's error JSON;
- the drain: a completion arriving in its linger is served, one after it is 503;
- a client that disconnects mid-stream: its request is cancelled and the slot is free again
  (GET /metrics);
- /v1/models, /tokenize, /v1/attention (rounded, lower triangle only; streamed in bands of
  rows as the pass computes them; the u8 encoding, and
  the page plus a 256-token all-heads reply <= 2 MB gzip-compressed) and /health;
- the curl example of server/README.md, run as printed.

The SDK parts need node and `npm ci --prefix tests/npm` (scripts/test.sh runs it); without
node_modules they are skipped, saying why, except under CI=true, where that fails.
"""

import base64
import gzip
import http.client
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
NPM_DIR = os.path.join(REPO, "tests", "npm")
OPENAI_JS = os.path.join(NPM_DIR, "openai_completion.js")
sys.path.insert(0, os.path.join(REPO, "tests", "server", "front_door"))
from common import (TextgenClient, grpc, make_certs, parse_args, temp_dir,  # noqa: E402
                    write)
from live_server import start_with_http  # noqa: E402

ARGS = None
WAIT = 60  # Bound on waits for things that take a second or two (against hangs only).
PROMPT = "ROMEO:"


def sdk_missing():
    """Why the SDK tests cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not os.path.isfile(os.path.join(NPM_DIR, "node_modules", "openai", "package.json")):
        return ("the openai npm package is not installed in tests/npm "
                "(run `npm ci --prefix tests/npm`; scripts/test.sh does)")
    return None


def start(*flags):
    """A server with the HTTP API on a free port; (server, http port)."""
    return start_with_http(ARGS.server_bin, ARGS.model, *flags)


def call(port, method, path, body=None, headers=None, raw=None):
    """(status, headers, parsed JSON or text) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        text = response.read().decode()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        return response.status, dict(response.getheaders()), parsed
    finally:
        conn.close()


def metric(port, name):
    """The value of one metric line (name with its labels) from GET /metrics, or 0."""
    status, _, text = call(port, "GET", "/metrics")
    assert status == 200, text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


class OpenAiShapeMixin:
    def assertOpenAiError(self, status, headers, body, want_status, param=None):
        self.assertEqual(status, want_status, body)
        self.assertEqual(headers.get("Content-Type"), "application/json")
        self.assertIsInstance(body, dict, body)
        self.assertEqual(set(body), {"error"}, body)
        error = body["error"]
        self.assertEqual(set(error), {"message", "type", "param", "code"}, error)
        self.assertIsInstance(error["message"], str)
        self.assertTrue(error["message"])
        self.assertIsInstance(error["type"], str)
        self.assertIsInstance(error["code"], str)
        if param is not None:
            self.assertEqual(error["param"], param)
        return error


class HttpApiTest(OpenAiShapeMixin, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server, cls.port = start("--max_receive_message_bytes=65536",
                                     "--max_new_tokens_limit=512")
        cls.client = TextgenClient(cls.server.target, timeout=WAIT)
        cls.base_url = f"http://127.0.0.1:{cls.port}/v1"

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def sdk(self, request, api_key="unused"):
        reason = sdk_missing()
        if reason:
            if os.environ.get("CI") == "true":
                self.fail(reason)
            self.skipTest(reason)
        proc = subprocess.run(["node", OPENAI_JS, self.base_url, api_key, json.dumps(request)],
                              capture_output=True, text=True, timeout=WAIT * 2)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def grpc_tokens(self, **kwargs):
        stream = self.client.generate(PROMPT, **kwargs)
        tokens = list(stream)
        return tokens, stream.finished

    # The settings compared: greedy; and sampling with every control and alternatives.
    SETTINGS = [
        ({"max_tokens": 40, "temperature": 0},
         {"max_new_tokens": 40}),
        ({"max_tokens": 60, "temperature": 0.9, "top_p": 0.9, "top_k": 20,
          "repetition_penalty": 1.1, "seed": 1234, "logprobs": 3},
         {"max_new_tokens": 60, "temperature": 0.9, "top_p": 0.9, "top_k": 20,
          "repetition_penalty": 1.1, "seed": 1234, "top_logprobs": 3}),
    ]

    def assertLogprobsEqual(self, logprobs, tokens):
        """OpenAI's legacy logprobs object equals gRPC's numbers exactly."""
        self.assertEqual(logprobs["tokens"], [t.text for t in tokens])
        self.assertEqual(logprobs["token_logprobs"], [t.logprob for t in tokens])
        want_top = []
        for t in tokens:
            top = {}
            for alt in t.top_logprobs:
                top.setdefault(alt.text, alt.logprob)
            want_top.append(top)
        self.assertEqual(logprobs["top_logprobs"], want_top)

    def test_sdk_stream_equals_grpc_generate(self):
        for body, grpc_kwargs in self.SETTINGS:
            with self.subTest(body=body):
                tokens, finished = self.grpc_tokens(**grpc_kwargs)
                request = {"model": "shakespeare-char", "prompt": PROMPT, "stream": True,
                           "stream_options": {"include_usage": True}, **body}
                chunks = self.sdk(request)["chunks"]
                # One chunk per token, then the finish chunk, then the usage chunk.
                token_chunks, finish_chunk, usage_chunk = chunks[:-2], chunks[-2], chunks[-1]
                self.assertEqual(len(token_chunks), len(tokens))
                self.assertEqual([c["choices"][0]["token_ids"] for c in token_chunks],
                                 [[t.id] for t in tokens])
                self.assertEqual([c["choices"][0]["text"] for c in token_chunks],
                                 [t.text for t in tokens])
                if "logprobs" in body:
                    for chunk, token in zip(token_chunks, tokens):
                        self.assertLogprobsEqual(chunk["choices"][0]["logprobs"], [token])
                else:
                    self.assertTrue(all(c["choices"][0]["logprobs"] is None
                                        for c in token_chunks))
                self.assertEqual(finish_chunk["choices"][0]["finish_reason"], "length")
                self.assertEqual(usage_chunk["choices"], [])
                self.assertEqual(usage_chunk["usage"], {
                    "prompt_tokens": finished.usage.prompt_tokens,
                    "completion_tokens": finished.usage.generated_tokens,
                    "total_tokens": finished.usage.prompt_tokens
                    + finished.usage.generated_tokens})
                if "seed" in body:
                    self.assertEqual(finish_chunk["seed"], body["seed"])
                # Streamed: the chunks did not all arrive at once (reported, not a timing
                # assertion: they are in order of arrival).
                self.assertEqual([c["ms"] for c in chunks], sorted(c["ms"] for c in chunks))

    def test_sdk_response_equals_grpc_generate(self):
        for body, grpc_kwargs in self.SETTINGS:
            with self.subTest(body=body):
                tokens, finished = self.grpc_tokens(**grpc_kwargs)
                response = self.sdk({"model": "shakespeare-char", "prompt": PROMPT,
                                     **body})["response"]
                self.assertEqual(response["object"], "text_completion")
                [choice] = response["choices"]
                self.assertEqual(choice["text"], "".join(t.text for t in tokens))
                self.assertEqual(choice["token_ids"], [t.id for t in tokens])
                self.assertEqual(choice["finish_reason"], "length")
                if "logprobs" in body:
                    self.assertLogprobsEqual(choice["logprobs"], tokens)
                    offsets = choice["logprobs"]["text_offset"]
                    self.assertEqual(offsets, [sum(len(t.text.encode()) for t in tokens[:i])
                                               for i in range(len(tokens))])
                self.assertEqual(response["usage"]["completion_tokens"],
                                 finished.usage.generated_tokens)

    def test_echo_stop_and_token_id_prompts_equal_grpc(self):
        ids = [i for i, _ in self.client.tokenize("JULIET:")]
        stream = self.client.generate(prompt_ids=ids, max_new_tokens=80, echo_prompt=True,
                                      stop=["\n\n"], temperature=0.7, seed=99)
        tokens = list(stream)
        status, _, response = call(self.port, "POST", "/v1/completions", {
            "prompt": ids, "max_tokens": 80, "echo": True, "stop": "\n\n",
            "temperature": 0.7, "seed": 99, "logprobs": 0})
        self.assertEqual(status, 200, response)
        [choice] = response["choices"]
        self.assertEqual(choice["text"], "".join(t.text for t in tokens))
        self.assertEqual(choice["token_ids"], [t.id for t in tokens])
        self.assertTrue(choice["text"].startswith("JULIET:"))
        # Without logprobs the echoed prompt is not scored.
        status, _, plain = call(self.port, "POST", "/v1/completions", {
            "prompt": ids, "max_tokens": 80, "echo": True, "stop": "\n\n",
            "temperature": 0.7, "seed": 99})
        self.assertEqual(status, 200, plain)
        self.assertEqual(plain["choices"][0]["text"], choice["text"])
        self.assertIsNone(plain["choices"][0]["logprobs"])
        # With them, the prompt is scored (prompt_logprobs) except its first token (null,
        # as OpenAI's), and the generated tokens are what gRPC sent.
        scored = list(self.client.generate(prompt_ids=ids, max_new_tokens=0,
                                           prompt_logprobs=1))
        self.assertEqual([t.id for t in scored], ids)
        self.assertEqual(choice["logprobs"]["token_logprobs"][:len(ids)],
                         [None] + [t.logprob for t in scored[1:]])
        generated = [t for t in tokens if not t.is_prompt]
        want_reason = {1: "length", 2: "stop", 3: "stop", 4: "length"}[stream.finished.reason]
        if stream.finished.reason == 2:  # A stop string: its tokens carry no logprobs.
            self.assertEqual(generated[-1].text, "")
            while generated and not generated[-1].text:
                generated.pop()
        self.assertEqual(choice["logprobs"]["token_logprobs"][len(ids):],
                         [t.logprob for t in generated])
        self.assertEqual(choice["finish_reason"], want_reason)

    def test_stop_string_tokens_are_left_out_of_logprobs(self):
        request = {"prompt": PROMPT, "max_tokens": 40, "temperature": 0, "logprobs": 1}
        status, _, free = call(self.port, "POST", "/v1/completions", request)
        self.assertEqual(status, 200, free)
        text = free["choices"][0]["text"]
        stop = text[20:23]  # Three characters (tokens) the greedy answer holds.
        cut = text.index(stop)
        status, _, stopped = call(self.port, "POST", "/v1/completions",
                                  {**request, "stop": stop})
        self.assertEqual(status, 200, stopped)
        choice = stopped["choices"][0]
        self.assertEqual(choice["finish_reason"], "stop")
        self.assertEqual(choice["text"], text[:cut])
        # token_ids keep every token generated; logprobs only those of the text.
        tokens = choice["logprobs"]["tokens"]
        self.assertEqual("".join(tokens), text[:cut])
        self.assertEqual(len(tokens), cut)  # One character per token here.
        self.assertEqual(len(choice["token_ids"]), cut + len(stop))
        self.assertEqual(choice["logprobs"]["token_logprobs"],
                         free["choices"][0]["logprobs"]["token_logprobs"][:cut])

    def test_echo_logprobs_and_zero_max_tokens_score_a_text(self):
        # How evaluation harnesses score text through OpenAI's completions API.
        scored = list(self.client.generate(PROMPT, max_new_tokens=0, prompt_logprobs=2))
        self.assertTrue(all(t.is_prompt for t in scored))
        status, _, response = call(self.port, "POST", "/v1/completions", {
            "prompt": PROMPT, "max_tokens": 0, "echo": True, "logprobs": 2})
        self.assertEqual(status, 200, response)
        [choice] = response["choices"]
        self.assertEqual(choice["text"], PROMPT)
        self.assertEqual(choice["token_ids"], [t.id for t in scored])
        logprobs = choice["logprobs"]
        self.assertEqual(logprobs["token_logprobs"], [None] + [t.logprob for t in scored[1:]])
        self.assertIsNone(logprobs["top_logprobs"][0])
        for alternatives, token in zip(logprobs["top_logprobs"][1:], scored[1:]):
            self.assertEqual(alternatives, {a.text: a.logprob for a in token.top_logprobs})
            self.assertLessEqual(len(alternatives), 2)
        self.assertEqual(response["usage"]["completion_tokens"], 0)
        self.assertEqual(response["usage"]["prompt_tokens"], len(scored))
        # max_tokens 0 is a scoring request only.
        status, headers, error = call(self.port, "POST", "/v1/completions",
                                      {"prompt": PROMPT, "max_tokens": 0})
        error = self.assertOpenAiError(status, headers, error, 400)
        self.assertIn("max_tokens", error["message"])

    def test_n_choices_equal_grpc_completions_streamed_or_not(self):
        body = {"model": "shakespeare-char", "prompt": PROMPT, "max_tokens": 12,
                "temperature": 0.8, "seed": 21, "n": 3, "echo": True}
        stream = self.client.generate(PROMPT, max_new_tokens=12, temperature=0.8, seed=21,
                                      n=3)
        texts = stream.texts()
        response = self.sdk(body)["response"]
        self.assertEqual(sorted(c["index"] for c in response["choices"]), [0, 1, 2])
        for choice in response["choices"]:
            # Every choice starts with the echoed prompt, as OpenAI's do.
            self.assertEqual(choice["text"], PROMPT + texts[choice["index"]])
            self.assertEqual(choice["finish_reason"], "length")
        self.assertEqual(response["seed"], 21)
        self.assertEqual(response["usage"]["completion_tokens"], 36)
        # Streamed: each chunk's choice index says whose token it is.
        chunks = self.sdk({**body, "echo": False, "stream": True,
                           "stream_options": {"include_usage": True}})["chunks"]
        streamed = {0: "", 1: "", 2: ""}
        reasons = {}
        for chunk in chunks:
            for choice in chunk["choices"]:
                streamed[choice["index"]] += choice["text"]
                if choice["finish_reason"]:
                    reasons[choice["index"]] = choice["finish_reason"]
        self.assertEqual([streamed[i] for i in range(3)], texts)
        self.assertEqual(reasons, {0: "length", 1: "length", 2: "length"})
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 36)

    def test_temperature_defaults_to_openais_one(self):
        # No temperature: sampling at 1 (OpenAI's default), not greedy.
        tokens, _ = self.grpc_tokens(max_new_tokens=30, temperature=1.0, seed=5)
        status, _, response = call(self.port, "POST", "/v1/completions",
                                   {"prompt": PROMPT, "max_tokens": 30, "seed": 5})
        self.assertEqual(status, 200, response)
        self.assertEqual(response["choices"][0]["token_ids"], [t.id for t in tokens])

    def test_same_refusal_as_grpc(self):
        # One validation: the engine's own message reaches both front ends unchanged.
        cases = [
            ({"max_tokens": 100000}, {"max_new_tokens": 100000}),
            ({"logprobs": 50}, {"top_logprobs": 50}),
            ({"temperature": -1}, {"temperature": -1.0}),
            ({"stop": [""]}, {"stop": [""]}),
        ]
        for body, grpc_kwargs in cases:
            with self.subTest(body=body):
                with self.assertRaises(grpc.RpcError) as refused:
                    self.grpc_tokens(**grpc_kwargs)
                self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                status, headers, error = call(self.port, "POST", "/v1/completions",
                                              {"prompt": PROMPT, **body})
                error = self.assertOpenAiError(status, headers, error, 400)
                self.assertEqual(error["message"], refused.exception.details())
                self.assertEqual(error["code"], "invalid_argument")
                self.assertEqual(error["type"], "invalid_request_error")

    def test_lm_eval_harness_request_shapes(self):
        # Tokenizer discovery, as lm-evaluation-harness's remote tokenizer does it.
        status, _, info = call(self.port, "GET", "/tokenizer_info")
        self.assertEqual(status, 200, info)
        self.assertIn("eos_token", info)
        self.assertEqual(info["model_max_length"], 256)
        status, _, tokenized = call(self.port, "POST", "/tokenize",
                                    {"prompt": "ROMEO: Peace!", "add_special_tokens": False})
        self.assertEqual(status, 200, tokenized)
        ids = tokenized["tokens"]
        status, _, detokenized = call(self.port, "POST", "/detokenize", {"tokens": ids})
        self.assertEqual(status, 200, detokenized)
        self.assertEqual(detokenized, {"prompt": "ROMEO: Peace!"})
        status, headers, body = call(self.port, "POST", "/detokenize", {"tokens": [10**6]})
        self.assertOpenAiError(status, headers, body, 400, "tokens")

        # local-completions' loglikelihood: a batch of 4 token-id prompts, echo, one
        # alternative, max_tokens 1, greedy. Each choice equals its prompt asked alone.
        texts = ["ROMEO: Peace!", "JULIET: Ay me.", "First Citizen:\nSpeak.", "O Romeo"]
        batch = []
        for text in texts:
            _, _, t = call(self.port, "POST", "/tokenize", {"prompt": text})
            batch.append(t["tokens"])
        request = {"model": "shakespeare-char", "temperature": 0, "max_tokens": 1,
                   "logprobs": 1, "seed": 1234, "echo": True}
        status, _, reply = call(self.port, "POST", "/v1/completions",
                                {**request, "prompt": batch})
        self.assertEqual(status, 200, reply)
        choices = sorted(reply["choices"], key=lambda c: c["index"])
        self.assertEqual([c["index"] for c in choices], [0, 1, 2, 3])
        prompt_tokens = 0
        for ids, choice in zip(batch, choices):
            status, _, alone = call(self.port, "POST", "/v1/completions",
                                    {**request, "prompt": ids})
            self.assertEqual(status, 200, alone)
            self.assertEqual(choice["logprobs"], alone["choices"][0]["logprobs"])
            self.assertEqual(choice["text"], alone["choices"][0]["text"])
            self.assertEqual(choice["token_ids"][:len(ids)], ids)
            prompt_tokens += alone["usage"]["prompt_tokens"]
        self.assertEqual(reply["usage"]["prompt_tokens"], prompt_tokens)
        self.assertEqual(reply["usage"]["completion_tokens"], 4)

    def test_400s(self):
        cases = [
            ({"prompt": PROMPT, "n": "two"}, "n"),
            ({"prompt": PROMPT, "best_of": 3}, "best_of"),
            ({"prompt": ["a", "b"], "stream": True}, "stream"),
            ({"prompt": ["a", 5]}, "prompt"),
            ({"prompt": ["a"] * 65}, "prompt"),
            ({}, "prompt"),
            ({"prompt": PROMPT, "max_tokens": "ten"}, "max_tokens"),
            ({"prompt": PROMPT, "stream_options": {"include_usage": True}}, "stream_options"),
            ({"prompt": PROMPT, "presence_penalty": 0.5}, "presence_penalty"),
            ({"prompt": [1, 2, 1000]}, None),  # The engine's: outside the vocabulary.
        ]
        for body, param in cases:
            with self.subTest(body=body):
                status, headers, error = call(self.port, "POST", "/v1/completions", body)
                self.assertOpenAiError(status, headers, error, 400, param)
        status, headers, error = call(self.port, "POST", "/v1/completions", raw="{not json")
        self.assertOpenAiError(status, headers, error, 400)
        # Through the SDK: its APIError carries the body's error object.
        result = self.sdk({"model": "shakespeare-char", "prompt": PROMPT, "n": 99})
        self.assertEqual(result["error"]["status"], 400)
        self.assertIn("n must be in 1..8 (--max_completions), got 99",
                      result["error"]["error"]["message"])

    def test_404s(self):
        status, headers, error = call(self.port, "POST", "/v1/completions",
                                      {"model": "gpt-4", "prompt": PROMPT})
        error = self.assertOpenAiError(status, headers, error, 404, "model")
        self.assertEqual(error["code"], "model_not_found")
        self.assertIn("shakespeare-char", error["message"])
        status, headers, error = call(self.port, "GET", "/v1/nothing-here")
        self.assertOpenAiError(status, headers, error, 404)
        result = self.sdk({"model": "gpt-4", "prompt": PROMPT})
        self.assertEqual(result["error"]["status"], 404)

    def test_413_for_a_body_over_the_limit(self):
        status, headers, error = call(self.port, "POST", "/v1/completions",
                                      {"prompt": "x" * 70000})
        error = self.assertOpenAiError(status, headers, error, 413)
        self.assertIn("65536", error["message"])

    def test_models_tokenize_health_attention(self):
        status, _, models = call(self.port, "GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(models["object"], "list")
        self.assertEqual([m["id"] for m in models["data"]], ["shakespeare-char"])
        self.assertEqual(models["data"][0]["max_model_len"], self.client.info().context_length)

        status, _, tokens = call(self.port, "POST", "/tokenize", {"prompt": "JULIET:"})
        self.assertEqual(status, 200)
        want = self.client.tokenize("JULIET:")
        self.assertEqual(tokens["tokens"], [i for i, _ in want])
        self.assertEqual(tokens["token_strs"], [t for _, t in want])
        self.assertEqual(tokens["count"], len(want))

        self.assertEqual(call(self.port, "GET", "/health")[:3:2], (200, {"status": "SERVING"}))

        status, _, att = call(self.port, "POST", "/v1/attention",
                              {"prompt": "JULIET:", "layers": [1, 3], "heads": [0, 2]})
        self.assertEqual(status, 200, att)
        served = self.client.attention("JULIET:", layers=[1, 3], heads=[0, 2])
        self.assertEqual([t["id"] for t in att["tokens"]], served.token_ids)
        self.assertEqual([t["text"] for t in att["tokens"]], served.tokens)
        self.assertEqual([(m["layer"], m["head"]) for m in att["maps"]],
                         [(1, 0), (1, 2), (3, 0), (3, 2)])
        n = len(served.token_ids)
        for m in att["maps"]:
            want_map = served.weights[served.layers.index(m["layer"])][
                served.heads.index(m["head"])]
            # The masked upper triangle is left out: row q has q + 1 weights.
            self.assertEqual([len(row) for row in m["weights"]], list(range(1, n + 1)))
            for q, row in enumerate(m["weights"]):
                for k, w in enumerate(row):
                    exact = want_map[q][k]
                    self.assertEqual(w, float(f"{exact:.4g}"), (m["layer"], m["head"], q, k))
                self.assertTrue(all(x == 0 for x in want_map[q][q + 1:]))
        # As text: 4 significant digits at most.
        status, _, raw = call(self.port, "POST", "/v1/attention", raw=json.dumps(
            {"prompt": "JULIET:"}), headers={"Accept": "application/json"})
        digits = [len(re.sub(r"^0\.0*|\.|e.*$", "", d.lstrip("-")))
                  for d in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", json.dumps(raw["maps"]))]
        self.assertLessEqual(max(digits), 4)

    def test_compact_tap_rows_and_the_gzip_stream(self):
        """A tap in u8 and top_k: every row within its bound of the float tap's (same seed);
        with Accept-Encoding: gzip the stream is gzip, decodable piece by piece as it
        arrives, and the same events."""
        def events(tap, gzip=False):
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
            try:
                conn.request("POST", "/v1/completions", body=json.dumps(
                    {"prompt": "ROMEO:", "max_tokens": 12, "stream": True, "seed": 3,
                     "temperature": 0.8, "attention_tap": tap}),
                    headers={"Content-Type": "application/json",
                             **({"Accept-Encoding": "gzip"} if gzip else {})})
                response = conn.getresponse()
                self.assertEqual(response.status, 200)
                self.assertEqual(response.getheader("Content-Encoding"),
                                 "gzip" if gzip else None)
                text = b""
                decoder = zlib.decompressobj(31)
                while True:
                    piece = response.read1(65536)
                    if not piece:
                        break
                    # Each piece decodes on arrival (a sync-flushed gzip stream).
                    text += decoder.decompress(piece) if gzip else piece
                if gzip:
                    self.assertTrue(decoder.eof)  # The trailer came.
                parsed = [json.loads(line[6:]) for line in text.decode().split("\n")
                          if line.startswith("data: {")]
                for event in parsed:  # A request's own.
                    del event["id"], event["created"]
                return parsed
            finally:
                conn.close()

        def rows(stream):
            return [(e["choices"][0]["position"], row) for e in stream
                    if "attention" in e["choices"][0] for row in e["choices"][0]["attention"]]

        floats = rows(events({}))
        self.assertEqual(len(floats), 12 * 24)
        u8_events = events({"encoding": "u8"})
        self.assertEqual(events({"encoding": "u8"}, gzip=True), u8_events)
        for (position, f), (_, c) in zip(floats, rows(u8_events)):
            self.assertEqual((f["layer"], f["head"]), (c["layer"], c["head"]))
            codes = base64.b64decode(c["weights"])
            self.assertEqual(len(codes), len(f["weights"]))
            top = max(f["weights"])
            for code, w in zip(codes, f["weights"]):
                self.assertLessEqual(abs(code * c["row_scales"][0] - w), top / 510 + 1e-4)
        for (position, f), (_, c) in zip(floats, rows(events({"encoding": "top_k",
                                                               "top_k": 3}))):
            kept = sorted(range(len(f["weights"])), key=lambda k: -f["weights"][k])[:3]
            self.assertEqual(len(c["top_keys"]), min(3, len(f["weights"])))
            for key, w in zip(c["top_keys"], c["top_weights"]):
                self.assertAlmostEqual(w, f["weights"][key], delta=1e-4)
            self.assertAlmostEqual(
                c["remainders"][0],
                sum(w for k, w in enumerate(f["weights"]) if k not in c["top_keys"]), delta=1e-3)
            self.assertAlmostEqual(min(c["top_weights"]),
                                   min(f["weights"][k] for k in kept), delta=1e-4)
        status, headers, error = call(self.port, "POST", "/v1/completions", {
            "prompt": "hi", "attention_tap": {"encoding": "top_k"}})
        self.assertOpenAiError(status, headers, error, 400)
        self.assertIn("top_k", error["error"]["message"])

    def test_attention_u8_encoding_and_its_size_over_the_wire(self):
        # 256 tokens (the model's context and --max_attention_tokens), every layer and head.
        prompt = (PROMPT + "\nBut soft, what light through yonder window breaks?\n" * 6)[:256]
        status, _, plain = call(self.port, "POST", "/v1/attention", {"prompt": prompt})
        self.assertEqual(status, 200, plain)
        status, _, compact = call(self.port, "POST", "/v1/attention",
                                  {"prompt": prompt, "encoding": "u8"})
        self.assertEqual(status, 200, compact)
        self.assertEqual(compact["encoding"], "u8")
        self.assertNotIn("encoding", plain)
        self.assertEqual(compact["tokens"], plain["tokens"])
        n = len(plain["tokens"])
        self.assertEqual(n, 256)
        info = self.client.info()
        self.assertEqual(len(compact["maps"]), info.num_layers * info.num_heads)
        # The model's counts, also when a request asks for fewer maps.
        status, _, one = call(self.port, "POST", "/v1/attention",
                              {"prompt": "JULIET:", "layers": [1], "heads": [0]})
        self.assertEqual(status, 200, one)
        self.assertEqual(len(one["maps"]), 1)
        self.assertEqual((one["num_layers"], one["num_heads"]),
                         (info.num_layers, info.num_heads))
        for c, p in zip(compact["maps"], plain["maps"]):
            self.assertEqual((c["layer"], c["head"]), (p["layer"], p["head"]))
            data = base64.b64decode(c["weights"])
            self.assertEqual(len(data), n * (n + 1) // 2)
            self.assertEqual(c["row_keys"], list(range(1, n + 1)))
            # Byte b of row q is round(w / scale_q), scale_q its largest weight / 255: w to
            # within 1/510 of that largest weight (plus the 4 digits of the plain form).
            at = 0
            for q, (row, scale) in enumerate(zip(p["weights"], c["row_scales"])):
                self.assertAlmostEqual(scale * 255, max(row), delta=max(row) * 1e-3)
                worst = max(abs(b * scale - w) for b, w in zip(data[at:at + q + 1], row))
                self.assertLessEqual(worst, max(row) / 510 + 1e-4, (c["layer"], c["head"], q))
                at += q + 1
        status, headers, error = call(self.port, "POST", "/v1/attention",
                                      {"prompt": "hi", "encoding": "f8"})
        self.assertOpenAiError(status, headers, error, 400, "encoding")

        # Issue 18's budget: the page plus this data, as served to a client accepting gzip.
        def wire(method, path, body=None):
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
            try:
                conn.request(method, path, body=json.dumps(body) if body else None,
                             headers={"Content-Type": "application/json",
                                      "Accept-Encoding": "gzip"})
                response = conn.getresponse()
                data = response.read()  # http.client does not decompress.
                self.assertEqual(response.status, 200)
                self.assertEqual(response.getheader("Content-Encoding"), "gzip", path)
                self.assertEqual(json.loads(gzip.decompress(data)) if body else None,
                                 compact if body else None)
                return len(data)
            finally:
                conn.close()
        page = wire("GET", "/")
        maps = wire("POST", "/v1/attention", {"prompt": prompt, "encoding": "u8"})
        print(f"\nover the wire (gzip): page {page} bytes + 256-token maps of "
              f"{len(compact['maps'])} heads {maps} bytes = {page + maps} bytes",
              file=sys.stderr)
        self.assertLessEqual(page + maps, 2_000_000)

    def test_attention_streams_bands_of_rows_as_the_pass_computes_them(self):
        """"stream": true sends the tokens first, then a band of every map's rows per chunk
        of the pass (the shipped model's 256 tokens: two of 128), an event per message,
        then the summaries, then [DONE], gzip-flushed piece by piece; joined, the same maps
        and summaries as one reply."""
        prompt = (PROMPT + "\nBut soft, what light through yonder window breaks?\n" * 6)[:256]
        request = {"prompt": prompt, "encoding": "u8", "summary": True}
        status, _, whole = call(self.port, "POST", "/v1/attention", request)
        self.assertEqual(status, 200, whole)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        try:
            conn.request("POST", "/v1/attention", body=json.dumps({**request, "stream": True}),
                         headers={"Content-Type": "application/json",
                                  "Accept-Encoding": "gzip"})
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            self.assertEqual(response.getheader("Content-Type"), "text/event-stream")
            decoder, text = zlib.decompressobj(31), b""
            while piece := response.read1(65536):
                text += decoder.decompress(piece)
            self.assertTrue(decoder.eof)
        finally:
            conn.close()
        lines = [line[6:] for line in text.decode().split("\n") if line.startswith("data: ")]
        self.assertEqual(lines[-1], "[DONE]")
        events = [json.loads(line) for line in lines[:-1]]
        self.assertEqual(events[0]["tokens"], whole["tokens"])
        self.assertEqual(events[0]["maps"], [])
        # An event per message of at most 1 MiB: a band in several, every row of the first
        # band (queries 0..127) before any of the second.
        bands = [e for e in events if e["maps"]]
        rows = [(q, i) for i, e in enumerate(bands) for m in e["maps"]
                for q in range(m["first_query"], m["first_query"] + len(m["row_keys"]))]
        self.assertLess(max(i for q, i in rows if q < 128),
                        min(i for q, i in rows if q >= 128))
        self.assertEqual([x for e in events for x in e.get("summaries", [])],
                         whole["summaries"])
        joined = {}
        for event in bands:
            for m in event["maps"]:
                have = joined.setdefault((m["layer"], m["head"]),
                                         {"bytes": b"", "row_keys": [], "row_scales": []})
                have["bytes"] += base64.b64decode(m["weights"])
                have["row_keys"] += m["row_keys"]
                have["row_scales"] += m["row_scales"]
        self.assertEqual(len(joined), len(whole["maps"]))
        for m in whole["maps"]:
            have = joined[(m["layer"], m["head"])]
            self.assertEqual(have["bytes"], base64.b64decode(m["weights"]))
            self.assertEqual(have["row_keys"], m["row_keys"])
            self.assertEqual(have["row_scales"], m["row_scales"])
        status, _, error = call(self.port, "POST", "/v1/attention",
                                {"prompt": "hi", "stream": "yes"})
        self.assertEqual(status, 400, error)
        self.assertEqual(error["error"]["param"], "stream")

    def test_explorer_page_is_served_self_contained(self):
        status, headers, page = call(self.port, "GET", "/")
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Content-Type"), "text/html; charset=utf-8")
        self.assertIn("<title>textgen attention explorer</title>", page)
        # Nothing from elsewhere: no src or href with a scheme or a //host (no CDN).
        self.assertIsNone(re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page))
        # What it reads from /v1/models to lay out its grid.
        status, _, models = call(self.port, "GET", "/v1/models")
        info = self.client.info()
        model = models["data"][0]
        self.assertEqual((model["num_layers"], model["num_heads"]),
                         (info.num_layers, info.num_heads))
        self.assertEqual(model["max_attention_tokens"], info.limits.max_attention_tokens)

    def test_readme_curl_example_works_as_printed(self):
        if shutil.which("curl") is None:
            self.skipTest("curl is not on PATH")
        with open(os.path.join(REPO, "server", "README.md")) as f:
            readme = f.read()
        blocks = re.findall(r"```sh\n(curl [^`]*?)```", readme)
        self.assertTrue(blocks, "no ```sh curl ...``` block in server/README.md")
        for block in blocks:
            command = block.replace("localhost:8080", f"127.0.0.1:{self.port}")
            with self.subTest(command=command):
                proc = subprocess.run(["bash", "-c", command], capture_output=True,
                                      text=True, timeout=WAIT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertNotIn('"error"', proc.stdout)
                self.assertTrue(proc.stdout.strip(), command)


def hold_stream(port, max_tokens=100):
    """Opens a streamed completion whose client reads one event and then nothing: big
    events (every attention row) fill the socket buffers, the engine's stream buffer fills,
    the sequence waits with its slot held. Returns the socket."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = json.dumps({"prompt": "O Romeo, Romeo! wherefore art thou Romeo? " * 3,
                       "max_tokens": max_tokens, "stream": True, "temperature": 0,
                       "attention_tap": {}})
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                  f"{body}").encode())
    received = b""
    while b"data: " not in received:
        chunk = sock.recv(1024)
        if not chunk:
            raise RuntimeError("the stream ended before its first event: " + repr(received))
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received[:200]
    return sock


def wait_for(predicate, what):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def drain_holding_a_stream(server, port):
    """Opens a held stream (hold_stream: it keeps the drain going), sends SIGTERM, and
    returns the stream's socket once GET /health says 503."""
    sock = hold_stream(port)
    wait_for(lambda: metric(port, "textgen_kv_slots_in_use") == 1, "the slot in use")
    server._proc.send_signal(signal.SIGTERM)
    wait_for(lambda: call(port, "GET", "/health")[0] == 503, "health 503")
    return sock


class DisconnectTest(unittest.TestCase):
    def test_a_client_that_leaves_mid_stream_frees_its_slot(self):
        server, port = start("--num_slots=2")
        sock = None
        try:
            sock = hold_stream(port)
            # Held: the sequence waits for its reader (its count stops short of max_tokens,
            # the slot stays taken).
            counts = []

            def stopped():
                counts.append(metric(port, "textgen_generated_tokens_total"))
                time.sleep(0.2)
                return len(counts) > 3 and counts[-1] == counts[-2] == counts[-3]
            wait_for(stopped, "generation to wait for the reader")
            self.assertLess(counts[-1], 100)
            self.assertEqual(metric(port, "textgen_kv_slots_in_use"), 1)
            sock.close()
            sock = None
            # Far less than the 30 s write timeout: the broken connection cancels it.
            wait_for(lambda: metric(port, "textgen_kv_slots_in_use") == 0, "the slot freed")
            self.assertEqual(metric(port, 'textgen_requests_total{code="CANCELLED"}'), 1)
            self.assertEqual(metric(port, "textgen_num_requests_running"), 0)
            self.assertEqual(metric(port, "textgen_kv_cache_usage_perc"), 0)
        finally:
            if sock is not None:
                sock.close()
            server.stop()


class FrontDoorTest(OpenAiShapeMixin, unittest.TestCase):
    def test_401_403_429_with_the_grpc_ports_tokens(self):
        tokens = write(os.path.join(temp_dir("textgen_http_"), "tokens"),
                       "generate gen-token\ndebug dbg-token\n")
        server, port = start(f"--auth_tokens_file={tokens}", "--client_rate=0.001",
                             "--client_burst=1")
        try:
            status, headers, error = call(port, "GET", "/v1/models")
            error = self.assertOpenAiError(status, headers, error, 401)
            self.assertEqual(headers.get("WWW-Authenticate"), "Bearer")
            self.assertEqual(error["type"], "authentication_error")
            status, headers, error = call(port, "GET", "/v1/models",
                                          headers={"Authorization": "Bearer wrong"})
            self.assertOpenAiError(status, headers, error, 401)
            # A generate token asking for attention maps.
            status, headers, error = call(port, "POST", "/v1/attention", {"prompt": "hi"},
                                          headers={"Authorization": "Bearer gen-token"})
            error = self.assertOpenAiError(status, headers, error, 403)
            self.assertEqual(error["type"], "permission_error")
            status, headers, error = call(
                port, "POST", "/v1/completions", {"prompt": "hi", "attention_tap": {}},
                headers={"Authorization": "Bearer gen-token"})
            self.assertOpenAiError(status, headers, error, 403)
            # The token's one request, then its rate limit.
            auth = {"Authorization": "Bearer gen-token"}
            self.assertEqual(call(port, "GET", "/v1/models", headers=auth)[0], 200)
            status, headers, error = call(port, "GET", "/v1/models", headers=auth)
            error = self.assertOpenAiError(status, headers, error, 429)
            self.assertEqual(error["type"], "rate_limit_error")
            # Probes need no token.
            self.assertEqual(call(port, "GET", "/health")[0], 200)
        finally:
            server.stop()

    def test_https_with_the_grpc_ports_certificate(self):
        import ssl
        certs = make_certs(temp_dir("textgen_http_tls_"))
        server, port = start(f"--tls_cert={certs['server.pem']}",
                             f"--tls_key={certs['server.key']}")
        try:
            self.assertIn(f"HTTP API on https://127.0.0.1:{port}/v1", server.log())
            context = ssl.create_default_context(cafile=certs["ca.pem"])
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=WAIT,
                                               context=context)
            conn.request("POST", "/v1/completions",
                         body=json.dumps({"prompt": "ROMEO:", "max_tokens": 5,
                                          "temperature": 0}),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            body = json.loads(response.read())
            conn.close()
            self.assertEqual(response.status, 200, body)
            self.assertEqual(body["usage"]["completion_tokens"], 5)
            # Plain HTTP on the TLS port gets no answer.
            with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
                status, _, _ = call(port, "GET", "/health")
                if status:
                    raise http.client.HTTPException(f"plain HTTP answered {status}")
        finally:
            server.stop()

    def test_metrics_token_applies_on_the_http_port(self):
        token_file = write(os.path.join(temp_dir("textgen_http_"), "metrics-token"),
                           "scrape-me\n")
        server, port = start(f"--metrics_token_file={token_file}")
        try:
            self.assertEqual(call(port, "GET", "/metrics")[0], 401)
            status, _, text = call(port, "GET", "/metrics",
                                   headers={"Authorization": "Bearer scrape-me"})
            self.assertEqual(status, 200)
            self.assertIn("textgen_kv_cache_usage_perc", text)
        finally:
            server.stop()

    def test_503_while_draining(self):
        # No linger: calls arriving in it would be served (server/server.h "Drain";
        # frontdoor_drain_e2e tests it over gRPC), and this one is to be refused.
        server, port = start("--drain_seconds=30", "--drain_linger=0s")
        sock = None
        try:
            sock = drain_holding_a_stream(server, port)
            self.assertEqual(call(port, "GET", "/health")[2], {"status": "NOT_SERVING"})
            status, headers, error = call(port, "POST", "/v1/completions", {"prompt": "hi"})
            error = self.assertOpenAiError(status, headers, error, 503)
            self.assertIn("draining", error["message"])
            self.assertEqual(headers.get("Retry-After"), "1")
            closed = time.monotonic()
            sock.close()
            sock = None
            # The cancelled stream was the last: the drain ends without using its 30 s.
            self.assertEqual(server._proc.wait(timeout=WAIT), 0)
            self.assertLess(time.monotonic() - closed, 20)
        finally:
            if sock is not None:
                sock.close()
            server.stop()

    def test_served_while_lingering_then_503(self):
        # The drain's linger (server/server.h "Drain"): health says NOT_SERVING at once,
        # but a completion that still arrives is served; once none has arrived for
        # --drain_quiet, new ones are refused.
        # A quiet period long enough for the completion below to arrive in it on a slow
        # (sanitizer) build, whatever the load.
        server, port = start("--drain_seconds=30", "--drain_quiet=3s", "--num_slots=2")
        sock = None
        try:
            sock = drain_holding_a_stream(server, port)
            status, _, body = call(port, "POST", "/v1/completions",
                                   {"prompt": "hi", "max_tokens": 2})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["choices"][0]["finish_reason"], "length")
            time.sleep(3.5)  # Quiet for longer than --drain_quiet: the linger is over.
            status, headers, error = call(port, "POST", "/v1/completions", {"prompt": "hi"})
            error = self.assertOpenAiError(status, headers, error, 503)
            self.assertIn("draining", error["message"])
            sock.close()
            sock = None
            self.assertEqual(server._proc.wait(timeout=WAIT), 0)
        finally:
            if sock is not None:
                sock.close()
            server.stop()


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv)
