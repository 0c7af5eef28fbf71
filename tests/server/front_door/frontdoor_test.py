"""The front door of a live textgen_server (server/README.md "Security"), from the Python
client (client/python/textgen_client.py) over loopback:

- TLS: a TLS client with the test CA works; a plaintext client, or one that does not trust
  the CA, fails cleanly with UNAVAILABLE and the server goes on serving.
- mTLS: no client certificate, or one from another CA, fails; the right one works.
- A certificate rotated on disk (a new CA's) is served to new connections without a restart.
- Tokens: for every RPC, no token and a wrong token are UNAUTHENTICATED; a generate token is
  PERMISSION_DENIED for DebugAttention and for Generate with an attention tap and OK for the
  rest; a debug token may do everything; health needs no token. SIGHUP reloads the file.
- Per-client limits: client A at --client_max_streams gets RESOURCE_EXHAUSTED naming the
  limit and its use while client B is admitted; --client_rate refuses past the burst.
- The textgen CLI speaks mTLS with --ca_cert/--client_cert/--client_key and sends --token or
  $TEXTGEN_TOKEN.
- Reflection is on by default and off with --reflection=false; GetModelInfo.name is the
  model's base name, not the --model path; /metrics needs --metrics_token_file's token.

Certificates are made at test time with openssl (tests/testing/make_test_certs.sh).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

from common import (LiveServer, TextgenClient, closed_port, code_of, grpc, make_certs,
                    parse_args, reflection_code, temp_dir, textgen_pb2, write)

ARGS = None
OK = grpc.StatusCode.OK
WAIT = 60  # Bound on waits that should take a second or two (against hangs only).


def held_channel_options():
    """A small, fixed HTTP/2 window: a stream nobody reads stalls the server soon, so it
    stays open (the server's engine pauses that sequence)."""
    return [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024),
            ("grpc.use_local_subchannel_pool", 1)]


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = make_certs(temp_dir("textgen_tls_"))
        cls.server = LiveServer(ARGS.server_bin, ARGS.model,
                                f"--tls_cert={cls.certs['server.pem']}",
                                f"--tls_key={cls.certs['server.key']}")
        cls.target = f"localhost:{cls.server.port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_tls_client_works_and_model_name_is_the_base_name(self):
        with TextgenClient(self.target, tls=True, ca_cert=self.certs["ca.pem"],
                           timeout=WAIT) as client:
            info = client.info()
            self.assertEqual(info.name, "shakespeare-char")
            self.assertNotIn("/", info.name)
            self.assertTrue(client.generate("ROMEO:", max_new_tokens=5).text())
            self.assertIn("TLS", self.server.log())

    def test_plaintext_client_fails_cleanly(self):
        with TextgenClient(self.target, timeout=10) as client:
            code, details = code_of(client.info)
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)
        # The server is unharmed.
        with TextgenClient(self.target, ca_cert=self.certs["ca.pem"], timeout=WAIT) as client:
            self.assertEqual(client.health(), "SERVING")

    def test_client_that_does_not_trust_the_ca_fails(self):
        with TextgenClient(self.target, tls=True, timeout=10) as client:  # System roots.
            code, details = code_of(client.info)
        self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)


class MutualTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = make_certs(temp_dir("textgen_mtls_"))
        cls.other = make_certs(temp_dir("textgen_mtls_other_"), "another-ca")
        cls.server = LiveServer(ARGS.server_bin, ARGS.model,
                                f"--tls_cert={cls.certs['server.pem']}",
                                f"--tls_key={cls.certs['server.key']}",
                                f"--tls_client_ca={cls.certs['ca.pem']}")
        cls.target = f"localhost:{cls.server.port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_client_certificate_is_required_and_verified(self):
        with TextgenClient(self.target, ca_cert=self.certs["ca.pem"], timeout=10) as client:
            code, details = code_of(client.info)
            self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, "no client certificate")
        with TextgenClient(self.target, ca_cert=self.certs["ca.pem"],
                           client_cert=self.other["client.pem"],
                           client_key=self.other["client.key"], timeout=10) as client:
            code, details = code_of(client.info)
            self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, "another CA's certificate")
        with TextgenClient(self.target, ca_cert=self.certs["ca.pem"],
                           client_cert=self.certs["client.pem"],
                           client_key=self.certs["client.key"], timeout=WAIT) as client:
            self.assertEqual(client.info().name, "shakespeare-char")
        self.assertIn("mutual TLS", self.server.log())


