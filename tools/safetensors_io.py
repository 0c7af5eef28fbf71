#!/usr/bin/env python3
"""A small, dependency-free reader and writer for the safetensors format.

The `safetensors` package is not available here, so this module implements the format
directly (https://github.com/huggingface/safetensors, "Format"):

    bytes [0, 8)          N, the header length: unsigned 64-bit little-endian
    bytes [8, 8 + N)      the header: UTF-8 JSON object
                              {"__metadata__": {str: str},          (optional)
                               "<name>": {"dtype": "F32",
                                          "shape": [d0, d1, ...],
                                          "data_offsets": [begin, end]},
                               ...}
                          padded at the end with spaces (0x20) so that N % 8 == 0
    bytes [8 + N, EOF)    the data section: each tensor's elements in C (row-major) order,
                          little-endian; `data_offsets` are relative to the start of this
                          section.

The writer lays tensors out back to back in the order the dict gives them (which is also
the header order), so the data section has no holes and no trailing bytes.  The reader
checks exactly that, plus that every byte range matches its dtype and shape.  Output is a
pure function of the inputs (no timestamps, a fixed JSON layout), so writing the same
tensors twice gives byte-identical files.

Supported dtypes: F64, F32, F16, BF16, I64, I32.  numpy has no bfloat16, so BF16 travels
as its raw 16-bit patterns: `t.to(torch.bfloat16).view(torch.int16)`.

Usage:
    from safetensors_io import save_file, load_file, load_metadata
    save_file({"w": torch.randn(3, 4)}, "x.safetensors", metadata={"note": "hi"})
    tensors = load_file("x.safetensors")          # {"w": tensor [3, 4] float32}

Running this file directly performs a round-trip self-test.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, little-endian numpy dtype used for the bytes).
# BF16 is stored through int16 because numpy cannot represent bfloat16.
_DTYPES: dict[str, tuple[torch.dtype, str]] = {
    "F64": (torch.float64, "<f8"),
    "F32": (torch.float32, "<f4"),
    "F16": (torch.float16, "<f2"),
    "BF16": (torch.bfloat16, "<i2"),
    "I64": (torch.int64, "<i8"),
    "I32": (torch.int32, "<i4"),
}
_NAME_OF_TORCH_DTYPE = {torch_dtype: name for name, (torch_dtype, _) in _DTYPES.items()}

# The reference implementation refuses headers above 100 MB; so do we.
_MAX_HEADER_BYTES = 100 * 1024 * 1024


def _tensor_bytes(t: torch.Tensor) -> bytes:
    """The tensor's elements in row-major order as little-endian bytes."""
    t = t.detach().cpu().contiguous()
    np_dtype = _DTYPES[_NAME_OF_TORCH_DTYPE[t.dtype]][1]
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # Same 16 bits; numpy can handle int16.
    return t.numpy().astype(np_dtype, copy=False).tobytes(order="C")


def save_file(tensors: dict[str, torch.Tensor], path: str | os.PathLike,
              metadata: dict[str, str] | None = None) -> None:
    """Writes `tensors` (name -> tensor) to `path` in the safetensors format.

    Tensors are laid out in dict order.  `metadata`, if given, becomes the header's
    "__metadata__" object (string keys and values only, as the format requires).  The file
    is written to a temporary name and renamed, so a crash never leaves a half file.
    """
    header: dict[str, object] = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata must map str to str, got {k!r}: {v!r}")
        # First, like the reference writer does; JSON object order is not significant.
        header["__metadata__"] = dict(metadata)

    blobs: list[bytes] = []
    offset = 0
    for name, t in tensors.items():
        if name == "__metadata__":
            raise ValueError("'__metadata__' is reserved and cannot name a tensor")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensor '{name}' is a {type(t).__name__}, not a torch.Tensor")
        if t.dtype not in _NAME_OF_TORCH_DTYPE:
            raise ValueError(f"tensor '{name}': unsupported dtype {t.dtype} "
                             f"(supported: {', '.join(_DTYPES)})")
        data = _tensor_bytes(t)
        header[name] = {
            "dtype": _NAME_OF_TORCH_DTYPE[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)

    # Compact JSON, key order as inserted: deterministic bytes.  Pad with spaces so the
    # data section starts 8-byte aligned (relative to the file start).
    header_bytes = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)

    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)


