#!/usr/bin/env python3
"""Writes the checked-in seed corpora, fuzz/corpus/<target>/ (small, deterministic).

Seeds are valid or nearly valid inputs that reach deep into each parser; the fuzzer
mutates from there. Rerun after changing it: python3 fuzz/make_seed_corpus.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> a whole file."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def f32(n, start=0.0):
    return struct.pack(f"<{n}f", *[start + 0.01 * i for i in range(n)])


for target in ["safetensors_fuzz", "config_fuzz", "tokenizer_char_fuzz",
               "tokenizer_gpt2_bpe_fuzz", "tokenizer_sentencepiece_fuzz"]:
    shutil.rmtree(os.path.join(HERE, "corpus", target), ignore_errors=True)

# safetensors_fuzz: the fuzz target's small GPT-2 (vocab 4, positions 4, width 4, one layer,
# d_ff 8) whole, in F32 and with F16/BF16 tensors; edge cases around it.
C, I, V, T = 4, 8, 4, 4
gpt2 = [("wte.weight", "F32", [V, C], f32(V * C)),
        ("wpe.weight", "F32", [T, C], f32(T * C)),
        ("h.0.ln_1.weight", "F32", [C], f32(C, 1)),
        ("h.0.ln_1.bias", "F32", [C], f32(C)),
        ("h.0.attn.c_attn.weight", "F32", [C, 3 * C], f32(C * 3 * C)),
        ("h.0.attn.c_attn.bias", "F32", [3 * C], f32(3 * C)),
        ("h.0.attn.c_proj.weight", "F32", [C, C], f32(C * C)),
        ("h.0.attn.c_proj.bias", "F32", [C], f32(C)),
        ("h.0.ln_2.weight", "F32", [C], f32(C, 1)),
        ("h.0.ln_2.bias", "F32", [C], f32(C)),
        ("h.0.mlp.c_fc.weight", "F32", [C, I], f32(C * I)),
        ("h.0.mlp.c_fc.bias", "F32", [I], f32(I)),
        ("h.0.mlp.c_proj.weight", "F32", [I, C], f32(I * C)),
        ("h.0.mlp.c_proj.bias", "F32", [C], f32(C)),
        ("ln_f.weight", "F32", [C], f32(C, 1)),
        ("ln_f.bias", "F32", [C], f32(C))]
write("safetensors_fuzz", "gpt2_small_f32", safetensors(gpt2, {"format": "pt"}))
half = [(n, "F16", s, struct.pack(f"<{len(r) // 4}e", *struct.unpack(f"<{len(r) // 4}f", r)))
        for n, _, s, r in gpt2]
write("safetensors_fuzz", "gpt2_small_f16", safetensors(half))
write("safetensors_fuzz", "every_dtype", safetensors([
    ("f64", "F64", [2], struct.pack("<2d", 1.5, -2)),
    ("bf16", "BF16", [2], b"\x80\x3f\x00\xc0"),
    ("i64", "I64", [1], struct.pack("<q", -7)),
    ("i32", "I32", [2], struct.pack("<2i", 1, 2)),
    ("i16", "I16", [1], struct.pack("<h", 3)),
    ("i8", "I8", [1], b"\xff"), ("u8", "U8", [1], b"\x07"),
    ("bool", "BOOL", [1], b"\x01")]))
write("safetensors_fuzz", "zero_elements", safetensors([
    ("empty", "F32", [0], b""), ("none", "F16", [3, 0], b""), ("x", "F32", [1], f32(1))]))
write("safetensors_fuzz", "no_tensors", safetensors([]))
write("safetensors_fuzz", "nan_weight", safetensors(
    [(n, d, s, (struct.pack("<f", float("nan")) + r[4:]) if n == "wte.weight" else r)
     for n, d, s, r in gpt2]))

# config_fuzz: the shipped model's and the golden configs, and the keys each family reads.
for name, path in [("shakespeare_char", "models/shakespeare-char/config.json"),
                   ("gpt2_learned", "tests/golden/gpt2_learned/config.json"),
                   ("gpt2_sinusoidal", "tests/golden/gpt2_sinusoidal/config.json"),
                   ("llama_gqa", "tests/golden/llama_gqa/config.json"),
                   ("llama_tied_mha", "tests/golden/llama_tied_mha/config.json")]:
    with open(os.path.join(ROOT, path), "rb") as f:
        write("config_fuzz", name, f.read())
write("config_fuzz", "llama_all_keys", json.dumps({
    "model_type": "llama", "vocab_size": 32, "max_position_embeddings": 16,
    "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "tie_word_embeddings": True, "hidden_act": "silu"}))
write("config_fuzz", "huge_context", json.dumps({
    "model_type": "gpt2", "vocab_size": 65, "n_positions": 10000000, "n_embd": 192,
    "n_layer": 6, "n_head": 4, "position_embedding_type": "sinusoidal"}))

# Tokenizers: first byte even = text to encode, odd = little-endian 16-bit ids to decode.
texts = {
    "ascii": b"First Citizen:\nBefore we proceed any further, hear me speak.\n",
    "words": b" the hello  world's 1234 aaaa\r\n\ttabs",
    "utf8": "h\u00e9 \u4e2d\u6587 \U0001F600 caf\u00e9 \u00df".encode(),
    "invalid_utf8": b"ab\xff\xc3(\xe4\xb8 \xf0\x9f\x98",
    "empty": b"",
}
for target in ["tokenizer_char_fuzz", "tokenizer_gpt2_bpe_fuzz",
               "tokenizer_sentencepiece_fuzz"]:
    for name, text in texts.items():
        write(target, "encode_" + name, b"\x00" + text)
    write(target, "decode_small_ids", b"\x01" + struct.pack("<8H", 0, 1, 2, 3, 10, 20, 40, 60))
    write(target, "decode_bytes", b"\x01" + struct.pack(
        "<8H", 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3, 0xE4, 0xB8, 0xAD, 260))
    write(target, "decode_out_of_range", b"\x01" + struct.pack("<4H", 5, 65535, 300, 0))
