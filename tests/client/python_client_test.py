"""client/python/textgen_client.py against a live textgen_server.

The streamed tokens equal the CLI's (--json) for the same request; token-id prompts, top
log-probabilities, the echoed prompt and the attention tap come back right (the tap against
the maps of the same tokens); attention comes back shaped [layer][head][q][k] with rows
summing to 1 and zeros above the diagonal; errors are grpc.RpcError with the server's status
code (ValueError for a prompt given twice or not at all); the example runs.
Compact attention (issue 33): u8, u16, f16 and top_k maps, sent compact and decoded to numpy,
equal the float maps within the proto's bounds (top_k: the largest, exact); a window is the
float maps' slice; max and mean overviews equal the float maps pooled by their grid; the
summaries equal a numpy computation from the float maps; the rollout is n x n, causal, rows
summing to 1; compact tap rows decode (tap_rows) to the float tap's within the same bounds.

chat(): against a stand-in server (PythonChatStandInTest: the conversation each call sends,
tool calls and template options passed through, the pieces and the result) and, with
--chat_model, against the shipped instruct model (PythonChatTest, ctest
client_python_chat_e2e): greedy answers to held-out questions exactly as heldout.jsonl
gives them, streamed, and a second turn with the first's answer in the history.
"""

import json
import math
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "client", "python"))
from chat_stand_in import conversation, start_chat_stand_in  # noqa: E402
from live_server import (LiveServer, closed_port, heldout_cases, parse_args,  # noqa: E402
                         run_tests)

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import textgen_client  # noqa: E402
from textgen_client import TextgenClient, tap_rows, textgen_pb2  # noqa: E402

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

    def test_token_ids_top_logprobs_echo_and_attention_tap(self):
        ids = [i for i, _ in self.client.tokenize("JULIET:")]
        stream = self.client.generate(prompt_ids=ids, max_new_tokens=10, top_logprobs=4,
                                      echo_prompt=True, tap_layers=[1], tap_heads=[0, 3])
        tokens = list(stream)
        prompt = [t for t in tokens if t.is_prompt]
        generated = [t for t in tokens if not t.is_prompt]
        self.assertEqual(tokens[:len(prompt)], prompt)
        self.assertEqual([t.id for t in prompt], ids)
        self.assertEqual("".join(t.text for t in prompt), "JULIET:")
        self.assertEqual(stream.finished.usage.prompt_tokens, len(ids))
        # What the CLI gets for the same request.
        expected = self.cli_tokens("--prompt_ids", ",".join(map(str, ids)),
                                   "--max_new_tokens", "10", "--top_logprobs", "4",
                                   "--echo_prompt", "--tap_layers", "1", "--tap_heads", "0,3")
        self.assertEqual([(t.id, t.text, t.position, t.is_prompt) for t in tokens],
                         [(t["id"], t["text"], t["position"], t["is_prompt"]) for t in expected])

        for t in generated:
            alts = list(t.top_logprobs)
            self.assertEqual(len(alts), 4)
            self.assertEqual(sorted(alts, key=lambda a: -a.logprob), alts)
            self.assertEqual((alts[0].id, alts[0].logprob), (t.id, t.logprob))  # greedy

        # Tap rows are row position - 1 of the maps of the sequence so far.
        sequence = ids + [t.id for t in generated]
        att = self.client.attention(prompt_ids=sequence[:-1], layers=[1], heads=[0, 3])
        self.assertEqual(att.token_ids, sequence[:-1])
        worst = 0.0
        for t in generated:
            self.assertEqual([(r.layer, r.head) for r in t.attention], [(1, 0), (1, 3)])
            for r, served in zip(t.attention, (att.weights[0][0], att.weights[0][1])):
                self.assertEqual(len(r.weights), t.position)
                self.assertTrue(math.isclose(math.fsum(r.weights), 1.0, abs_tol=1e-5))
                want = served[t.position - 1][:t.position]
                worst = max(worst, max(abs(a - b) for a, b in zip(r.weights, want)))
        # Bit for bit: a KV-cached, batched decode step computes what a whole prefill does.
        self.assertEqual(worst, 0.0)
        for t in prompt:
            self.assertEqual((len(t.top_logprobs), len(t.attention)), (0, 0))

        # attention_tap=True alone: every layer and head.
        info = self.client.info()
        [first] = list(self.client.generate(prompt_ids=ids, max_new_tokens=1,
                                            attention_tap=True))
        self.assertEqual([(r.layer, r.head) for r in first.attention],
                         [(layer, head) for layer in range(info.num_layers)
                          for head in range(info.num_heads)])
        # text() leaves the echoed prompt out.
        self.assertEqual(self.client.generate("JULIET:", max_new_tokens=10,
                                              echo_prompt=True).text(),
                         "".join(t.text for t in generated))

    def test_n_completions_and_prompt_logprobs(self):
        stream = self.client.generate("JULIET:", max_new_tokens=12, temperature=0.8, seed=7,
                                      n=3)
        texts = stream.texts()
        self.assertEqual(sorted(stream.finishes), [0, 1, 2])
        for i, text in enumerate(texts):
            self.assertEqual(stream.finishes[i].seed, 7 + i)
            self.assertEqual(text, self.client.generate("JULIET:", max_new_tokens=12,
                                                        temperature=0.8, seed=7 + i).text())
        self.assertEqual(len(set(texts)), 3)
        # The prompt scored: every token but the first has a log-probability and rivals.
        scored = list(self.client.generate("JULIET:", max_new_tokens=0, prompt_logprobs=2))
        self.assertTrue(all(t.is_prompt for t in scored))
        self.assertEqual(len(scored[0].top_logprobs), 0)
        for t in scored[1:]:
            self.assertEqual(len(t.top_logprobs), 2)
            self.assertLess(t.logprob, 0.0)
            self.assertGreaterEqual(t.top_logprobs[0].logprob, t.logprob)

    def test_a_prompt_is_text_or_ids(self):
        for kwargs in ({}, {"prompt": "x", "prompt_ids": [1]}):
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(ValueError):
                    self.client.generate(**kwargs)
                with self.assertRaises(ValueError):
                    self.client.attention(**kwargs)

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

    PASSAGE = ("ROMEO:\nBut soft, what light through yonder window breaks?\n"
               "It is the east, and Juliet is the sun.")

    def test_compact_maps_decode_within_the_stated_bounds(self):
        """u8, u16, f16 and top_k maps of the shipped model, decoded to numpy, against the
        float path: 1/510 and 1/131070 of the row's largest weight, 2^-11 relative (2^-25
        absolute under half's normals), top_k exact on the kept entries, the largest."""
        exact = self.client.attention(self.PASSAGE).maps["decoder_self"]
        t = len(self.PASSAGE)
        self.assertEqual(exact.shape[2:], (t, t))
        top = exact.max(axis=3, keepdims=True)
        ulps = 2 * np.spacing(exact)  # float rounding of code x scale
        for encoding, bound in (("u8", top / 510), ("u16", top / 131070),
                                ("f16", np.maximum(2.0 ** -11 * exact, 2.0 ** -25))):
            with self.subTest(encoding=encoding):
                # What travels is the compact form (a server that ignored the field
                # would pass the comparison with floats).
                request = textgen_pb2.DebugAttentionRequest(
                    prompt=textgen_pb2.Prompt(text=self.PASSAGE), layers=[0], heads=[0],
                    encoding=textgen_client.ENCODINGS[encoding])
                for response in self.client._stub.DebugAttention(request, timeout=60):
                    for m in response.maps:
                        self.assertEqual((m.compact.encoding, len(m.weights)),
                                         (request.encoding, 0))
                att = self.client.attention(self.PASSAGE, encoding=encoding)
                got = att.maps["decoder_self"]
                self.assertEqual((got.dtype, got.shape), (np.float32, exact.shape))
                error = np.abs(got - exact)
                self.assertTrue((error <= bound + ulps).all(),
                                f"{encoding}: worst {error.max()}")
                self.assertTrue((np.triu(got, k=1) == 0).all())
        got = self.client.attention(self.PASSAGE, encoding="top_k", top_k=3)
        got = got.maps["decoder_self"]
        kept = got != 0
        self.assertTrue((kept.sum(axis=3) <= 3).all())
        np.testing.assert_array_equal(got[kept], exact[kept])
        # Every kept entry at least as large as every left-out one in its row.
        smallest_kept = np.where(kept, exact, np.inf).min(axis=3)
        largest_left = np.where(kept, -np.inf, exact).max(axis=3)
        self.assertTrue((smallest_kept >= largest_left).all())

    def test_windows_overviews_summaries_and_rollout(self):
        exact = self.client.attention(self.PASSAGE).maps["decoder_self"]
        t = exact.shape[2]
        window = self.client.attention(self.PASSAGE, queries=(30, 70), keys=(10, 60),
                                       encoding="f32")
        self.assertEqual(window.grids["decoder_self"].first_query, 30)
        np.testing.assert_array_equal(window.maps["decoder_self"], exact[:, :, 30:70, 10:60])
        for pooling in ("max", "mean"):
            with self.subTest(pooling=pooling):
                pooled = self.client.attention(self.PASSAGE, overview=(8, pooling))
                grid = pooled.grids["decoder_self"]
                m = pooled.maps["decoder_self"]
                self.assertEqual(m.shape[2:], (-(-t // grid.query_step), -(-t // grid.key_step)))
                self.assertLessEqual(max(m.shape[2:]), 8)
                for r in range(m.shape[2]):
                    for c in range(m.shape[3]):
                        q0, k0 = r * grid.query_step, c * grid.key_step
                        cell = exact[:, :, q0:q0 + grid.query_step, k0:k0 + grid.key_step]
                        causal = (np.arange(q0, q0 + cell.shape[2])[:, None]
                                  >= np.arange(k0, k0 + cell.shape[3])[None, :])
                        if not causal.any():
                            want = np.zeros(cell.shape[:2], dtype=np.float32)
                        elif pooling == "max":
                            want = cell.max(axis=(2, 3))
                        else:
                            want = cell[:, :, causal].mean(axis=2)
                        np.testing.assert_allclose(m[:, :, r, c], want, rtol=1e-5, atol=1e-7,
                                                   err_msg=f"{pooling} cell {r},{c}")
        att = self.client.attention(self.PASSAGE, summary=True)
        info = self.client.info()
        self.assertEqual([(s["layer"], s["head"]) for s in att.summaries],
                         [(l, h) for l in range(info.num_layers) for h in range(info.num_heads)])
        p = exact.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.where(p > 0, p * np.log(p), 0).sum(axis=3).mean(axis=2)
        distance = (np.arange(t)[:, None] - np.arange(t)[None, :]).clip(min=0)
        for s in att.summaries:
            l, h = s["layer"], s["head"]
            self.assertAlmostEqual(s["entropy"], entropy[l, h], delta=1e-4)
            self.assertAlmostEqual(s["sink"], p[l, h, :, 0].mean(), delta=1e-5)
            self.assertAlmostEqual(s["max_weight"], p[l, h].max(axis=1).mean(), delta=1e-5)
            self.assertAlmostEqual(s["mean_distance"],
                                   (p[l, h] * distance).sum(axis=1).mean(), delta=1e-3)
        self.assertEqual(att.rollout.shape, (t, t))
        np.testing.assert_allclose(att.rollout.sum(axis=1), 1, atol=1e-4)
        self.assertTrue((np.triu(att.rollout, k=1) == 0).all())
        only = self.client.attention(self.PASSAGE, summary_only=True)
        self.assertEqual((only.maps, len(only.summaries)), ({}, len(att.summaries)))

    def test_compact_tap_rows_decode_to_the_float_rows(self):
        kwargs = dict(prompt="JULIET:", max_new_tokens=6, tap_layers=[3])
        exact = [tap_rows(t) for t in self.client.generate(**kwargs)]
        for encoding, top_k in (("f16", 0), ("u8", 0), ("top_k", 2)):
            with self.subTest(encoding=encoding):
                tokens = list(self.client.generate(**kwargs, tap_encoding=encoding,
                                                   tap_top_k=top_k))
                for token, want in zip(tokens, exact, strict=True):
                    self.assertTrue(all(r.compact.encoding == textgen_client.ENCODINGS[encoding]
                                        for r in token.attention), token.attention)
                    for row, w in zip(tap_rows(token), want, strict=True):
                        self.assertEqual((row.layer, row.head, row.kind),
                                         (w.layer, w.head, "decoder_self"))
                        self.assertEqual(row.weights.shape, (token.position,))
                        if encoding == "top_k":
                            np.testing.assert_array_equal(row.top_weights,
                                                          w.weights[row.top_keys])
                            self.assertAlmostEqual(row.remainder,
                                                   1 - float(row.top_weights.sum()), delta=1e-5)
                        else:
                            bound = (w.weights.max() / 510 if encoding == "u8"
                                     else np.maximum(2.0 ** -11 * w.weights, 2.0 ** -25))
                            self.assertTrue((np.abs(row.weights - w.weights)
                                             <= bound + 2 * np.spacing(w.weights)).all())

    def test_errors_are_rpc_errors_with_the_status(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.client.generate("x", temperature=-1).text()
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("temperature", e.exception.details())
        with self.assertRaises(grpc.RpcError) as e:
            self.client.attention("ROMEO:", layers=[99])
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        for kwargs, mention in ((dict(top_logprobs=21), "top_logprobs"),
                                (dict(tap_layers=[6]), "attention_tap.layers[0] = 6"),
                                (dict(prompt_ids=[64, 65]), "prompt[1] = 65 is outside the model's vocabulary")):
            with self.subTest(kwargs=kwargs):
                kwargs.setdefault("prompt", None if "prompt_ids" in kwargs else "x")
                with self.assertRaises(grpc.RpcError) as e:
                    self.client.generate(**kwargs).text()
                self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(mention, e.exception.details())
        with TextgenClient(f"127.0.0.1:{closed_port()}", timeout=30) as nowhere:
            with self.assertRaises(grpc.RpcError) as e:
                nowhere.health()
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_chat_without_a_chat_template_is_failed_precondition(self):
        self.assertFalse(self.client.info().chat)
        with self.assertRaises(grpc.RpcError) as e:
            self.client.chat([{"role": "user", "content": "hi"}]).result()
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

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
        # The look inside: five greedy tokens, each with 3 rivals and where a head looked.
        inside = proc.stdout.split("inside (greedy; layer 0 head 0):\n")[1].splitlines()
        self.assertEqual(len(inside), 5)
        self.assertTrue(inside[0].startswith("  #6 '\\n' (logprob "), inside[0])
        for line in inside:
            rivals = line.split("; top: ")[1].split(") looked most at #")[0]
            self.assertEqual(len(re.findall(r"['\"] -\d+\.\d\d(?:, |$)", rivals)), 3, line)
        # A token-id prompt: the same tokens as the text.
        ids = ",".join(str(i) for i, _ in self.client.tokenize("ROMEO:"))
        by_ids = subprocess.run(
            [sys.executable, os.path.join(REPO, "client", "python", "example.py"),
             "--target", self.server.target, "--max_new_tokens", "30", "--stubs", stubs,
             "--prompt_ids", ids], capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(by_ids.returncode, 0, by_ids.stderr)
        self.assertEqual(by_ids.stdout.split("---")[1], proc.stdout.split("---")[1])


class PythonChatStandInTest(unittest.TestCase):
    """chat() against a stand-in server (tests/client/chat_stand_in.py): no model needed."""

    def setUp(self):
        self.servicer, target, server = start_chat_stand_in()
        self.addCleanup(server.stop, None)
        self.client = TextgenClient(target, timeout=60)
        self.addCleanup(self.client.close)

    def test_pieces_then_the_result(self):
        messages = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "2 + 2?"}]
        stream = self.client.chat(messages, max_new_tokens=8, temperature=0.5, top_k=4,
                                  top_p=0.9, repetition_penalty=1.2, seed=3, stop=["\n"],
                                  stop_token_ids=[7], top_logprobs=2)
        self.assertEqual(list(stream), ["2 + 2?", "!"])
        result = stream.result()
        self.assertEqual((result.text, result.finish_reason), ("2 + 2?!", "eos"))
        self.assertEqual((result.usage.prompt_tokens, result.usage.generated_tokens), (20, 2))
        self.assertEqual(result.finished.seed, 5)
        self.assertEqual(result.prompt, "")
        self.assertEqual([t.id for t in stream.tokens], [2, 3])
        self.assertEqual(result.message(), {"role": "assistant", "content": "2 + 2?!"})
        [request] = self.servicer.requests
        self.assertEqual(conversation(request), [("system", "Be brief."), ("user", "2 + 2?")])
        self.assertEqual(request.max_new_tokens, 8)
        self.assertEqual((request.sampling.top_k, request.sampling.seed), (4, 3))
        self.assertAlmostEqual(request.sampling.temperature, 0.5, places=6)
        self.assertAlmostEqual(request.sampling.top_p, 0.9, places=6)
        self.assertAlmostEqual(request.sampling.repetition_penalty, 1.2, places=6)
        self.assertEqual((list(request.stop), list(request.stop_token_ids)), (["\n"], [7]))
        self.assertEqual(request.top_logprobs, 2)
        conv = request.prompt.conversation
        self.assertFalse(conv.HasField("add_generation_prompt"))  # the template's default
        self.assertEqual((conv.tools_json, conv.chat_template_kwargs_json), ("", ""))
        # The next turn: the answer appended.
        messages.append(result.message())
        messages.append({"role": "user", "content": "and 3 + 3?"})
        self.assertEqual(self.client.chat(messages).text(), "and 3 + 3?!")
        self.assertEqual(len(self.servicer.requests[1].prompt.conversation.messages), 4)

    def test_echo_prompt_gathers_the_rendered_prompt(self):
        stream = self.client.chat([{"role": "user", "content": "hi"}], echo_prompt=True)
        self.assertEqual(list(stream), ["hi", "!"])  # the prompt is not an answer piece
        self.assertEqual(stream.result().prompt, "<rendered 1>")

    def test_tool_calls_and_template_options_pass_through(self):
        tools = [{"type": "function", "function": {
            "name": "add", "parameters": {"type": "object", "properties": {}}}}]
        messages = [
            {"role": "user", "content": "Add 2 and 3."},
            {"role": "assistant", "content": None, "reasoning_content": "Use the tool.",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "add", "arguments": {"a": 2, "b": 3}}},
                            {"id": "call_2", "name": "add", "arguments": '{"a": 1}'}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "add",
             "content": [{"type": "text", "text": "5"}]},
            textgen_pb2.ChatMessage(role="assistant", content="It is"),
        ]
        self.client.chat(messages, tools=tools, continue_final_message=True,
                         add_generation_prompt=False,
                         chat_template_kwargs={"enable_thinking": False}).result()
        conv = self.servicer.requests[0].prompt.conversation
        self.assertEqual(json.loads(conv.tools_json), tools)
        self.assertEqual(json.loads(conv.chat_template_kwargs_json), {"enable_thinking": False})
        self.assertTrue(conv.continue_final_message)
        self.assertTrue(conv.HasField("add_generation_prompt"))
        self.assertFalse(conv.add_generation_prompt)
        assistant, tool = conv.messages[1], conv.messages[2]
        self.assertEqual((assistant.content, assistant.reasoning_content), ("", "Use the tool."))
        self.assertEqual([(c.id, c.name, json.loads(c.arguments)) for c in assistant.tool_calls],
                         [("call_1", "add", {"a": 2, "b": 3}), ("call_2", "add", {"a": 1})])
        self.assertEqual((tool.role, tool.content, tool.tool_call_id, tool.name),
                         ("tool", "5", "call_1", "add"))
        self.assertEqual(conv.messages[3].content, "It is")
        # tools and kwargs as JSON text pass as they are.
        self.client.chat(messages[:1], tools="[]", chat_template_kwargs='{"x": 1}').result()
        conv = self.servicer.requests[1].prompt.conversation
        self.assertEqual((conv.tools_json, conv.chat_template_kwargs_json), ("[]", '{"x": 1}'))

    def test_bad_messages_are_value_errors(self):
        for message in ({"role": "user", "content": "x", "contents": "typo"},
                        {"content": "no role"},
                        {"role": "user", "content": [{"type": "image_url"}]}):
            with self.subTest(message=message):
                with self.assertRaises(ValueError):
                    self.client.chat([message])
        self.assertEqual(self.servicer.requests, [])


class PythonChatTest(unittest.TestCase):
    """chat() against the shipped instruct model (--chat_model): greedy answers to held-out
    questions (heldout.jsonl) exactly as expected, streamed; the example's chat."""

    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.chat_model)
        cls.client = TextgenClient(cls.server.target, timeout=120)
        cls.cases = heldout_cases(ARGS.chat_model)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def test_streamed_answers_to_held_out_questions(self):
        self.assertTrue(self.client.info().chat)
        for case in self.cases:
            with self.subTest(messages=case["messages"]):
                stream = self.client.chat(case["messages"], temperature=0, max_new_tokens=32,
                                          echo_prompt=True)
                pieces = list(stream)
                result = stream.result()
                self.assertEqual("".join(pieces), case["answer"])
                self.assertEqual(result.text, case["answer"])
                self.assertEqual(result.finish_reason, "eos")
                self.assertEqual(result.usage.generated_tokens, len(stream.tokens))
                # The rendered prompt holds the question, and its tokens were counted.
                self.assertIn(case["messages"][-1]["content"], result.prompt)
                self.assertGreater(result.usage.prompt_tokens, 0)

    def test_a_second_turn_carries_the_first(self):
        first, second = self.cases[0], self.cases[1]
        messages = list(first["messages"])
        one = self.client.chat(messages, max_new_tokens=32).result()
        self.assertEqual(one.text, first["answer"])
        messages += [one.message(), second["messages"][-1]]
        two = self.client.chat(messages, max_new_tokens=32).result()
        self.assertEqual(two.text, second["answer"])
        self.assertGreater(two.usage.prompt_tokens,
                           one.usage.prompt_tokens + one.usage.generated_tokens)

    def test_example_chats(self):
        case = self.cases[0]
        question = case["messages"][-1]["content"]
        env = dict(os.environ)
        stubs = env.pop("TEXTGEN_PY_STUBS", os.path.join(REPO, "build", "client", "python"))
        proc = subprocess.run(
            [sys.executable, os.path.join(REPO, "client", "python", "example.py"),
             "--target", self.server.target, "--max_new_tokens", "4", "--inside_tokens", "2",
             "--stubs", stubs, "--chat", question]
            + [a for m in case["messages"] if m["role"] == "system"
               for a in ("--system", m["content"])],
            capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"user: {question}\nassistant: {case['answer']}\n", proc.stdout)
        self.assertRegex(proc.stdout, r"\(\d+ prompt \+ \d+ generated tokens, eos\)")


if __name__ == "__main__":
    ARGS, argv = parse_args()
    run_tests(ARGS, argv, chat_cases=[PythonChatTest], name="client_python_chat_e2e")
