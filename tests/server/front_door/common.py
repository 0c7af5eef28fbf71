"""Shared by the front door tests: certificates, token files, servers and raw calls.

Certificates come from tests/testing/make_test_certs.sh (the openssl command) into a temporary
directory that is removed at exit; servers are tests/client/live_server.py's LiveServer
(a textgen_server on a free loopback port, stopped at exit).
"""

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "tests", "client"))
sys.path.insert(0, os.path.join(REPO, "client", "python"))
from live_server import LiveServer, closed_port  # noqa: E402,F401

import grpc  # noqa: E402
from textgen_client import TextgenClient, health_pb2, textgen_pb2  # noqa: E402,F401

MAKE_CERTS = os.path.join(REPO, "tests", "testing", "make_test_certs.sh")


def parse_args():
    """--server_bin, --model, --cli, --time_scale; the rest goes to unittest."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--server_bin", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--cli", help="the textgen command line (build/client/textgen)")
    parser.add_argument("--time_scale", type=float, default=1.0,
                        help="how much slower than a Release build the server runs "
                             "(a sanitizer build: 3); scales durations sized for speed")
    args, rest = parser.parse_known_args()
    return args, [sys.argv[0]] + rest


def temp_dir(prefix):
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def make_certs(out_dir, ca_name="textgen-test-ca"):
    """ca.pem, server.pem/.key (localhost, 127.0.0.1), client.pem/.key in out_dir."""
    subprocess.run([MAKE_CERTS, out_dir, ca_name], check=True, capture_output=True)
    return {name: os.path.join(out_dir, name) for name in
            ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key")}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def code_of(call):
    """The grpc.StatusCode a call ends with (OK if it raises nothing)."""
    try:
        result = call()
        if hasattr(result, "__iter__") and not isinstance(result, (str, bytes)):
            for _ in result:
                pass
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


def reflection_code(channel, metadata=(), version="v1alpha"):
    """What grpc.reflection.<version>'s list_services answers, from raw bytes (grpcio ships
    no reflection stubs): OK with a reply, or the error code."""
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=None, response_deserializer=None)
    try:
        replies = list(call(iter([b"\x3a\x01*"]), timeout=30, metadata=metadata))
        return grpc.StatusCode.OK if replies else grpc.StatusCode.UNKNOWN
    except grpc.RpcError as e:
        return e.code()
