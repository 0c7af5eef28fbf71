"""The textgen command line (client/main.cc) against a live textgen_server.

Streamed text equals the server's token texts; --json lines parse; token-id prompts, top
log-probabilities, the echoed prompt and the attention tap reach the server and come back
(checked against the attention maps the CLI fetches for the same tokens); bad flags, server errors,
unreachable addresses and Ctrl-C give the documented one-line messages and exit codes
(client/README.md); the attention PNG decodes and every cell is the colour of the weight
the server serves (attention_png_check).
Compact attention (issue 33): --encoding u8/u16/f16/top_k maps written into the page equal
the float path's within the proto's bounds; --summary prints a row per layer x head and the
rollout's size; windows and overviews draw; their usage errors exit 2; --tap_encoding rows
travel compact and the table shows them decoded (u8) or as sent (top_k).

`textgen chat` (client/chat_command.h) against a stand-in server (ChatStandInTest: the
requests each turn sends, the REPL's commands, errors, Ctrl-C) and, with --chat_model,
against the shipped instruct model (ChatTest, ctest client_cli_chat_e2e): greedy answers to
held-out questions exactly as heldout.jsonl gives them, one-shot and through the REPL.

    /usr/bin/python3 tests/client/cli_test.py --server_bin build/server/textgen_server \
        --model models/shakespeare-char --cli build/client/textgen \
        --png_check build/tests/client/attention_png_check
    /usr/bin/python3 tests/client/cli_test.py ... --chat_model models/chat-instruct
"""

