"""textgen's generated Python stubs (textgen.v1 and grpc.health.v1), found for the client
modules: on sys.path (PYTHONPATH), else in $TEXTGEN_PY_STUBS, else in build/client/python of
this repository (the build's target textgen_python_stubs writes them there)."""

import os
import pathlib
import sys

_REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_STUBS = _REPO / "build" / "client" / "python"


def _import_stubs():
    try:
        from textgen.v1 import textgen_pb2, textgen_pb2_grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:
        stubs = os.environ.get("TEXTGEN_PY_STUBS", str(DEFAULT_STUBS))
        if not pathlib.Path(stubs, "textgen", "v1", "textgen_pb2.py").is_file():
            raise ImportError(
                f"textgen's Python stubs are not in {stubs}: build them with "
                "`cmake --build build --target textgen_python_stubs`, or put "
                "their directory on PYTHONPATH") from None
        sys.path.insert(0, stubs)
        from textgen.v1 import textgen_pb2, textgen_pb2_grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    return textgen_pb2, textgen_pb2_grpc, health_pb2, health_pb2_grpc


textgen_pb2, textgen_pb2_grpc, health_pb2, health_pb2_grpc = _import_stubs()
