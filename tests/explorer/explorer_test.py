"""The attention explorer in a real browser, label browser: a textgen_server with the HTTP
API on a free port, and explorer.js (beside this file) driving Debian's chromium through
puppeteer-core (tests/npm) against it; explorer.js asserts, this prints its figures.

Skipped (exit 77, which ctest reports as a skip), saying why, where chromium, node or
tests/npm/node_modules are absent (a developer's machine without the test packages), except
under CI=true, where that fails: scripts/setup.sh installs chromium and scripts/test.sh
runs `npm ci --prefix tests/npm`.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "client"))
from live_server import start_with_http  # noqa: E402

ARGS = None
CHROMIUM = "/usr/bin/chromium"
# --chat: only characters of models/shakespeare-char/char_vocab.json (upper case, ':', ' ',
# '\n'); the generation prompt is a prefix of the rendering with the answer.
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}ASSISTANT: {% endif %}")


def missing():
    """Why the browser cannot be driven here, or None."""
    if ARGS.overview and subprocess.run([sys.executable, "-c", "import torch"],
                                        capture_output=True).returncode != 0:
        return "torch is not installed (tools/make_checkpoint.py needs it for --overview)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is absent (Debian's chromium: scripts/setup.sh test)"
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not os.path.isfile(os.path.join(REPO, "tests", "npm", "node_modules", "puppeteer-core",
                                       "package.json")):
        return ("puppeteer-core is not installed in tests/npm "
                "(run `npm ci --prefix tests/npm`; scripts/test.sh does)")
    return None


def resident_mib(server, field):
    """The server's VmRSS (now) or VmHWM (peak) in MiB."""
    with open(f"/proc/{server.pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for the server")


class ExplorerInChromiumTest(unittest.TestCase):
    def test_explorer(self):
        reason = missing()
        if reason:  # Only under CI=true: elsewhere main skips first.
            self.fail(reason)
        model, script = ARGS.model, "explorer.js"
        tmp = tempfile.TemporaryDirectory()
        if ARGS.seq2seq:
            # The tiny random encoder-decoder checkpoint, and the page's checks for it.
            model, script = os.path.join(tmp.name, "tiny-seq2seq"), "seq2seq_explorer.js"
            subprocess.run([sys.executable, os.path.join(REPO, "tests", "testing", "make_tiny_seq2seq.py"),
                            model], check=True)
        flags, extra_args, servers = [], [], []
        if ARGS.chat:
            # A chat template of the character model's own characters (it has no room for
            # ChatML's special tokens); the same model without it, for the page with no chat.
            template = os.path.join(tmp.name, "chat_template.jinja")
            with open(template, "w") as f:
                f.write(CHAT_TEMPLATE)
            flags, script = [f"--chat_template={template}"], "chat_explorer.js"
        if ARGS.views:
            script = "views_explorer.js"
        if ARGS.overview:
            # Qwen2.5-0.5B's 24 layers x 14 heads, narrow, random; the character model's
            # vocabulary as its tokenizer (65 ids of its 512), so that a text is a prompt.
            model, script = os.path.join(tmp.name, "attention-24x14"), "overview_explorer.js"
            subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_checkpoint.py"),
                            "--preset", "attention-24x14", "--out", model],
                           check=True, capture_output=True)
            shutil.copy(os.path.join(REPO, "models", "shakespeare-char", "char_vocab.json"), model)
            # The pass on both cores (the debugger's decoder takes --threads): what a user
            # of a 4,096-token prompt runs.
            flags = ["--threads=2"]
        try:
            server, port = start_with_http(ARGS.server_bin, model, *flags)
            servers.append(server)
            if ARGS.chat:
                plain, plain_port = start_with_http(ARGS.server_bin, model)
                servers.append(plain)
                extra_args = [f"http://127.0.0.1:{plain_port}"]
            idle = resident_mib(server, "VmRSS")
            proc = subprocess.run(
                ["node", os.path.join(HERE, script), f"http://127.0.0.1:{port}",
                 CHROMIUM, ARGS.screenshot, *extra_args],
                capture_output=True, text=True, timeout=240)
            peak = resident_mib(server, "VmHWM")
            print(f"server resident {idle:.1f} MiB idle, peak {peak:.1f} MiB "
                  f"(+{peak - idle:.1f} MiB) over the page's calls")
            if ARGS.overview:
                # Issue 33: an overview of every layer and head of a 4,096-token prompt,
                # and zoomed tiles, within 100 MB of server memory above idle.
                self.assertLessEqual(peak - idle, 100 * 1e6 / 2**20)
        finally:
            for server in servers:
                server.stop()
            tmp.cleanup()
        for line in proc.stdout.splitlines():
            if line.startswith("figure: "):
                print(line[len("figure: "):])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        print(f"screenshot: {ARGS.screenshot}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server_bin", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--seq2seq", action="store_true",
                        help="serve tests/testing/make_tiny_seq2seq.py's encoder-decoder checkpoint "
                             "(--model unused) and run seq2seq_explorer.js")
    parser.add_argument("--chat", action="store_true",
                        help="serve --model with a chat template of its characters "
                             "(--chat_template) and run chat_explorer.js")
    parser.add_argument("--views", action="store_true",
                        help="run views_explorer.js (head view, model view, aggregates, "
                             "export, links) against --model")
    parser.add_argument("--overview", action="store_true",
                        help="serve tools/make_checkpoint.py's attention-24x14 (--model unused) "
                             "and run overview_explorer.js on a 4,096-token prompt")
    ARGS, rest = parser.parse_known_args()
    # A skip ctest shows as one (SKIP_RETURN_CODE 77), not as a pass.
    if missing() and os.environ.get("CI") != "true":
        print(f"skipped: {missing()}")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest)