import json
import math
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "client", "python"))
from chat_stand_in import conversation, start_chat_stand_in  # noqa: E402
from live_server import (LiveServer, closed_port, heldout_cases, parse_args,  # noqa: E402
                         run_tests)

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

    def float32(self, x):
        return struct.unpack("f", struct.pack("f", x))[0]

    def attention_page_maps(self, *prompt_flags):
        """`textgen attention --html` for the prompt: {(layer, head): T×T rows}, token texts.
        The page embeds POST /v1/attention's JSON (explorer/attention_json.h): row q holds
        keys 0..q, to 4 significant digits; the masked keys come back as zeros here."""
        html = os.path.join(self.tmp.name, "maps.html")
        rc, _, err = self.cli("attention", *prompt_flags, "--html", html)
        self.assertEqual(rc, 0, err)
        with open(html, encoding="utf-8") as f:
            data = json.loads(f.read().split('id="data">')[1].split("</script>")[0])
        t = len(data["tokens"])
        maps = {}
        for m in data["maps"]:
            self.assertEqual([len(row) for row in m["weights"]], list(range(1, t + 1)))
            maps[(m["layer"], m["head"])] = [row + [0.0] * (t - len(row))
                                             for row in m["weights"]]
        return maps, [token["text"] for token in data["tokens"]]

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

    def test_token_ids_top_logprobs_echo_and_attention_tap(self):
        rc, out, err = self.cli("tokenize", "--json", "--text", "ROMEO:")
        self.assertEqual(rc, 0, err)
        ids = [t["id"] for t in json.loads(out)["tokens"]]
        flags = ["--prompt_ids", ",".join(map(str, ids)), "--max_new_tokens", "12",
                 "--top_logprobs", "5", "--echo_prompt", "--tap_layers", "0,3",
                 "--tap_heads", "1,2"]
        messages = self.json_stream(*flags)
        tokens = [m["token"] for m in messages[:-1]]
        finished = messages[-1]["finished"]
        prompt = [t for t in tokens if t["is_prompt"]]
        generated = [t for t in tokens if not t["is_prompt"]]

        # The ids round-trip; the echo comes first, in order, and reads as the text.
        self.assertEqual(tokens[:len(prompt)], prompt)
        self.assertEqual([t["id"] for t in prompt], ids)
        self.assertEqual([t["position"] for t in prompt], list(range(len(ids))))
        self.assertEqual("".join(t["text"] for t in prompt), "ROMEO:")
        self.assertEqual(finished["usage"], {"prompt_tokens": len(ids), "generated_tokens": 12,
                                             "source_tokens": 0})  # encoder-decoder only
        # The same prompt as text generates the same tokens (greedy).
        by_text = self.json_stream("--prompt", "ROMEO:", "--max_new_tokens", "12")
        self.assertEqual([t["id"] for t in generated],
                         [m["token"]["id"] for m in by_text if "token" in m])

        # --json carries every field of every message, the prompt's too.
        for t in tokens:
            self.assertEqual(set(t), {"id", "text", "logprob", "top_logprobs", "attention",
                                      "position", "is_prompt", "completion_index"})
        self.assertEqual(set(finished), {"reason", "usage", "timings", "seed",
                                         "completion_index"})

        # Top log-probabilities: 5, distinct, most likely first; greedy took the first.
        for t in generated:
            alts = t["top_logprobs"]
            self.assertEqual(len(alts), 5)
            self.assertEqual(len({a["id"] for a in alts}), 5)
            self.assertEqual(sorted(alts, key=lambda a: -a["logprob"]), alts)
            self.assertEqual((alts[0]["id"], alts[0]["logprob"]), (t["id"], t["logprob"]))
            self.assertTrue(all(a["logprob"] <= 0 for a in alts))
            self.assertLess(math.fsum(math.exp(a["logprob"]) for a in alts), 1 + 1e-5)

        # The tap: the rows asked for, each over the keys before the token, summing to 1,
        # and the same numbers as row position - 1 of the maps the server computes for the
        # whole sequence (fetched with `textgen attention --prompt_ids`).
        sequence = ids + [t["id"] for t in generated]
        maps, map_tokens = self.attention_page_maps(
            "--prompt_ids", ",".join(map(str, sequence[:-1])), "--layer", "0,3",
            "--head", "1,2")
        self.assertEqual(len(map_tokens), len(sequence) - 1)
        for t in prompt:
            self.assertEqual(t["attention"], [])
        for t in generated:
            rows = t["attention"]
            self.assertEqual([(r["layer"], r["head"]) for r in rows],
                             [(0, 1), (0, 2), (3, 1), (3, 2)])
            for r in rows:
                self.assertEqual(len(r["weights"]), t["position"])
                self.assertTrue(math.isclose(math.fsum(r["weights"]), 1.0, abs_tol=1e-5))
                want = maps[(r["layer"], r["head"])][t["position"] - 1][:t["position"]]
                # The page's 4 significant digits of the same numbers (bit for bit, a
                # KV-cached decode step computes what a whole prefill does: the Python
                # client's test compares the unrounded maps).
                self.assertEqual([float(f"{self.float32(w):.4g}") for w in r["weights"]],
                                 want, (t["position"], r["layer"], r["head"]))

    def test_the_token_table_shows_what_json_carries(self):
        def shown(text):  # as the table escapes a token
            return text.replace("\n", "\\n").replace("\t", "\\t").replace(" ", "\u2423")

        flags = ["--prompt", "JULIET:", "--max_new_tokens", "6", "--top_logprobs", "3",
                 "--echo_prompt", "--attention_tap", "--tap_layers", "5"]
        messages = self.json_stream(*flags)
        rc, out, err = self.cli("generate", *flags)
        self.assertEqual(rc, 0, err)
        self.assertIn("6 tokens in", err)
        lines = out.splitlines()
        self.assertEqual(lines[0], "# position\tid\ttoken\tlogprob\ttop_logprobs "
                                   "(token logprob)...")
        lines = lines[1:]
        for m in messages[:-1]:
            t = m["token"]
            cells = lines.pop(0).split("\t")
            self.assertEqual(cells[:3], [str(t["position"]), str(t["id"]), shown(t["text"])])
            if t["is_prompt"]:
                self.assertEqual(cells[3:], ["prompt"])
                continue
            self.assertEqual(cells[3], f"{self.float32(t['logprob']):.4f}")
            self.assertEqual(cells[4:], [f"{shown(a['text'])} {self.float32(a['logprob']):.4f}"
                                         for a in t["top_logprobs"]])
            # Every head of layer 5, one line each.
            for r in t["attention"]:
                self.assertEqual(lines.pop(0), f"\tL5 H{r['head']}\t" +
                                 " ".join(f"{self.float32(w):.4f}" for w in r["weights"]))
            self.assertEqual([r["head"] for r in t["attention"]], [0, 1, 2, 3])
        self.assertEqual(lines, [])
        # Without a table, the echo is the prompt's text before the generated text.
        rc, text, err = self.cli("generate", "--prompt", "JULIET:", "--max_new_tokens", "6",
                                 "--echo_prompt")
        self.assertEqual(rc, 0, err)
        self.assertEqual(text, "".join(m["token"]["text"] for m in messages[:-1]))

    def test_prompt_logprobs_table_scores_the_prompt(self):
        flags = ["--prompt", "JULIET:", "--max_new_tokens", "0", "--prompt_logprobs", "2"]
        messages = self.json_stream(*flags)
        tokens = [m["token"] for m in messages if "token" in m]
        self.assertEqual(messages[-1]["finished"]["usage"]["generated_tokens"], 0)
        self.assertTrue(all(t["is_prompt"] for t in tokens))
        rc, out, err = self.cli("generate", *flags)
        self.assertEqual(rc, 0, err)
        rows = [line.split("\t") for line in out.splitlines()[1:]]
        self.assertEqual(len(rows), len(tokens))
        self.assertEqual(rows[0][3:], ["prompt"])  # Nothing precedes the first token.
        for row, t in zip(rows[1:], tokens[1:]):
            self.assertEqual(row[3], f"{self.float32(t['logprob']):.4f}")
            self.assertEqual(len(row[4:]), 2)

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
            (["generate", "--prompt", "x", "--prompt_ids", "1"],
             "textgen: --prompt and --prompt_ids exclude each other"),
            (["generate", "--prompt_ids", "1,x"], 'textgen: --prompt_ids takes token ids >= 0, '
                                                   'got "x"'),
            (["attention", "--prompt_ids", "-3", "--out", "f.png"],
             "textgen: --prompt_ids takes token ids"),
            (["attention", "--out", "f.png"], "textgen: attention needs --prompt"),
            (["generate", "--prompt", "x", "--tap_layers", "a"],
             "textgen: --tap_layers takes indices"),
            (["generate", "--prompt", "x", "--tap_heads", "-1"],
             "textgen: --tap_heads takes indices"),
            (["generate", "--prompt", "x", "--top_logprobs", "many"],
             "textgen: bad value for --top_logprobs"),
            (["generate", "--prompt", "x", "--seed", "-1"], "textgen: bad value for --seed"),
            (["generate", "--prompt", "x", "--stop_token_ids", "1,b"],
             'textgen: --stop_token_ids takes token ids >= 0, got "b"'),
            (["chat", "--message", "hi", "--chat_template_kwargs", "[1]"],
             "textgen: --chat_template_kwargs takes a JSON object"),
            (["chat", "--message", "hi", "--chat_template_kwargs", "{"],
             "textgen: --chat_template_kwargs is not JSON"),
            (["chat", "--message", "hi", "--max_new_tokens", "x"],
             "textgen: bad value for --max_new_tokens"),
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
            (["generate", "--prompt_ids", "1,65"], "prompt[1] = 65 is outside the model's vocabulary"),
            (["generate", "--prompt", "x", "--top_logprobs", "21"], "top_logprobs"),
            (["generate", "--prompt", "x", "--tap_layers", "0", "--tap_heads", "7"],
             "attention_tap.heads[0] = 7"),
        ]
        for args, mention in cases:
            with self.subTest(args=args):
                rc, out, err = self.cli(*args)
                self.assertEqual(rc, 1, err)
                self.assertOneErrorLine(err, "textgen: INVALID_ARGUMENT: ")
                self.assertIn(mention, err)
                self.assertEqual(out, "")
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "never.png")))

    def test_chat_without_a_chat_template_says_so(self):
        # The character model has no chat template (ModelInfo.chat is false).
        for stdin in (None, "hello\n"):
            args = ["chat", "--message", "hi"] if stdin is None else ["chat"]
            with self.subTest(args=args):
                proc = subprocess.run([ARGS.cli, "--server", self.server.target, *args],
                                      input=(stdin or "").encode(), capture_output=True,
                                      timeout=120)
                err = proc.stderr.decode()
                self.assertEqual(proc.returncode, 1, err)
                self.assertOneErrorLine(err, "textgen: the model served at ")
                self.assertIn("has no chat template", err)
                self.assertIn("--chat_template", err)
                self.assertEqual(proc.stdout, b"")

    def test_unreachable_address_is_exit_3_naming_it(self):
        port = closed_port()
        for target in (f"127.0.0.1:{port}", f"ipv4:127.0.0.1:{port}",
                       "dns:///no-such-host.invalid:50051"):
            for command in (["health"], ["generate", "--prompt", "x"],
                            ["chat", "--message", "x"]):
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
                self.assertEqual("".join(t["text"] for t in data["tokens"]), prompt)
                layers = sorted({m["layer"] for m in data["maps"]})
                heads = sorted({m["head"] for m in data["maps"]})
                self.assertEqual(len(data["maps"]), len(layers) * len(heads))
                if selection:
                    self.assertEqual((layers, heads), ([0, 5], [1, 3]))
                # The server's explorer page, data embedded (one renderer).
                self.assertIn("<title>textgen attention explorer</title>", page)

    def test_compact_encodings_draw_what_f32_draws_within_their_bounds(self):
        """--encoding u8 / f16 / top_k: the page's maps (decoded by the CLI, then written
        to 4 significant digits) equal the float path's within the proto's bounds."""
        prompt = ["--prompt", "ROMEO:\nBut soft, what light through yonder window breaks?"]
        exact, tokens = self.attention_page_maps(*prompt)
        digits = 5e-4  # relative error of 4 significant digits, on each side
        for encoding, flags in (("u8", []), ("u16", []), ("f16", []),
                                ("top_k", ["--top_k", "4"])):
            maps, shown = self.attention_page_maps(*prompt, "--encoding", encoding, *flags)
            self.assertEqual(shown, tokens)
            self.assertEqual(maps.keys(), exact.keys())
            for key, rows in maps.items():
                for q, (row, want) in enumerate(zip(rows, exact[key])):
                    top = max(want)
                    slack = [digits * (abs(a) + abs(b)) + 1e-7 for a, b in zip(row, want)]
                    if encoding == "top_k":
                        kept = [k for k, w in enumerate(row) if w != 0]
                        self.assertLessEqual(len(kept), 4)
                        for k in kept:
                            self.assertLessEqual(abs(row[k] - want[k]), slack[k], (key, q, k))
                        left_out = [want[k] for k in range(len(row)) if k not in kept]
                        if kept and left_out:  # the largest were kept
                            self.assertGreaterEqual(min(want[k] for k in kept) + 1e-6,
                                                    max(left_out), (key, q))
                        continue
                    bound = {"u8": top / 510, "u16": top / 131070}.get(encoding)
                    for k, (a, b) in enumerate(zip(row, want)):
                        stated = bound if bound is not None else max(2 ** -11 * b, 2 ** -25)
                        self.assertLessEqual(abs(a - b), stated + slack[k],
                                             (encoding, key, q, k))

    def test_summary_prints_a_row_per_layer_and_head(self):
        info = json.loads(self.cli("info", "--json")[1])
        layers, heads = info["num_layers"], info["num_heads"]
        for selection, want in (([], [(l, h) for l in range(layers) for h in range(heads)]),
                                (["--layer", "1", "--head", "0,2"], [(1, 0), (1, 2)])):
            with self.subTest(selection=selection):
                rc, out, err = self.cli("attention", "--prompt", "To be, or not to be",
                                        "--summary", *selection)
                self.assertEqual(rc, 0, err)
                lines = out.splitlines()
                self.assertEqual(lines[0], "# layer\thead\tkind\tentropy\tsink\t"
                                           "mean_distance\tmax_weight")
                self.assertTrue(lines[-1].startswith("# rollout: "), out)
                rows = [line.split("\t") for line in lines[1:-1]]
                self.assertEqual([(int(r[0]), int(r[1])) for r in rows], want)
                for r in rows:
                    self.assertEqual(r[2], "decoder_self")
                    entropy, sink, distance, top = map(float, r[3:])
                    self.assertTrue(0 <= sink <= 1 and 0 < top <= 1 and entropy >= 0
                                    and distance >= 0, r)
        # Whole prompts get a rollout, n x n.
        rc, out, _ = self.cli("attention", "--prompt", "To be, or not to be", "--summary")
        self.assertIn("# rollout: 19x19", out)

    def test_windows_overviews_and_their_usage_errors(self):
        prompt = ["--prompt", "ROMEO:\nBut soft, what light through yonder window breaks?"]
        png = os.path.join(self.tmp.name, "window.png")
        for flags in (["--queries", "10:30", "--keys", "5:25"], ["--overview", "8:mean"],
                      ["--queries", "20:", "--encoding", "f16"]):
            with self.subTest(flags=flags):
                rc, _, err = self.cli("attention", *prompt, *flags, "--out", png)
                self.assertEqual(rc, 0, err)
                self.assertIn(f"wrote {png}", err)
        for flags, message in (
                (["--top_k", "3", "--out", png], "--top_k goes with --encoding top_k"),
                (["--encoding", "int4", "--out", png], "encoding must be"),
                (["--queries", "5", "--out", png], "--queries takes BEGIN:END"),
                (["--overview", "8:median", "--out", png], "--overview takes"),
                (["--overview", "8", "--html", png], "--html draws whole maps")):
            with self.subTest(flags=flags):
                rc, out, err = self.cli("attention", *prompt, *flags)
                self.assertEqual(rc, 2, err)
                self.assertIn(message, err)

    def test_the_tap_table_decodes_compact_rows(self):
        flags = ["--prompt", "JULIET:", "--max_new_tokens", "5", "--tap_layers", "2"]
        messages = self.json_stream(*flags, "--attention_tap")
        exact = [[r["weights"] for r in m["token"]["attention"]] for m in messages[:-1]]

        def rows(out):  # the table's attention lines, per token
            tokens = []
            for line in out.splitlines()[1:]:
                if line.startswith("\t"):
                    tokens[-1].append(line.split("\t")[2])
                else:
                    tokens.append([])
            return tokens

        # The rows travel compact (--json shows them as sent).
        for m in self.json_stream(*flags, "--tap_encoding", "u8")[:-1]:
            for r in m["token"]["attention"]:
                self.assertEqual((r["weights"], r["compact"]["encoding"]),
                                 ([], "ATTENTION_ENCODING_UINT8"), r)
        rc, out, err = self.cli("generate", *flags, "--tap_encoding", "u8")
        self.assertEqual(rc, 0, err)
        for token, want in zip(rows(out), exact, strict=True):
            for line, row in zip(token, want, strict=True):
                top = max(row)
                for a, b in zip(map(float, line.split()), row, strict=True):
                    self.assertLessEqual(abs(a - b), top / 510 + 1e-4)  # + the printed digits
        rc, out, err = self.cli("generate", *flags, "--tap_encoding", "top_k",
                                "--tap_top_k", "2")
        self.assertEqual(rc, 0, err)
        for token, want in zip(rows(out), exact, strict=True):
            for line, row in zip(token, want, strict=True):
                *entries, rest = line.split()
                largest = sorted(range(len(row)), key=lambda k: (-row[k], k))[:2]
                self.assertEqual([int(e.split(":")[0]) for e in entries], largest, line)
                self.assertEqual([e.split(":")[1] for e in entries],
                                 [f"{self.float32(row[k]):.4f}" for k in largest])
                self.assertAlmostEqual(float(rest.removeprefix("rest:")),
                                       sum(row) - sum(row[k] for k in largest), delta=1e-4)

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