class CliTest(unittest.TestCase):
    def test_cli_speaks_mutual_tls_and_sends_its_token(self):
        if not ARGS.cli:
            self.skipTest("no --cli given")
        certs = make_certs(temp_dir("textgen_cli_"))
        tokens = write(os.path.join(temp_dir("textgen_cli_tokens_"), "tokens"),
                       "generate cli-secret\n")
        server = LiveServer(ARGS.server_bin, ARGS.model, f"--tls_cert={certs['server.pem']}",
                            f"--tls_key={certs['server.key']}",
                            f"--tls_client_ca={certs['ca.pem']}",
                            f"--auth_tokens_file={tokens}")
        try:
            tls = [f"--server=localhost:{server.port}", f"--ca_cert={certs['ca.pem']}",
                   f"--client_cert={certs['client.pem']}", f"--client_key={certs['client.key']}",
                   "--timeout_ms=60000"]

            def cli(*args, env_token=None):
                env = dict(os.environ)
                env.pop("TEXTGEN_TOKEN", None)
                if env_token is not None:
                    env["TEXTGEN_TOKEN"] = env_token
                return subprocess.run([ARGS.cli, *args], capture_output=True, text=True,
                                      timeout=WAIT, env=env)

            ok = cli(*tls, "info", "--json", env_token="cli-secret")
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("shakespeare-char", ok.stdout)
            flag = cli(*tls, "--token=cli-secret", "tokenize", "--text=Hi")
            self.assertEqual(flag.returncode, 0, flag.stderr)
            missing = cli(*tls, "info")
            self.assertEqual(missing.returncode, 1, missing.stderr)
            self.assertIn("UNAUTHENTICATED", missing.stderr)
            no_cert = cli(f"--server=localhost:{server.port}", f"--ca_cert={certs['ca.pem']}",
                          "--timeout_ms=10000", "info", env_token="cli-secret")
            self.assertNotEqual(no_cert.returncode, 0, "mTLS without a client certificate")
            half = cli(*tls[:2], f"--client_cert={certs['client.pem']}", "info")
            self.assertEqual(half.returncode, 2, half.stderr)
            self.assertIn("--client_key", half.stderr)
        finally:
            server.stop()


class CertificateRotationTest(unittest.TestCase):
    def test_rotated_certificate_is_served_without_restart(self):
        served = temp_dir("textgen_rotate_")
        old = make_certs(temp_dir("textgen_rotate_old_"), "old-ca")
        new = make_certs(temp_dir("textgen_rotate_new_"), "new-ca")
        cert, key = os.path.join(served, "server.pem"), os.path.join(served, "server.key")
        shutil.copy(old["server.pem"], cert)
        shutil.copy(old["server.key"], key)
        server = LiveServer(ARGS.server_bin, ARGS.model, f"--tls_cert={cert}",
                            f"--tls_key={key}", "--tls_refresh_seconds=1")
        target = f"localhost:{server.port}"
        try:
            def works_with(ca):
                # A channel of its own: a new connection, a new handshake.
                with TextgenClient(target, ca_cert=ca, timeout=10,
                                   options=[("grpc.use_local_subchannel_pool", 1)]) as client:
                    return code_of(client.info)[0] == OK

            self.assertTrue(works_with(old["ca.pem"]))
            self.assertFalse(works_with(new["ca.pem"]))
            pid = server._proc.pid
            # Replaced in place, key first: the watcher skips a pair that does not match.
            for source, dest in ((new["server.key"], key), (new["server.pem"], cert)):
                tmp = dest + ".tmp"
                shutil.copy(source, tmp)
                os.replace(tmp, dest)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline and not works_with(new["ca.pem"]):
                time.sleep(0.5)
            self.assertTrue(works_with(new["ca.pem"]), "the new certificate is never served")
            self.assertFalse(works_with(old["ca.pem"]))
            self.assertEqual(server._proc.pid, pid)
            self.assertIsNone(server._proc.poll(), "the server restarted or died")
        finally:
            server.stop()


class TokensTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = temp_dir("textgen_tokens_")
        cls.tokens = write(os.path.join(cls.dir, "tokens"),
                           "# role token\n"
                           "generate gen-secret\n"
                           # sha256 of "dbg-secret": the file need not hold the secret.
                           "debug sha256:"
                           + __import__("hashlib").sha256(b"dbg-secret").hexdigest() + "\n")
        cls.metrics_token = write(os.path.join(cls.dir, "metrics_token"), "scrape-me\n")
        cls.metrics_port = closed_port()
        cls.server = LiveServer(ARGS.server_bin, ARGS.model,
                                f"--auth_tokens_file={cls.tokens}",
                                f"--metrics_port={cls.metrics_port}",
                                f"--metrics_token_file={cls.metrics_token}")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def client(self, token):
        return TextgenClient(self.server.target, token=token, timeout=WAIT)

    def codes(self, token):
        """The status of each RPC (and of a Generate with an attention tap) with token."""
        with self.client(token) as client:
            tap = textgen_pb2.GenerateRequest(
                prompt=textgen_pb2.Prompt(text="ROMEO:"), max_new_tokens=2,
                attention_tap=textgen_pb2.AttentionTap(layers=[0], heads=[0]))
            return {
                "Generate": code_of(lambda: client.generate("ROMEO:", max_new_tokens=2)),
                "Generate+tap": code_of(lambda: client._stub.Generate(
                    tap, timeout=WAIT, metadata=client._metadata)),
                "DebugAttention": code_of(lambda: client.attention("ROMEO:")),
                "GetModelInfo": code_of(client.info),
                "Tokenize": code_of(lambda: client.tokenize("ROMEO:")),
            }

    def assert_codes(self, token, expected):
        for rpc, (code, details) in self.codes(token).items():
            want = expected.get(rpc, OK)
            self.assertEqual(code, want, f"{rpc} with token {token!r}: {details}")

    def test_missing_token_is_unauthenticated_on_every_rpc(self):
        for rpc, (code, details) in self.codes("").items():
            self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED, rpc)
            self.assertIn("Bearer", details)

    def test_wrong_token_is_unauthenticated_on_every_rpc(self):
        for rpc, (code, details) in self.codes("gen-secreT").items():
            self.assertEqual(code, grpc.StatusCode.UNAUTHENTICATED, rpc)
            self.assertIn("unknown token", details)

    def test_generate_token_may_not_do_debug_work(self):
        denied = grpc.StatusCode.PERMISSION_DENIED
        self.assert_codes("gen-secret", {"Generate+tap": denied, "DebugAttention": denied})
        code, details = self.codes("gen-secret")["DebugAttention"]
        self.assertIn("role debug", details)

    def test_debug_token_may_do_everything(self):
        self.assert_codes("dbg-secret", {})

    def test_undecodable_request_is_checked_for_a_token_first(self):
        """Bytes that are no request: UNAUTHENTICATED without a token (an unknown
        caller learns nothing else), INVALID_ARGUMENT naming the type with one."""
        garbled = b"\x0a\x7f\x01"  # Field 1, a length past the end.
        for method, streaming in (("Generate", True), ("DebugAttention", True),
                                  ("GetModelInfo", False), ("Tokenize", False)):
            for token, want in (("", grpc.StatusCode.UNAUTHENTICATED),
                                ("dbg-secret", grpc.StatusCode.INVALID_ARGUMENT)):
                with self.client(token) as client:
                    path = f"/textgen.v1.TextGeneration/{method}"
                    call = (client._channel.unary_stream(path) if streaming
                            else client._channel.unary_unary(path))
                    code, details = code_of(lambda: call(
                        garbled, timeout=WAIT, metadata=client._metadata))
                self.assertEqual(code, want, f"{method} with token {token!r}: {details}")
                if want == grpc.StatusCode.INVALID_ARGUMENT:
                    self.assertIn(f"not a valid textgen.v1.{method}", details)

    def test_health_and_reflection_need_no_token(self):
        with self.client("") as client:
            self.assertEqual(client.health(), "SERVING")
            for version in ("v1alpha", "v1"):
                self.assertEqual(reflection_code(client._channel, version=version), OK, version)

    def test_metrics_need_their_token(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=WAIT)
        self.assertEqual(refused.exception.code, 401)
        request = urllib.request.Request(url, headers={"Authorization": "Bearer scrape-me"})
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            self.assertIn("textgen_requests_total", response.read().decode())
        self.assertIn("metrics on http://127.0.0.1:", self.server.log())


