#!/usr/bin/env python3
"""Writes the random-weight GGUF models that textgen_quantize is compared with llama-quantize on.

    /usr/bin/python3 tools/make_quantize_test_models.py OUT_DIR

Every byte is a pure function of this file (integer hashing, IEEE float32 arithmetic; no
random generator whose stream could change between numpy versions), so the outputs'
SHA-256s recorded in tests/tools/testdata/quantize_hashes.json
(tools/record_llama_quantize_hashes.py) stay valid on any machine.

Models (shapes chosen to reach llama.cpp's type rules, llama_tensor_get_type):
  llama2_f32.gguf   LLaMA, 2 layers, d_model 320 (not a multiple of 256: the attention
                    matrices and output fall back to Q5_0/Q5_1/Q8_0/IQ4_NL), GQA 5:1,
                    d_ff 1024, untied output, vocab 512
  llama2_f16.gguf,  the same matrices stored F16 / BF16 (norms F32, as converters write
  llama2_bf16.gguf  them): the tool widens them and copies the ones it keeps
  gpt2_f32.gguf     GPT-2, 2 layers, d_model 384 (fallbacks), d_ff 1536, fused attn_qkv,
                    biases, position_embd (never quantized), output.weight a copy of
                    token_embd as llama.cpp's converter writes it
  qwen2_f32.gguf    Qwen2, 12 layers (use_more_bits picks layers 0, 3, 6, 9, 10, 11;
                    blk.10 sorts after blk.9), d_model 256, GQA 4:1, q/k/v biases, tied
                    embeddings (no output.weight: token_embd takes output's type), and
                    metadata the tool must drop or move (split.*, general.file_type,
                    general.quantization_version) plus every GGUF value type
The files are about 45 MB in all and never committed.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_writer import GGML_BF16, GGML_F16, GGML_F32, GgufType, GgufWriter  # noqa: E402

U32 = GgufType.UINT32


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's output function on uint64 arrays (wrapping arithmetic)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniform(h: np.ndarray) -> np.ndarray:
    """[0, 1) in multiples of 2^-24, exact in float32."""
    return (h >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)


def random_tensor(name: str, shape: tuple[int, ...], scale: float, offset: float = 0.0):
    """Normal-like float32 values (a recentred sum of four uniforms), a function of the
    tensor's name and shape only."""
    seed = np.uint64(hash_str(f"{name} {shape}"))
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        idx = np.arange(n, dtype=np.uint64) << np.uint64(3)
        h = _mix(idx ^ seed)
        total = ((_uniform(_mix(h ^ np.uint64(1))) + _uniform(_mix(h ^ np.uint64(2))))
                 + (_uniform(_mix(h ^ np.uint64(3))) + _uniform(_mix(h ^ np.uint64(4)))))
    normal = (total - np.float32(2)) * np.float32(1.7320508)
    return (normal * np.float32(scale) + np.float32(offset)).astype(np.float32).reshape(shape)


