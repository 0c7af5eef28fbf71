#!/usr/bin/env python3
"""A small writer for the GGUF format (version 3), written from the specification.

Specification: ggml's docs/gguf.md (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
Everything is little-endian:

    uint32 magic "GGUF", uint32 version (3), uint64 tensor_count, uint64 metadata_kv_count
    metadata_kv_count times:  string key, uint32 value_type, value
    tensor_count times:       string name, uint32 n_dims, uint64 dims[n_dims] (fastest first),
                              uint32 ggml_type, uint64 offset (relative to the data section)
    zero padding to a multiple of ALIGNMENT (general.alignment, default 32)
    the data section: each tensor's bytes at its offset, every tensor padded to ALIGNMENT

A string is a uint64 byte length and the UTF-8 bytes; an array is a uint32 element type,
a uint64 count and the elements. Dimensions are ggml's `ne`, innermost first: a PyTorch
tensor of shape [rows, cols] is written with dims [cols, rows] and the same row-major
bytes. Tensors are written in the order they were added, back to back (each at the padded
end of the one before, the layout llama.cpp's reader requires), and the file ends with the
last tensor's padding, so the output is a pure function of the inputs.

Tensor types: F32, F16, BF16 and Q8_0 (blocks of 32 values: a float16 scale d = max|x| /
127, then 32 int8 q = round(x / d), rounding half away from zero; x ~ q * d), quantized
as ggml's reference `quantize_row_q8_0_ref` does, in float32.

Usage:
    w = GgufWriter()
    w.add("general.architecture", "llama")              # str, bool, int, float or list
    w.add("llama.block_count", 2, GgufType.UINT32)      # an explicit type for numbers
    w.add_tensor("token_embd.weight", array, GGML_Q8_0)
    w.write("model.gguf")

Running this file directly performs a self-test.
"""

from __future__ import annotations

import enum
import os
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32


class GgufType(enum.IntEnum):
    """gguf_metadata_value_type."""
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_SCALAR_FORMATS = {
    GgufType.UINT8: "<B", GgufType.INT8: "<b", GgufType.UINT16: "<H", GgufType.INT16: "<h",
    GgufType.UINT32: "<I", GgufType.INT32: "<i", GgufType.FLOAT32: "<f", GgufType.BOOL: "<?",
    GgufType.UINT64: "<Q", GgufType.INT64: "<q", GgufType.FLOAT64: "<d",
}

# ggml_type values of the tensor types written here.
GGML_F32 = 0
GGML_F16 = 1
GGML_Q8_0 = 8
GGML_BF16 = 30
GGML_TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0", GGML_BF16: "BF16"}
Q8_0_BLOCK = 32


def _string(text: str | bytes) -> bytes:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _default_type(value) -> GgufType:
    if isinstance(value, bool):
        return GgufType.BOOL
    if isinstance(value, int):
        return GgufType.UINT32 if value >= 0 else GgufType.INT32
    if isinstance(value, float):
        return GgufType.FLOAT32
    if isinstance(value, (str, bytes)):
        return GgufType.STRING
    if isinstance(value, (list, tuple)):
        return GgufType.ARRAY
    raise TypeError(f"no GGUF type for {type(value).__name__}")


def _value(value, value_type: GgufType, element_type: GgufType | None) -> bytes:
    if value_type == GgufType.STRING:
        return _string(value)
    if value_type == GgufType.ARRAY:
        if element_type is None:
            element_type = _default_type(value[0]) if value else GgufType.UINT32
        parts = [struct.pack("<IQ", element_type, len(value))]
        if element_type in _SCALAR_FORMATS and element_type != GgufType.BOOL:
            fmt = _SCALAR_FORMATS[element_type]
            parts.append(np.asarray(value, dtype=np.dtype(fmt)).tobytes())
        else:
            parts.extend(_value(v, element_type, None) for v in value)
        return b"".join(parts)
    return struct.pack(_SCALAR_FORMATS[value_type], value)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounding to nearest even (as torch does)."""
    bits = np.ascontiguousarray(x, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2")


def quantize_q8_0(x: np.ndarray) -> bytes:
    """ggml's Q8_0 blocks of a float array whose last dimension is a multiple of 32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % Q8_0_BLOCK != 0:
        raise ValueError(f"Q8_0 needs rows of a multiple of 32 values, got {x.shape[-1]}")
    blocks = x.reshape(-1, Q8_0_BLOCK)
    amax = np.max(np.abs(blocks), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.zeros_like(d)
    nonzero = d != 0
    inv[nonzero] = np.float32(1) / d[nonzero]
    scaled = (blocks * inv[:, None]).astype(np.float32)
    q = (np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))).astype(np.int8)
    out = np.empty(len(blocks), dtype=[("d", "<f2"), ("qs", "i1", (Q8_0_BLOCK,))])
    out["d"] = d.astype("<f2")
    out["qs"] = q
    return out.tobytes()