class TokenReloadTest(unittest.TestCase):
    def test_sighup_reloads_the_tokens_file(self):
        tokens = write(os.path.join(temp_dir("textgen_reload_"), "tokens"), "generate first\n")
        server = LiveServer(ARGS.server_bin, ARGS.model, f"--auth_tokens_file={tokens}")
        try:
            def info_code(token):
                with TextgenClient(server.target, token=token, timeout=WAIT) as client:
                    return code_of(client.info)[0]

            self.assertEqual(info_code("first"), OK)
            self.assertEqual(info_code("second"), grpc.StatusCode.UNAUTHENTICATED)
            write(tokens, "generate second\n")
            server._proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline and info_code("second") != OK:
                time.sleep(0.05)
            self.assertEqual(info_code("second"), OK)
            self.assertEqual(info_code("first"), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("tokens reloaded", server.log())
            # A file that does not parse keeps the tokens in force.
            write(tokens, "admin third\n")
            server._proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline and "not reloaded" not in server.log():
                time.sleep(0.05)
            self.assertIn("unknown role 'admin'", server.log())
            self.assertEqual(info_code("second"), OK)
        finally:
            server.stop()


class PerClientLimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens = write(os.path.join(temp_dir("textgen_limits_"), "tokens"),
                           "generate token-a\ngenerate token-b\ngenerate token-c\n")
        cls.server = LiveServer(ARGS.server_bin, ARGS.model, f"--auth_tokens_file={cls.tokens}",
                                "--num_slots=8", "--client_max_streams=2",
                                "--client_rate=1", "--client_burst=4", "--reflection=false")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_client_at_its_limit_is_refused_while_another_is_admitted(self):
        a = TextgenClient(self.server.target, token="token-a", timeout=WAIT,
                          options=held_channel_options())
        held = [a.generate("ROMEO:", max_new_tokens=1000) for _ in range(2)]
        try:
            # Both are admitted (each has sent a token) and stay open, unread.
            for stream in held:
                next(iter(stream._call))
            code, details = code_of(lambda: a.generate("ROMEO:", max_new_tokens=2))
            self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED, details)
            self.assertIn("has 2 streams open", details)
            self.assertIn("--client_max_streams", details)
            with TextgenClient(self.server.target, token="token-b", timeout=WAIT) as b:
                self.assertTrue(b.generate("ROMEO:", max_new_tokens=3).text())
        finally:
            for stream in held:
                stream.cancel()
            a.close()

    def test_request_rate_is_a_token_bucket_per_client(self):
        with TextgenClient(self.server.target, token="token-c", timeout=WAIT) as c:
            codes = [code_of(lambda: c.tokenize("x")) for _ in range(5)]
        self.assertEqual([code for code, _ in codes[:4]], [OK] * 4)
        self.assertEqual(codes[4][0], grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("--client_rate=1", codes[4][1])

    def test_reflection_can_be_switched_off(self):
        with TextgenClient(self.server.target, token="token-b", timeout=WAIT) as client:
            for version in ("v1alpha", "v1"):
                self.assertEqual(reflection_code(client._channel, client._metadata, version),
                                 grpc.StatusCode.UNIMPLEMENTED, version)


if __name__ == "__main__":
    ARGS, argv = parse_args()
    unittest.main(argv=argv, verbosity=2)