def hash_str(s: str) -> int:
    """FNV-1a 64 of a string (Python's hash() is salted per process)."""
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def add_vocab(w: GgufWriter, vocab: int, pre: str) -> None:
    tokens = [f"<t{i}>" for i in range(vocab - 1)] + ["<|endoftext|>"]
    w.add("tokenizer.ggml.model", "gpt2")
    w.add("tokenizer.ggml.pre", pre)
    w.add("tokenizer.ggml.tokens", tokens, GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.token_type", [1] * (vocab - 1) + [3], GgufType.ARRAY, GgufType.INT32)
    w.add("tokenizer.ggml.merges", [f"<t{i}> <t{i + 1}>" for i in range(0, 40, 2)],
          GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.bos_token_id", vocab - 1, U32)
    w.add("tokenizer.ggml.eos_token_id", vocab - 1, U32)


def decoder_keys(w: GgufWriter, arch: str, d: int, ff: int, layers: int, heads: int,
                 kv_heads: int, ctx: int) -> None:
    w.add(f"{arch}.context_length", ctx, U32)
    w.add(f"{arch}.embedding_length", d, U32)
    w.add(f"{arch}.feed_forward_length", ff, U32)
    w.add(f"{arch}.block_count", layers, U32)
    w.add(f"{arch}.attention.head_count", heads, U32)
    w.add(f"{arch}.attention.head_count_kv", kv_heads, U32)
    w.add(f"{arch}.rope.freq_base", 10000.0)
    w.add(f"{arch}.rope.dimension_count", d // heads, U32)
    w.add(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)


def llama2(matrix_type: int) -> GgufWriter:
    d, ff, layers, heads, kv_heads, vocab = 320, 1024, 2, 5, 1, 512
    kv = d // heads * kv_heads
    w = GgufWriter()
    w.add("general.architecture", "llama")
    w.add("general.name", "textgen quantize test llama2")
    w.add("general.file_type", {GGML_F32: 0, GGML_F16: 1, GGML_BF16: 32}[matrix_type], U32)
    decoder_keys(w, "llama", d, ff, layers, heads, kv_heads, 256)
    w.add("llama.vocab_size", vocab, U32)
    add_vocab(w, vocab, "llama-bpe")
    w.add_tensor("token_embd.weight", random_tensor("token_embd.weight", (vocab, d), 0.02),
                 matrix_type)
    for i in range(layers):
        p = f"blk.{i}."
        for name, shape in [("attn_q", (d, d)), ("attn_k", (kv, d)), ("attn_v", (kv, d)),
                            ("attn_output", (d, d)), ("ffn_gate", (ff, d)),
                            ("ffn_up", (ff, d)), ("ffn_down", (d, ff))]:
            full = p + name + ".weight"
            w.add_tensor(full, random_tensor(full, shape, 0.02), matrix_type)
        for norm in ("attn_norm", "ffn_norm"):
            full = p + norm + ".weight"
            w.add_tensor(full, random_tensor(full, (d,), 0.1, 1.0))
    w.add_tensor("output_norm.weight", random_tensor("output_norm.weight", (d,), 0.1, 1.0))
    w.add_tensor("output.weight", random_tensor("output.weight", (vocab, d), 0.02), matrix_type)
    return w


def gpt2() -> GgufWriter:
    d, ff, layers, heads, vocab, ctx = 384, 1536, 2, 6, 320, 128
    w = GgufWriter()
    w.add("general.architecture", "gpt2")
    w.add("general.name", "textgen quantize test gpt2")
    w.add("general.quantization_version", 2, U32)  # Moved to the end by the tool.
    w.add("gpt2.context_length", ctx, U32)
    w.add("gpt2.embedding_length", d, U32)
    w.add("gpt2.feed_forward_length", ff, U32)
    w.add("gpt2.block_count", layers, U32)
    w.add("gpt2.attention.head_count", heads, U32)
    w.add("gpt2.attention.layer_norm_epsilon", 1e-5)
    w.add("general.file_type", 0, U32)
    add_vocab(w, vocab, "gpt-2")
    embd = random_tensor("token_embd.weight", (vocab, d), 0.02)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("position_embd.weight", random_tensor("position_embd.weight", (ctx, d), 0.01))
    for i in range(layers):
        p = f"blk.{i}."
        for name, shape in [("attn_qkv", (3 * d, d)), ("attn_output", (d, d)),
                            ("ffn_up", (ff, d)), ("ffn_down", (d, ff))]:
            w.add_tensor(p + name + ".weight", random_tensor(p + name + ".weight", shape, 0.02))
            w.add_tensor(p + name + ".bias", random_tensor(p + name + ".bias", shape[:1], 0.02))
        for norm in ("attn_norm", "ffn_norm"):
            w.add_tensor(p + norm + ".weight", random_tensor(p + norm + ".weight", (d,), 0.1, 1))
            w.add_tensor(p + norm + ".bias", random_tensor(p + norm + ".bias", (d,), 0.02))
    w.add_tensor("output_norm.weight", random_tensor("output_norm.weight", (d,), 0.1, 1.0))
    w.add_tensor("output_norm.bias", random_tensor("output_norm.bias", (d,), 0.02))
    w.add_tensor("output.weight", embd)
    return w


def qwen2() -> GgufWriter:
    d, ff, layers, heads, kv_heads, vocab = 256, 512, 12, 4, 1, 384
    kv = d // heads * kv_heads
    w = GgufWriter()
    w.add("general.architecture", "qwen2")
    w.add("split.no", 0, GgufType.UINT16)  # llama-quantize drops split.*.
    w.add("general.name", "textgen quantize test qwen2")
    w.add("general.alignment", 32, U32)
    w.add("general.file_type", 0, U32)
    w.add("split.count", 1, GgufType.UINT16)
    w.add("split.tensors.count", 0, GgufType.INT32)
    decoder_keys(w, "qwen2", d, ff, layers, heads, kv_heads, 512)
    add_vocab(w, vocab, "qwen2")
    # One key of every other GGUF value type, copied as they are.
    w.add("textgen.test.u8", 200, GgufType.UINT8)
    w.add("textgen.test.i8", -100, GgufType.INT8)
    w.add("textgen.test.i16", -30000, GgufType.INT16)
    w.add("textgen.test.i64", -(1 << 40), GgufType.INT64)
    w.add("textgen.test.u64", 1 << 60, GgufType.UINT64)
    w.add("textgen.test.f64", 0.1, GgufType.FLOAT64)
    w.add("textgen.test.flag", True)
    w.add("textgen.test.flags", [True, False, True], GgufType.ARRAY, GgufType.BOOL)
    w.add("textgen.test.f32s", [0.5, -1.25, 3e-8], GgufType.ARRAY, GgufType.FLOAT32)
    w.add("textgen.test.empty", [], GgufType.ARRAY, GgufType.STRING)
    w.add_tensor("token_embd.weight", random_tensor("token_embd.weight", (vocab, d), 0.02))
    for i in range(layers):
        p = f"blk.{i}."
        for name, shape in [("attn_q", (d, d)), ("attn_k", (kv, d)), ("attn_v", (kv, d)),
                            ("attn_output", (d, d)), ("ffn_gate", (ff, d)),
                            ("ffn_up", (ff, d)), ("ffn_down", (d, ff))]:
            w.add_tensor(p + name + ".weight", random_tensor(p + name + ".weight", shape, 0.02))
            if name in ("attn_q", "attn_k", "attn_v"):
                w.add_tensor(p + name + ".bias",
                             random_tensor(p + name + ".bias", shape[:1], 0.02))
        for norm in ("attn_norm", "ffn_norm"):
            w.add_tensor(p + norm + ".weight", random_tensor(p + norm + ".weight", (d,), 0.1, 1))
    w.add_tensor("output_norm.weight", random_tensor("output_norm.weight", (d,), 0.1, 1.0))
    return w


MODELS = {
    "llama2_f32": lambda: llama2(GGML_F32),
    "llama2_f16": lambda: llama2(GGML_F16),
    "llama2_bf16": lambda: llama2(GGML_BF16),
    "gpt2_f32": gpt2,
    "qwen2_f32": qwen2,
}


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    os.makedirs(argv[0], exist_ok=True)
    for name, make in MODELS.items():
        make().write(os.path.join(argv[0], f"{name}.gguf"))
    print(f"wrote {len(MODELS)} models to {argv[0]}")


if __name__ == "__main__":
    main(sys.argv[1:])
