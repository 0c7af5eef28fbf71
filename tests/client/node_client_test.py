"""client/node/textgen_example.js (@grpc/grpc-js + @grpc/proto-loader) against a live
textgen_server.

Its stream equals the textgen command line's for the same request (ids, texts, log-
probabilities, finish reason, usage, the seed as a string); its model info equals
`textgen info --json` field for field (names as written in the .proto, int64 as strings); a
--request written with the .proto's field names takes effect, which proto-loader's default
options (camelCase) would silently drop; errors are one line and exit 1.

Chat mode (--chat, --system) and a source without a prompt (--source, or "source" in
--request) against a stand-in server (NodeStandInTest: the request sent, the output, a model
without a chat template); with --chat_model, --chat against the shipped instruct model
(NodeChatTest, ctest client_node_chat_e2e): greedy answers to held-out questions exactly as
heldout.jsonl gives them, the model ending its turn (FINISH_REASON_EOS).

Needs node and `npm ci --prefix client/node`; without them it skips (exit 77), saying why,
except under CI=true, where it fails.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NODE_DIR = os.path.join(REPO, "client", "node")
EXAMPLE = os.path.join(NODE_DIR, "textgen_example.js")
sys.path.insert(0, HERE)
from chat_stand_in import conversation, start_chat_stand_in  # noqa: E402
from live_server import (LiveServer, heldout_cases, parse_args, run_tests,  # noqa: E402
                         skip_or_fail)

ARGS = None


def missing_dependency():
    """Why the test cannot run here, or None."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node or npm is not on PATH"
    for package in ("@grpc/grpc-js", "@grpc/proto-loader"):
        if not os.path.isfile(os.path.join(NODE_DIR, "node_modules", package, "package.json")):
            return (f"{package} is not installed in client/node "
                    "(run `npm ci --prefix client/node`; scripts/test.sh does)")
    return None


class NodeExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.model)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def node(self, *flags):
        """Runs the example; returns (exit code, stdout, stderr)."""
        proc = subprocess.run(["node", EXAMPLE, "--target", self.server.target, *flags],
                              capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr

    def node_json(self, *flags):
        rc, out, err = self.node("--json", *flags)
        self.assertEqual(rc, 0, err)
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertIn("model_info", lines[0])
        return lines[0]["model_info"], lines[1:]

    def cli_json(self, *args):
        proc = subprocess.run([ARGS.cli, "--server", self.server.target, *args, "--json"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def assertSameStream(self, node_messages, cli_messages, seeded=False):
        self.assertEqual(len(node_messages), len(cli_messages))
        for got, want in zip(node_messages, cli_messages):
            kind = "token" if "token" in want else "finished"
            self.assertEqual(got["event"], kind)  # oneofs: true names the member set
            if kind == "token":
                for field in ("id", "text", "position", "is_prompt"):
                    self.assertEqual(got["token"][field], want["token"][field], field)
                # float32 printed by protobuf's JSON (shortest) vs as a JS double.
                self.assertTrue(math.isclose(got["token"]["logprob"], want["token"]["logprob"],
                                             rel_tol=1e-6, abs_tol=1e-7))
            else:
                # The seed too when the request fixed it (else each call picks its own).
                fields = ("reason", "usage", "seed") if seeded else ("reason", "usage")
                for field in fields:
                    self.assertEqual(got["finished"][field], want["finished"][field], field)

    def test_stream_equals_the_clis(self):
        for flags, request in (
                (["--max_new_tokens", "40"], None),  # greedy
                (["--max_new_tokens", "50", "--temperature", "0.9", "--top_k", "20",
                  "--seed", "18446744073709551557"],  # > 2^53: exact only as a string
                 {"sampling": {"temperature": 0.9, "top_k": 20,
                               "seed": "18446744073709551557"}})):
            with self.subTest(flags=flags):
                node_flags = ["--prompt", "ROMEO:", "--max_new_tokens", flags[1]]
                if request:
                    node_flags += ["--request", json.dumps(request)]
                _, stream = self.node_json(*node_flags)
                cli = self.cli_json("generate", "--prompt", "ROMEO:", *flags)
                self.assertSameStream(stream, cli, seeded=request is not None)
                self.assertEqual(stream[-1]["finished"]["reason"], "FINISH_REASON_LENGTH")
                self.assertIsInstance(stream[-1]["finished"]["seed"], str)
        self.assertEqual(stream[-1]["finished"]["seed"], "18446744073709551557")

    def test_model_info_equals_the_clis(self):
        info, _ = self.node_json("--max_new_tokens", "1")
        self.assertEqual(info, self.cli_json("info")[0])
        self.assertIsInstance(info["num_parameters"], str)
        self.assertIn("max_prompt_tokens", info["limits"])

    def test_request_fields_by_their_proto_names(self):
        request = {"prompt": {"token_ids": {"ids": [30, 27, 25]}}, "max_new_tokens": 4,
                   "top_logprobs": 3, "echo_prompt": True,
                   "attention_tap": {"layers": [2], "heads": [1, 3]}}
        _, stream = self.node_json("--request", json.dumps(request))
        tokens = [m["token"] for m in stream if m["event"] == "token"]
        self.assertEqual([t["id"] for t in tokens if t["is_prompt"]], [30, 27, 25])
        generated = [t for t in tokens if not t["is_prompt"]]
        self.assertEqual(len(generated), 4)  # not the server's default: the field was read
        for t in generated:
            self.assertEqual(len(t["top_logprobs"]), 3)
            self.assertEqual(t["top_logprobs"][0]["id"], t["id"])  # greedy picks the top one
            self.assertEqual([(r["layer"], r["head"]) for r in t["attention"]],
                             [(2, 1), (2, 3)])
            for row in t["attention"]:
                self.assertEqual(len(row["weights"]), t["position"])
                self.assertTrue(math.isclose(sum(row["weights"]), 1.0, abs_tol=1e-5))
        cli = self.cli_json("generate", "--prompt_ids", "30,27,25", "--max_new_tokens", "4",
                            "--top_logprobs", "3", "--echo_prompt", "--tap_layers", "2",
                            "--tap_heads", "1,3")
        self.assertSameStream(stream, cli)

    def test_plain_output_and_errors(self):
        rc, out, err = self.node("--prompt", "JULIET:", "--max_new_tokens", "30")
        self.assertEqual(rc, 0, err)
        text = "".join(m["token"]["text"] for m in self.cli_json(
            "generate", "--prompt", "JULIET:", "--max_new_tokens", "30") if "token" in m)
        self.assertIn("6 layers x 4 heads", out)
        self.assertIn("---\nJULIET:" + text + "\n--- 30 tokens, FINISH_REASON_LENGTH, seed ",
                      out)
        rc, _, err = self.node("--request", '{"sampling": {"temperature": -1}}')
        self.assertEqual(rc, 1, err)
        self.assertEqual(err.splitlines(), [
            "textgen_example: INVALID_ARGUMENT: sampling.temperature must be a finite number "
            ">= 0, got -1"])
        rc, _, err = self.node("--prompt", "x", "--prompt_ids", "1")
        self.assertEqual(rc, 2, err)
        self.assertIn("exclude each other", err)


def run_node(target, *flags):
    """Runs the example against target; returns (exit code, stdout, stderr)."""
    proc = subprocess.run(["node", EXAMPLE, "--target", target, *flags],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


class NodeStandInTest(unittest.TestCase):
    """--chat and --source against a stand-in server (tests/client/chat_stand_in.py): the
    request the example sends and what it prints. No model needed."""

    def start(self, **kwargs):
        self.servicer, self.target, server = start_chat_stand_in(**kwargs)
        self.addCleanup(server.stop, None)

    def test_chat_sends_a_conversation(self):
        self.start()
        rc, out, err = run_node(self.target, "--chat", "What is 2 + 3?", "--system",
                                "Be brief.", "--request", '{"echo_prompt": true}')
        self.assertEqual(rc, 0, err)
        [request] = self.servicer.requests
        self.assertEqual(conversation(request), [("system", "Be brief."),
                                                 ("user", "What is 2 + 3?")])
        self.assertFalse(request.HasField("source"))
        self.assertEqual(request.max_new_tokens, 100)
        # The echoed (rendered) prompt is not part of the answer.
        self.assertIn("---\nsystem: Be brief.\nuser: What is 2 + 3?\n"
                      "assistant: What is 2 + 3?!\n"
                      "--- 20 prompt + 2 generated tokens, FINISH_REASON_EOS, seed 5\n", out)
        rc, out, err = run_node(self.target, "--json", "--chat", "hi")
        self.assertEqual(rc, 0, err)
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertTrue(lines[0]["model_info"]["chat"])
        self.assertEqual("".join(m["token"]["text"] for m in lines[1:] if m["event"] == "token"),
                         "hi!")
        self.assertEqual(conversation(self.servicer.requests[1]), [("user", "hi")])

    def test_chat_without_a_chat_template(self):
        self.start(chat=False)
        rc, out, err = run_node(self.target, "--chat", "hi")
        self.assertEqual(rc, 1, err)
        self.assertEqual(err.splitlines(), [
            "textgen_example: the model stand-in has no chat template, so it cannot chat "
            "(start textgen_server with --chat_template FILE.jinja)"])
        self.assertEqual(self.servicer.requests, [])

    def test_a_source_without_a_prompt(self):
        self.start()
        for flags in (["--source", "3rd of March 99"],
                      ["--request", '{"source": {"text": "3rd of March 99"}}']):
            with self.subTest(flags=flags):
                self.servicer.requests.clear()
                rc, out, err = run_node(self.target, *flags)
                self.assertEqual(rc, 0, err)
                [request] = self.servicer.requests
                self.assertEqual(request.source.text, "3rd of March 99")
                self.assertFalse(request.HasField("prompt"))  # the decoder starts from BOS
                self.assertIn("3rd of March 99!", out)
        # With a prompt too: the answer's start.
        self.servicer.requests.clear()
        rc, out, err = run_node(self.target, "--source", "3rd of March 99", "--prompt", "1999")
        self.assertEqual(rc, 0, err)
        [request] = self.servicer.requests
        self.assertEqual((request.source.text, request.prompt.text), ("3rd of March 99", "1999"))
        self.assertIn("---\nsource: 3rd of March 99\n1999", out)

    def test_usage_errors(self):
        self.start()
        for flags, message in (
                (["--chat", "hi", "--prompt", "x"], "--prompt and --chat exclude each other"),
                (["--chat", "hi", "--source", "x"], "--chat and --source exclude each other"),
                (["--system", "S"], "--system goes with --chat")):
            with self.subTest(flags=flags):
                rc, _, err = run_node(self.target, *flags)
                self.assertEqual(rc, 2, err)
                self.assertIn(message, err)
        self.assertEqual(self.servicer.requests, [])


class NodeChatTest(unittest.TestCase):
    """--chat against the shipped instruct model (--chat_model): greedy answers to held-out
    questions (heldout.jsonl) exactly as expected."""

    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.chat_model)
        cls.cases = heldout_cases(ARGS.chat_model)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_answers_to_held_out_questions(self):
        for case in self.cases:
            question = case["messages"][-1]["content"]
            system = [m["content"] for m in case["messages"] if m["role"] == "system"]
            flags = ["--chat", question, "--max_new_tokens", "32"]
            if system:
                flags += ["--system", system[0]]
            with self.subTest(question=question):
                rc, out, err = run_node(self.server.target, "--json", *flags)
                self.assertEqual(rc, 0, err)
                lines = [json.loads(line) for line in out.splitlines()]
                self.assertTrue(lines[0]["model_info"]["chat"])
                answer = "".join(m["token"]["text"] for m in lines[1:] if m["event"] == "token")
                self.assertEqual(answer, case["answer"])
                self.assertEqual(lines[-1]["finished"]["reason"], "FINISH_REASON_EOS")
                rc, out, err = run_node(self.server.target, *flags)
                self.assertEqual(rc, 0, err)
                self.assertIn(f"user: {question}\nassistant: {case['answer']}\n--- ", out)


if __name__ == "__main__":
    ARGS, argv = parse_args()
    name = "client_node_chat_e2e" if ARGS.chat_model else "client_node_e2e"
    reason = missing_dependency()
    if reason is not None:
        skip_or_fail(name, reason)
    run_tests(ARGS, argv, chat_cases=[NodeChatTest], name=name)