def _read_header(raw: bytes, path: str) -> tuple[dict, int]:
    """Parses the length prefix and JSON header; returns (header, data section start)."""
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too short for the header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > _MAX_HEADER_BYTES:
        raise ValueError(f"{path}: header length {n} exceeds the 100 MB limit")
    if n > len(raw) - 8:
        raise ValueError(f"{path}: truncated: header length {n}, only {len(raw) - 8} bytes follow")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return header, 8 + n


def load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """Returns the header's "__metadata__" object ({} when absent)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    header, _ = _read_header(raw, path)
    return dict(header.get("__metadata__", {}))


def load_file(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Reads a safetensors file into {name: tensor}, in header order, in the stored dtype.

    Validates the file strictly: known dtypes, non-negative integer shapes, byte ranges that
    match dtype x shape, and ranges that exactly tile the data section (no overlap, no hole,
    no trailing bytes).  Raises ValueError naming the file and tensor on any problem.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    header, data_start = _read_header(raw, path)
    data = memoryview(raw)[data_start:]

    out: dict[str, torch.Tensor] = {}
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in info.items()):
                raise ValueError(f"{path}: __metadata__ must be an object of strings")
            continue
        where = f"{path}: tensor '{name}'"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"{where}: entry must have exactly dtype, shape, data_offsets")
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{where}: unsupported dtype {info['dtype']!r}")
        torch_dtype, np_dtype = _DTYPES[info["dtype"]]
        shape = info["shape"]
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError(f"{where}: bad shape {shape!r}")
        offsets = info["data_offsets"]
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0
                            for o in offsets)):
            raise ValueError(f"{where}: bad data_offsets {offsets!r}")
        begin, end = offsets
        needed = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        if end < begin or end - begin != needed:
            raise ValueError(f"{where}: data_offsets {offsets} hold {end - begin} bytes, "
                             f"shape {shape} of {info['dtype']} needs {needed}")
        if end > len(data):
            raise ValueError(f"{where}: truncated: data ends at {end}, section has {len(data)}")
        spans.append((begin, end, name))

        # Copy out of the file buffer so the tensor owns writable memory.
        arr = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape)
        t = torch.from_numpy(arr.astype(np_dtype[1:], copy=True))  # native byte order
        out[name] = t.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else t

    # The byte ranges must tile the data section exactly.
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            kind = "overlaps the previous tensor" if begin < pos else f"leaves a hole at {pos}"
            raise ValueError(f"{path}: tensor '{name}' at [{begin}, {end}) {kind}")
        pos = end
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} trailing bytes after the last tensor")
    return out


def _self_test() -> None:
    """Round-trips every dtype, odd shapes and metadata through a temporary file."""
    import tempfile

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, generator=g, dtype=torch.float64)
    tensors = {
        "f64": x,
        "f32": x.float(),
        "f16": x.half(),
        "bf16": x.to(torch.bfloat16),
        "i64": torch.tensor([-(2 ** 40), 0, 7], dtype=torch.int64),
        "i32": torch.arange(-6, 6, dtype=torch.int32).reshape(2, 3, 2),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 4),
        "strided": x.T,  # Non-contiguous: must be written in row-major order of x.T.
    }
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        save_file(tensors, p, metadata={"k": "v"})
        raw = open(p, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        assert n % 8 == 0 and raw[8] == ord("{"), "header must be padded JSON"
        back = load_file(p)
        assert list(back) == list(tensors), "header order must be preserved"
        for name, t in tensors.items():
            assert back[name].dtype == t.dtype and back[name].shape == t.shape, name
            assert torch.equal(back[name], t), name
        assert load_metadata(p) == {"k": "v"}
        # BF16 bit patterns: 1.0 is 0x3F80, stored little-endian as 80 3F.
        save_file({"one": torch.ones(1, dtype=torch.bfloat16)}, p)
        assert open(p, "rb").read()[-2:] == b"\x80\x3f"
        save_file(tensors, p + "2", metadata={"k": "v"})
        assert open(p + "2", "rb").read() == raw, "writing must be deterministic"
    print("safetensors_io self-test: OK")


if __name__ == "__main__":
    _self_test()
