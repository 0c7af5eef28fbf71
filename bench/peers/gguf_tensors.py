#!/usr/bin/env python3
"""A GGUF file's tensor table, and the bytes a batch-1 decode step reads from it.

    /usr/bin/python3 bench/peers/gguf_tensors.py FILE.gguf...

prints, per file, the tensor types it holds (how many tensors of each) and the bytes a decode
step reads: every tensor's bytes, except that only one row of a lookup table is read per
token, so the token embedding is left out when the file has a separate `output.weight`
(when it has none the table is the tied LM head and is read whole) and GPT-2's
`position_embd.weight` is always left out. That is the memory-bandwidth bound's numerator
(bench/README.md, "bandwidth bound"): tokens/s <= read bandwidth / these bytes. KV-cache
reads are not counted (a few MB at the contexts timed here).

Only the header is read (GGUF v2/v3: magic, version, counts, key/values, tensor infos);
sizes follow ggml's block layouts (ggml/src/ggml.c's type_traits: elements per block, bytes
per block).
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass

# ggml_type -> (name, elements per block, bytes per block).
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136), 30: ("BF16", 1, 2),
}

# GGUF metadata value types with a fixed size (struct format).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass
class Tensor:
    name: str
    shape: list[int]
    type_name: str
    nbytes: int


class _Reader:
    def __init__(self, f):
        self.f = f

    def read(self, fmt: str):
        size = struct.calcsize(fmt)
        data = self.f.read(size)
        if len(data) != size:
            raise ValueError("truncated GGUF header")
        return struct.unpack(fmt, data)[0]

    def string(self) -> bytes:
        return self.f.read(self.read("<Q"))

    def skip_value(self, value_type: int) -> None:
        if value_type in _SCALARS:
            self.f.seek(struct.calcsize(_SCALARS[value_type]), 1)
        elif value_type == _STRING:
            self.f.seek(self.read("<Q"), 1)
        elif value_type == _ARRAY:
            element, count = self.read("<I"), self.read("<Q")
            if element in _SCALARS:
                self.f.seek(count * struct.calcsize(_SCALARS[element]), 1)
            else:
                for _ in range(count):
                    self.skip_value(element)
        else:
            raise ValueError(f"unknown GGUF value type {value_type}")


def read_tensors(path: str) -> list[Tensor]:
    """The tensor table of the GGUF file at `path`."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = r.read("<I")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version}")
        n_tensors, n_kv = r.read("<Q"), r.read("<Q")
        for _ in range(n_kv):
            r.string()
            r.skip_value(r.read("<I"))
        tensors = []
        for _ in range(n_tensors):
            name = r.string().decode("utf-8")
            shape = [r.read("<Q") for _ in range(r.read("<I"))]
            ggml_type = r.read("<I")
            r.read("<Q")  # offset
            if ggml_type not in GGML_TYPES:
                raise ValueError(f"{path}: tensor {name}: unknown ggml type {ggml_type}")
            type_name, block, block_bytes = GGML_TYPES[ggml_type]
            count = 1
            for d in shape:
                count *= d
            tensors.append(Tensor(name, shape, type_name, count // block * block_bytes))
        return tensors


def decode_bytes(tensors: list[Tensor]) -> int:
    """Bytes a batch-1 decode step reads (see the module docstring)."""
    names = {t.name for t in tensors}
    skip = {"position_embd.weight"}
    if "output.weight" in names:
        skip.add("token_embd.weight")
    return sum(t.nbytes for t in tensors if t.name not in skip)


def type_summary(tensors: list[Tensor], matrices_only: bool = True) -> str:
    """e.g. "Q4_K 133, Q6_K 13, Q5_0 24": tensor types by count (2-D tensors only)."""
    counts: dict[str, int] = {}
    for t in tensors:
        if not matrices_only or len(t.shape) >= 2:
            counts[t.type_name] = counts.get(t.type_name, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def main(argv: list[str]) -> int:
    for path in argv:
        tensors = read_tensors(path)
        print(f"{path}: {len(tensors)} tensors; matrices: {type_summary(tensors)}; "
              f"decode reads {decode_bytes(tensors) / 1e6:.1f} MB per token")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