def dequantize_q8_0(raw: bytes, count: int) -> np.ndarray:
    blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "i1", (Q8_0_BLOCK,))])
    values = blocks["qs"].astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return values.reshape(-1)[:count]


def tensor_bytes(array: np.ndarray, ggml_type: int) -> bytes:
    """The bytes of `array` (any float dtype) stored as `ggml_type`."""
    a = np.ascontiguousarray(array, dtype=np.float32)
    if ggml_type == GGML_F32:
        return a.astype("<f4").tobytes()
    if ggml_type == GGML_F16:
        return a.astype("<f2").tobytes()
    if ggml_type == GGML_BF16:
        return f32_to_bf16_bits(a).tobytes()
    if ggml_type == GGML_Q8_0:
        return quantize_q8_0(a)
    raise ValueError(f"unsupported ggml type {ggml_type}")


class GgufWriter:
    def __init__(self, alignment: int = DEFAULT_ALIGNMENT):
        self.alignment = alignment
        self._kv: list[bytes] = []
        self._keys: set[str] = set()
        self._tensors: list[tuple[str, tuple[int, ...], int, bytes]] = []

    def add(self, key: str, value, value_type: GgufType | None = None,
            element_type: GgufType | None = None) -> None:
        """Adds a metadata key; the type defaults from the Python value (int -> UINT32)."""
        if key in self._keys:
            raise ValueError(f"duplicate key {key}")
        self._keys.add(key)
        if value_type is None:
            value_type = _default_type(value)
        self._kv.append(_string(key) + struct.pack("<I", value_type) +
                        _value(value, value_type, element_type))

    def add_tensor(self, name: str, array: np.ndarray, ggml_type: int = GGML_F32) -> None:
        """Adds a tensor of PyTorch shape array.shape (written as reversed dims)."""
        dims = tuple(int(d) for d in reversed(array.shape))
        self._tensors.append((name, dims, ggml_type, tensor_bytes(array, ggml_type)))

    def _pad(self, n: int) -> int:
        return (self.alignment - n % self.alignment) % self.alignment

    def to_bytes(self) -> bytes:
        out = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self._tensors), len(self._kv))]
        out.extend(self._kv)
        offset = 0
        for name, dims, ggml_type, data in self._tensors:
            out.append(_string(name) + struct.pack("<I", len(dims)) +
                       struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ggml_type, offset))
            offset += len(data) + self._pad(len(data))
        head = b"".join(out)
        parts = [head, b"\0" * self._pad(len(head))]
        for _, _, _, data in self._tensors:
            parts.append(data)
            parts.append(b"\0" * self._pad(len(data)))
        return b"".join(parts)

    def write(self, path: str | os.PathLike) -> None:
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(self.to_bytes())
        os.replace(tmp, path)


def _self_test() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    back = dequantize_q8_0(quantize_q8_0(x), x.size).reshape(x.shape)
    step = np.abs(x).reshape(-1, 32).max(axis=1) / 127
    assert np.all(np.abs(back - x).reshape(-1, 32) <= step[:, None] * 0.5 * 1.01 + 1e-7)
    assert f32_to_bf16_bits(np.array([1.0], np.float32))[0] == 0x3F80
    w = GgufWriter()
    w.add("general.architecture", "llama")
    w.add("a.list", ["x", "yz"])
    w.add_tensor("t", x, GGML_F16)
    raw = w.to_bytes()
    assert raw[:4] == b"GGUF" and len(raw) % 32 == 0
    print("gguf_writer self-test passed")


if __name__ == "__main__":
    _self_test()
