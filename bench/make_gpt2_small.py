#!/usr/bin/env python3
"""Writes a GPT-2-small-shaped checkpoint with random weights, for benchmarks.

    /usr/bin/python3 bench/make_gpt2_small.py [--dtype f32|bf16] [--seed 0] [--out DIR]

The result is a directory the decoder loads like any Hugging Face GPT-2 checkpoint:

    config.json          GPT-2 small: 12 layers, 12 heads, n_embd 768, n_positions 1024,
                         vocab 50257, learned positions, tied LM head
    model.safetensors    124,439,808 parameters (≈ 498 MB F32, ≈ 249 MB BF16)

Weights are N(0, 0.02) (GPT-2's initialisation), biases 0, LayerNorm gains 1 and shifts 0,
so activations keep a sane scale through the 12 blocks and timings are those of real
arithmetic (no denormals, no NaNs). The weights carry no meaning: benchmarks feed token ids,
so no tokenizer is written.

Deterministic: the same --seed and --dtype give byte-identical files. Each tensor is drawn
from its own generator seeded by (seed, tensor index), so the bytes do not depend on the
order of generation. The file is written tensor by tensor (streaming: one tensor in memory
at a time) in the layout tools/safetensors_io.py writes and reads: a little-endian u64
header length, compact JSON padded with spaces to 8 bytes, tensors back to back. BF16 is
rounded to nearest even from the F32 draw. `--verify` reads the result back through
tools/safetensors_io.py (needs torch; slow for the F32 file).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

N_LAYER = 12
N_HEAD = 12
N_EMBD = 768
N_POSITIONS = 1024
VOCAB = 50257
N_INNER = 4 * N_EMBD
INIT_STD = 0.02


def config(dtype: str) -> dict:
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": VOCAB,
        "n_positions": N_POSITIONS,
        "n_ctx": N_POSITIONS,
        "n_embd": N_EMBD,
        "n_layer": N_LAYER,
        "n_head": N_HEAD,
        "n_inner": None,
        "layer_norm_epsilon": 1e-05,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
        "position_embedding_type": "learned",
        "torch_dtype": "float32" if dtype == "f32" else "bfloat16",
    }


def tensor_specs() -> list[tuple[str, list[int], str]]:
    """(name, shape, init) in file order; init is 'normal', 'zeros' or 'ones'."""
    C, I = N_EMBD, N_INNER
    specs = [("wte.weight", [VOCAB, C], "normal"),
             ("wpe.weight", [N_POSITIONS, C], "normal")]
    for i in range(N_LAYER):
        h = f"h.{i}."
        specs += [
            (h + "ln_1.weight", [C], "ones"),
            (h + "ln_1.bias", [C], "zeros"),
            (h + "attn.c_attn.weight", [C, 3 * C], "normal"),  # Conv1D: [in, out]
            (h + "attn.c_attn.bias", [3 * C], "zeros"),
            (h + "attn.c_proj.weight", [C, C], "normal"),
            (h + "attn.c_proj.bias", [C], "zeros"),
            (h + "ln_2.weight", [C], "ones"),
            (h + "ln_2.bias", [C], "zeros"),
            (h + "mlp.c_fc.weight", [C, I], "normal"),
            (h + "mlp.c_fc.bias", [I], "zeros"),
            (h + "mlp.c_proj.weight", [I, C], "normal"),
            (h + "mlp.c_proj.bias", [C], "zeros"),
        ]
    specs += [("ln_f.weight", [C], "ones"), ("ln_f.bias", [C], "zeros")]
    return specs


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """F32 -> BF16 bit patterns (uint16), round to nearest even (no NaNs occur here)."""
    bits = x.astype("<f4").view("<u4")
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype("<u2")


def tensor_bytes(index: int, shape: list[int], init: str, seed: int, dtype: str) -> bytes:
    n = int(np.prod(shape))
    if init == "normal":
        rng = np.random.default_rng([seed, index])
        x = rng.standard_normal(n, dtype=np.float32) * np.float32(INIT_STD)
    elif init == "ones":
        x = np.ones(n, dtype=np.float32)
    else:
        x = np.zeros(n, dtype=np.float32)
    if dtype == "bf16":
        return to_bf16_bits(x).tobytes()
    return x.astype("<f4").tobytes()


def write(out_dir: str, dtype: str, seed: int) -> str:
    os.makedirs(out_dir, exist_ok=True)
    specs = tensor_specs()
    itemsize = 4 if dtype == "f32" else 2
    st_dtype = "F32" if dtype == "f32" else "BF16"

    header: dict[str, object] = {
        "__metadata__": {"format": "pt", "generator": "bench/make_gpt2_small.py",
                         "seed": str(seed)}}
    offset = 0
    for name, shape, _ in specs:
        size = int(np.prod(shape)) * itemsize
        header[name] = {"dtype": st_dtype, "shape": shape,
                        "data_offsets": [offset, offset + size]}
        offset += size
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)

    path = os.path.join(out_dir, "model.safetensors")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for index, (name, shape, init) in enumerate(specs):
            data = tensor_bytes(index, shape, init, seed, dtype)
            assert len(data) == header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            f.write(data)
    os.replace(tmp, path)  # Never leave a half file under the real name.

    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config(dtype), f, indent=2)
        f.write("\n")
    n_params = sum(int(np.prod(s)) for _, s, _ in specs)
    print(f"wrote {out_dir}: {n_params} parameters, {dtype}, "
          f"{os.path.getsize(path) / 2**20:.1f} MiB", file=sys.stderr)
    return path


def verify(path: str) -> None:
    sys.path.insert(0, os.path.join(REPO, "tools"))
    from safetensors_io import load_file  # noqa: E402 (needs torch)

    tensors = load_file(path)
    names = [n for n, _, _ in tensor_specs()]
    assert list(tensors) == names, "tensor names or order differ"
    w = tensors["h.0.mlp.c_fc.weight"].float()
    std = float(w.std())
    assert abs(std - INIT_STD) < 1e-3, f"unexpected std {std}"
    print(f"verified {path}: {len(tensors)} tensors, c_fc std {std:.5f}", file=sys.stderr)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None,
                   help="output directory (default build/bench-models/gpt2-small[-bf16])")
    p.add_argument("--verify", action="store_true",
                   help="read the file back through tools/safetensors_io.py")
    args = p.parse_args()
    out = args.out or os.path.join(
        REPO, "build", "bench-models", "gpt2-small" + ("-bf16" if args.dtype == "bf16" else ""))
    path = write(out, args.dtype, args.seed)
    if args.verify:
        verify(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