class ChatStandInTest(unittest.TestCase):
    """`textgen chat` against ChatServicer: what each turn sends, what reaches stdout and
    stderr, the REPL's commands, errors and Ctrl-C. Needs no model."""

    def start(self, **kwargs):
        self.servicer, self.target, server = start_chat_stand_in(**kwargs)
        self.addCleanup(server.stop, None)
        self.addCleanup(self.servicer.release.set)

    def chat(self, *flags, stdin=""):
        proc = subprocess.run([ARGS.cli, "--server", self.target, "chat", *flags],
                              input=stdin.encode(), capture_output=True, timeout=120)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def test_one_shot_messages_carry_the_history(self):
        self.start()
        rc, out, err = self.chat("--system", "Be brief.", "--message", "2 + 2?",
                                 "--message", "and, 3 + 3?")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "2 + 2?!\nand, 3 + 3?!")  # the answers alone, one per line
        self.assertEqual([conversation(r) for r in self.servicer.requests], [
            [("system", "Be brief."), ("user", "2 + 2?")],
            [("system", "Be brief."), ("user", "2 + 2?"), ("assistant", "2 + 2?!"),
             ("user", "and, 3 + 3?")]])  # --message is taken as given, commas included
        self.assertEqual(err.splitlines()[0][:len("textgen: 20 prompt + 2 generated tokens in ")],
                         "textgen: 20 prompt + 2 generated tokens in ")
        self.assertIn("finished: eos, seed 5", err)
        self.assertIn("textgen: 40 prompt + 2 generated tokens", err)

    def test_generation_flags_reach_the_request(self):
        self.start()
        rc, out, err = self.chat(
            "--message", "hi", "--max_new_tokens", "5", "--temperature", "0.7", "--top_k",
            "3", "--top_p", "0.9", "--repetition_penalty", "1.1", "--seed", "42", "--stop",
            "a,b", "--stop", "\n", "--stop_token_ids", "4,5",
            "--chat_template_kwargs", '{"enable_thinking": false}')
        self.assertEqual(rc, 0, err)
        [request] = self.servicer.requests
        self.assertEqual(conversation(request), [("user", "hi")])  # no system prompt
        self.assertEqual(request.max_new_tokens, 5)
        self.assertAlmostEqual(request.sampling.temperature, 0.7, places=6)
        self.assertEqual((request.sampling.top_k, request.sampling.seed), (3, 42))
        self.assertAlmostEqual(request.sampling.top_p, 0.9, places=6)
        self.assertAlmostEqual(request.sampling.repetition_penalty, 1.1, places=6)
        self.assertEqual(list(request.stop), ["a,b", "\n"])
        self.assertEqual(list(request.stop_token_ids), [4, 5])
        conv = request.prompt.conversation
        self.assertEqual(conv.chat_template_kwargs_json, '{"enable_thinking": false}')
        self.assertFalse(conv.HasField("add_generation_prompt"))  # the template's default
        self.assertFalse(request.echo_prompt)

    def test_show_prompt_prints_the_rendered_prompt_to_stderr(self):
        self.start()
        rc, out, err = self.chat("--message", "hi", "--show_prompt")
        self.assertEqual(rc, 0, err)
        self.assertTrue(self.servicer.requests[0].echo_prompt)
        self.assertEqual(out, "hi!")
        self.assertEqual(err.splitlines()[0], "<rendered 1>")

    def test_repl_commands_and_history(self):
        self.start()
        stdin = ("/system Be brief.\nhello\n\n/bogus\n/reset\n//x\nbye\n/system\n"
                 "again\n/exit\nnever sent\n")
        rc, out, err = self.chat(stdin=stdin)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "hello!\n/x!\nbye!\nagain!\n")
        self.assertEqual([conversation(r) for r in self.servicer.requests], [
            [("system", "Be brief."), ("user", "hello")],
            [("system", "Be brief."), ("user", "/x")],  # after /reset: the system stays
            [("system", "Be brief."), ("user", "/x"), ("assistant", "/x!"), ("user", "bye")],
            [("user", "/x"), ("assistant", "/x!"), ("user", "bye"), ("assistant", "bye!"),
             ("user", "again")]])  # /system alone removes it
        self.assertIn('textgen: unknown command "/bogus"', err)
        self.assertIn("textgen: history cleared", err)
        counts = re.findall(r"textgen: (\d+) prompt \+ (\d+) generated tokens", err)
        self.assertEqual(counts, [("20", "2"), ("20", "2"), ("40", "2"), ("50", "2")])
        # Not a terminal: no prompt, no banner.
        self.assertNotIn("> ", out)

    def test_no_chat_template(self):
        self.start(chat=False)
        for flags, stdin in ((["--message", "hi"], ""), ([], "hi\n")):
            with self.subTest(flags=flags):
                rc, out, err = self.chat(*flags, stdin=stdin)
                self.assertEqual(rc, 1, err)
                self.assertEqual(out, "")
                self.assertIn("(stand-in) has no chat template", err)
                self.assertIn("--chat_template", err)
        self.assertEqual(self.servicer.requests, [])

    def test_a_failed_turn(self):
        self.start(fail_on="bad")
        # One-shot: the first failure ends it, in one line, exit 1.
        rc, out, err = self.chat("--message", "ok", "--message", "bad", "--message", "never")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "ok!\n")
        self.assertEqual(err.splitlines()[-1], "textgen: INVALID_ARGUMENT: refused: bad")
        self.assertEqual(len(self.servicer.requests), 2)
        # The REPL reports it, drops the turn, goes on, and exits 1.
        self.servicer.requests.clear()
        rc, out, err = self.chat(stdin="bad\nok\n")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "ok!\n")
        self.assertIn("textgen: INVALID_ARGUMENT: refused: bad", err)
        self.assertEqual(conversation(self.servicer.requests[1]), [("user", "ok")])

    def test_ctrl_c_stops_the_answer_and_the_repl_goes_on(self):
        self.start(hold_on="wait")
        proc = subprocess.Popen([ARGS.cli, "--server", self.target, "chat"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            proc.stdin.write(b"wait\n")
            proc.stdin.flush()
            # Bounded wait (against a hang) for the first token, streamed while held.
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            self.assertTrue(ready, "no output while the stream is open")
            self.assertEqual(os.read(proc.stdout.fileno(), 100), b"wait")
            proc.send_signal(signal.SIGINT)
            self.assertTrue(self.servicer.ended.wait(timeout=60), "the call was not cancelled")
            out, err = proc.communicate(b"next\n", timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out, b"\nnext!\n")
        self.assertIn(b"textgen: cancelled (the turn is dropped)", err)
        self.assertEqual(conversation(self.servicer.requests[1]), [("user", "next")])


class ChatTest(unittest.TestCase):
    """`textgen chat` against the shipped instruct model (--chat_model): greedy answers to
    held-out questions (heldout.jsonl) exactly as expected, one-shot and through the REPL."""

    @classmethod
    def setUpClass(cls):
        cls.server = LiveServer(ARGS.server_bin, ARGS.chat_model)
        cls.cases = heldout_cases(ARGS.chat_model)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def cli(self, *args, stdin=""):
        proc = subprocess.run([ARGS.cli, "--server", self.server.target, *args],
                              input=stdin.encode(), capture_output=True, timeout=120)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    @staticmethod
    def system_and_question(case):
        """The case's system prompt ("" for none: the template's default) and question."""
        system = [m["content"] for m in case["messages"] if m["role"] == "system"]
        [question] = [m["content"] for m in case["messages"] if m["role"] == "user"]
        return (system[0] if system else ""), question

    def test_info_says_chat(self):
        rc, out, err = self.cli("info", "--json")
        self.assertEqual(rc, 0, err)
        self.assertTrue(json.loads(out)["chat"])

    def test_one_shot_answers_held_out_questions(self):
        for case in self.cases:
            system, question = self.system_and_question(case)
            with self.subTest(question=question):
                flags = ["--system", system] if system else []
                rc, out, err = self.cli("chat", *flags, "--message", question,
                                        "--temperature", "0", "--max_new_tokens", "32")
                self.assertEqual(rc, 0, err)
                self.assertEqual(out, case["answer"])
                # The model ended its turn (the template's end-of-turn token).
                self.assertRegex(err, r"textgen: \d+ prompt \+ \d+ generated tokens in "
                                      r"[\d.]+ s, finished: eos")

    def test_show_prompt_shows_the_question_in_the_rendered_prompt(self):
        system, question = self.system_and_question(self.cases[0])
        rc, out, err = self.cli("chat", "--system", system or "Answer briefly.",
                                "--message", question, "--show_prompt")
        self.assertEqual(rc, 0, err)
        rendered = err.split("\ntextgen: ")[0]
        self.assertIn(question, rendered)
        self.assertIn(system or "Answer briefly.", rendered)
        self.assertLess(rendered.index(system or "Answer briefly."), rendered.index(question))
        self.assertNotIn(question, out)

    def test_repl_two_turns_and_reset(self):
        first, second = self.cases[0], self.cases[1]
        system, q1 = self.system_and_question(first)
        _, q2 = self.system_and_question(second)
        stdin = f"/system {system}\n{q1}\n{q2}\n/reset\n{q1}\n/exit\n"
        rc, out, err = self.cli("chat", "--max_new_tokens", "32", stdin=stdin)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines(), [first["answer"], second["answer"],
                                            first["answer"]])
        self.assertIn("textgen: history cleared", err)
        counts = [(int(p), int(g)) for p, g in
                  re.findall(r"textgen: (\d+) prompt \+ (\d+) generated tokens", err)]
        self.assertEqual(len(counts), 3, err)
        # The second turn carries the first; after /reset the prompt is the first's again.
        self.assertGreater(counts[1][0], counts[0][0] + counts[0][1])
        self.assertEqual(counts[2], counts[0])
        # The same two turns one-shot: the same answers.
        flags = ["--system", system] if system else []
        rc, out, err = self.cli("chat", *flags, "--message", q1, "--message", q2,
                                "--max_new_tokens", "32")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, f"{first['answer']}\n{second['answer']}")


if __name__ == "__main__":
    ARGS, argv = parse_args()
    run_tests(ARGS, argv, chat_cases=[ChatTest], name="client_cli_chat_e2e")
