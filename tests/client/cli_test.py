"""The textgen command line (client/main.cc) against a live textgen_server.

Streamed text equals the server's token texts; --json lines parse; bad flags, server errors,
unreachable addresses and Ctrl-C give the documented one-line messages and exit codes
(client/README.md); the attention PNG decodes and every cell is the colour of the weight
the server serves (attention_png_check).

    /usr/bin/python3 tests/client/cli_test.py --server_bin build/server/textgen_server \
        --model models/shakespeare-char --cli build/client/textgen \
        --png_check build/tests/client/attention_png_check
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "client", "python"))
from live_server import LiveServer, closed_port, parse_args  # noqa: E402

import grpc  # noqa: E402
from textgen_client import textgen_pb2, textgen_pb2_grpc  # noqa: E402

ARGS = None


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.model)
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    def cli(self, *args, server=None):
        """Runs textgen; returns (exit code, stdout text, stderr text)."""
        proc = subprocess.run([ARGS.cli, "--server", server or self.server.target, *args],
                              capture_output=True, timeout=120)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def json_stream(self, *args):
        rc, out, err = self.cli("generate", "--json", *args)
        self.assertEqual(rc, 0, err)
        messages = [json.loads(line) for line in out.splitlines()]
        self.assertTrue(messages)
        return messages

    def assertOneErrorLine(self, err, prefix):
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith(prefix), err)

    # ---- generate ------------------------------------------------------------------------

    def test_streamed_text_equals_the_token_texts(self):
        for flags in (["--max_new_tokens", "80"],  # greedy
                      ["--max_new_tokens", "120", "--temperature", "0.9", "--top_k", "20",
                       "--top_p", "0.95", "--seed", "7"]):
            with self.subTest(flags=flags):
                rc, text, err = self.cli("generate", "--prompt", "ROMEO:", *flags)
                self.assertEqual(rc, 0, err)
                messages = self.json_stream("--prompt", "ROMEO:", *flags)
                tokens = [m["token"] for m in messages[:-1]]
                finished = messages[-1]["finished"]
                self.assertTrue(all("token" in m for m in messages[:-1]))
                self.assertEqual(text, "".join(t["text"] for t in tokens))
                self.assertEqual(len(tokens), finished["usage"]["generated_tokens"])
                self.assertEqual(finished["reason"], "FINISH_REASON_LENGTH")
                self.assertIn(f"{len(tokens)} tokens in", err)
                self.assertIn("first token after", err)
                self.assertIn("tokens/s", err)
                self.assertEqual([t["position"] for t in tokens],
                                 list(range(6, 6 + len(tokens))))

    def test_seeded_runs_repeat_and_the_summary_names_the_seed(self):
        flags = ["--prompt", "JULIET:", "--max_new_tokens", "60", "--temperature", "1.0",
                 "--seed", "12345"]
        first = self.cli("generate", *flags)
        second = self.cli("generate", *flags)
        self.assertEqual(first[0], 0, first[2])
        self.assertEqual(first[1], second[1])
        self.assertIn("seed 12345", first[2])

    def test_every_stop_flag_applies(self):
        messages = self.json_stream("--prompt", "ROMEO:", "--max_new_tokens", "300",
                                    "--stop", ",", "--stop", "e")
        text = "".join(m["token"]["text"] for m in messages if "token" in m)
        self.assertEqual(messages[-1]["finished"]["reason"], "FINISH_REASON_STOP")
        self.assertNotIn("e", text)
        self.assertNotIn(",", text)

    def test_deadline_is_a_grpc_error(self):
        rc, _, err = self.cli("--timeout_ms", "1", "generate", "--prompt", "ROMEO:",
                              "--max_new_tokens", "250")
        self.assertEqual(rc, 1, err)
        self.assertOneErrorLine(err, "textgen: DEADLINE_EXCEEDED: ")

    # ---- errors --------------------------------------------------------------------------

    def test_bad_flags_and_commands_are_usage_errors(self):
        cases = [
            (["generate", "--prompt", "x", "--bogus"], "textgen: unknown flag --bogus"),
            (["generate", "--prompt", "x", "--max_new_tokens", "abc"],
             "textgen: bad value for --max_new_tokens"),
            (["generate", "--prompt"], "textgen: flag --prompt needs a value"),
            (["generate"], "textgen: generate needs --prompt"),
            ([], "textgen: no command"),
            (["frobnicate"], 'textgen: unknown command "frobnicate"'),
            (["info", "extra"], 'textgen: unexpected argument "extra"'),
            (["--lb_policy", "random", "info"], "textgen: --lb_policy must be"),
            (["attention", "--prompt", "x"], "textgen: attention needs --out"),
            (["attention", "--prompt", "x", "--layer", "a", "--out", "f.png"],
             "textgen: --layer takes indices"),
        ]
        for args, prefix in cases:
            with self.subTest(args=args):
                rc, out, err = self.cli(*args)
                self.assertEqual(rc, 2, err)
                self.assertOneErrorLine(err, prefix)
                self.assertEqual(out, "")

    def test_help_is_not_an_error(self):
        rc, out, _ = self.cli("--help")
        self.assertEqual(rc, 0)
        self.assertIn("exit codes", out)

    def test_server_errors_name_the_status_and_the_message(self):
        cases = [
            (["generate", "--prompt", "x", "--temperature", "-1"], "temperature"),
            (["generate", "--prompt", "x", "--max_new_tokens", "100000"], "max_new_tokens"),
            (["generate", "--prompt", "\u00e9t\u00e9"], ""),  # not in the 65-character vocabulary
            (["attention", "--prompt", "ROMEO:", "--layer", "99", "--out",
              os.path.join(self.tmp.name, "never.png")], "99"),
        ]
        for args, mention in cases:
            with self.subTest(args=args):
                rc, out, err = self.cli(*args)
                self.assertEqual(rc, 1, err)
                self.assertOneErrorLine(err, "textgen: INVALID_ARGUMENT: ")
                self.assertIn(mention, err)
                self.assertEqual(out, "")
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "never.png")))

    def test_unreachable_address_is_exit_3_naming_it(self):
        port = closed_port()
        for target in (f"127.0.0.1:{port}", f"ipv4:127.0.0.1:{port}",
                       "dns:///no-such-host.invalid:50051"):
            for command in (["health"], ["generate", "--prompt", "x"]):
                with self.subTest(target=target, command=command):
                    rc, _, err = self.cli(*command, server=target)
                    self.assertEqual(rc, 3, err)
                    self.assertOneErrorLine(err, f"textgen: cannot connect to {target}: ")

    def test_ctrl_c_cancels_the_stream_and_exits_130(self):
        # A listener that accepts the connection and never answers: the call is pending
        # for sure when SIGINT arrives (no race with a fast generation).
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            listener.settimeout(60)
            proc = subprocess.Popen(
                [ARGS.cli, "--server", f"127.0.0.1:{listener.getsockname()[1]}", "generate",
                 "--prompt", "ROMEO:"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                conn, _ = listener.accept()  # the call has started: the handler is in place
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=60)
                conn.close()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn(b"textgen: cancelled: 0 tokens", err)
        self.assertEqual(out, b"")

    # ---- info, tokenize, health, load balancing ------------------------------------------

    def test_health_info_tokenize(self):
        rc, out, err = self.cli("health")
        self.assertEqual((rc, out), (0, "SERVING\n"), err)
        rc, out, err = self.cli("info", "--json")
        self.assertEqual(rc, 0, err)
        info = json.loads(out)
        self.assertEqual(info["tokenizer"], "char")
        self.assertGreater(info["num_layers"], 0)
        rc, out, err = self.cli("tokenize", "--text", "Hi there\n")
        self.assertEqual(rc, 0, err)
        rc_json, out_json, _ = self.cli("tokenize", "--json", "--text", "Hi there\n")
        ids = [t["id"] for t in json.loads(out_json)["tokens"]]
        self.assertEqual([int(line.split("\t")[0]) for line in out.splitlines()], ids)
        self.assertEqual([line.split("\t")[1] for line in out.splitlines()],
                         ["H", "i", "\u2423", "t", "h", "e", "r", "e", "\\n"])

    def test_any_grpc_target_and_round_robin(self):
        port = self.server.port
        for target, policy in ((f"ipv4:127.0.0.1:{port},127.0.0.1:{port}", "round_robin"),
                               (f"dns:///127.0.0.1:{port}", "pick_first"),
                               (f"ipv4:127.0.0.1:{port}", "round_robin")):
            with self.subTest(target=target):
                rc, out, err = self.cli("--lb_policy", policy, "health", server=target)
                self.assertEqual((rc, out), (0, "SERVING\n"), err)

    # ---- attention -----------------------------------------------------------------------

    def test_attention_png_matches_the_served_maps(self):
        for prompt, selection in (("ROMEO:\nBut soft, what light", ["--layer", "0,5",
                                                                   "--head", "1,3"]),
                                  ("To be, or not", [])):
            with self.subTest(prompt=prompt, selection=selection):
                png = os.path.join(self.tmp.name, "map.png")
                html = os.path.join(self.tmp.name, "map.html")
                rc, out, err = self.cli("attention", "--prompt", prompt, *selection,
                                        "--out", png, "--html", html)
                self.assertEqual(rc, 0, err)
                self.assertIn(f"wrote {png}", err)
                with open(png, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
                check = subprocess.run(
                    [ARGS.png_check, "--server", self.server.target, "--png", png,
                     "--prompt", prompt, *selection], capture_output=True, text=True,
                    timeout=120)
                print(check.stdout, end="")
                self.assertEqual(check.returncode, 0, check.stderr)
                with open(html, encoding="utf-8") as f:
                    page = f.read()
                data = json.loads(page.split('id="data">')[1].split("</script>")[0])
                self.assertEqual("".join(data["tokens"]), prompt)
                self.assertEqual(len(data["weights"]),
                                 len(data["layers"]) * len(data["heads"]))

    def test_long_prompts_are_capped_and_say_so(self):
        png = os.path.join(self.tmp.name, "long.png")
        prompt = "ROMEO:\n" + "O, she doth teach the torches to burn bright! " * 2
        rc, _, err = self.cli("attention", "--prompt", prompt, "--layer", "2", "--head", "0",
                              "--max_tokens_shown", "20", "--out", png)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"the prompt has {len(prompt)} tokens; drawing the first 20", err)
        check = subprocess.run(
            [ARGS.png_check, "--server", self.server.target, "--png", png, "--prompt", prompt,
             "--layer", "2", "--head", "0", "--max_tokens_shown", "20"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(check.returncode, 0, check.stderr)


class HeldStream(textgen_pb2_grpc.TextGenerationServicer):
    """A stand-in server whose Generate sends one token, then holds the stream until the
    test releases it; it records whether the client cancelled."""

    def __init__(self):
        self.release = threading.Event()
        self.ended = threading.Event()

    def Generate(self, request, context):
        context.add_callback(self.ended.set)
        yield textgen_pb2.GenerateResponse(token=textgen_pb2.Token(id=1, text="Hello"))
        self.release.wait(timeout=60)
        if context.is_active():
            yield textgen_pb2.GenerateResponse(token=textgen_pb2.Token(id=2, text=" world"))
            yield textgen_pb2.GenerateResponse(finished=textgen_pb2.Finished(
                reason=textgen_pb2.FINISH_REASON_LENGTH))


class StreamingTest(unittest.TestCase):
    """Tokens reach stdout as they arrive, and Ctrl-C in the middle of a stream cancels it
    on the server. The server holds the stream after one token, so neither depends on speed."""

    def setUp(self):
        self.servicer = HeldStream()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        textgen_pb2_grpc.add_TextGenerationServicer_to_server(self.servicer, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.proc = subprocess.Popen(
            [ARGS.cli, "--server", f"127.0.0.1:{port}", "generate", "--prompt", "x"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def tearDown(self):
        self.servicer.release.set()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()
        self.server.stop(grace=None)

    def read_first_token(self):
        # Bounded wait (against a hang): the first token must arrive while the stream is held.
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        self.assertTrue(ready, "no output while the stream is open: not flushed per token")
        self.assertEqual(os.read(self.proc.stdout.fileno(), 100), b"Hello")
        self.assertIsNone(self.proc.poll())

    def test_each_token_is_flushed_as_it_arrives(self):
        self.read_first_token()
        self.servicer.release.set()
        out, err = self.proc.communicate(timeout=60)
        self.assertEqual(self.proc.returncode, 0, err)
        self.assertEqual(out, b" world")
        self.assertIn(b"textgen: 2 tokens in", err)

    def test_ctrl_c_mid_stream_cancels_it_on_the_server(self):
        self.read_first_token()
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=60)
        self.assertEqual(self.proc.returncode, 130, err)
        self.assertEqual(out, b"")
        self.assertIn(b"textgen: cancelled: 1 tokens in", err)
        self.assertTrue(self.servicer.ended.wait(timeout=60), "the server never saw the cancel")


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
