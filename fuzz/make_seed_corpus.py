#!/usr/bin/env python3
"""Writes the checked-in seed corpora, fuzz/corpus/<target>/ (small, deterministic).

Seeds are valid or nearly valid inputs that reach deep into each parser; the fuzzer
mutates from there. Rerun after changing it: /usr/bin/python3 fuzz/make_seed_corpus.py
(numpy, for tools/gguf_writer.py, which writes the GGUF seeds)
"""
import json
import os
import struct
import sys

import numpy as np

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


# The seeds are written over what is there, not into emptied folders: inputs that fuzzing
# found (a crash turned regression test, e.g. gguf_fuzz/uint64_above_int64_max,
# request_fuzz/conversation_without_a_template) live beside them and must stay.

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


# gguf_fuzz: tiny models of each architecture the checkpoint loader reads, with their
# tokenizers, every metadata type and every tensor type, written by tools/gguf_writer.py.
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gguf_writer import GGML_BF16, GGML_F16, GGML_F32, GGML_Q8_0, GgufType, GgufWriter  # noqa: E402


def gpt2_spelling(raw):
    """GPT-2's byte-to-unicode spelling of the bytes `raw` (vocab.json's, GGUF's)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return "".join(table[b] for b in raw)


def weights(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def tiny_llama(arch="llama", ggml_type=GGML_F32, tokenizer="llama"):
    """vocab 40, width 32 (one Q8_0 block per row), 2 heads, 1 layer, d_ff 32."""
    C, V, F, H = 32, 40, 32, 2
    w = GgufWriter()
    w.add("general.architecture", arch)
    w.add(f"{arch}.context_length", 16)
    w.add(f"{arch}.embedding_length", C)
    w.add(f"{arch}.block_count", 1)
    w.add(f"{arch}.feed_forward_length", F)
    w.add(f"{arch}.attention.head_count", H)
    w.add(f"{arch}.attention.head_count_kv", 1)
    w.add(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add(f"{arch}.rope.freq_base", 10000.0)
    w.add(f"{arch}.rope.dimension_count", C // H)
    if tokenizer == "llama":
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(32)]
        tokens += ["\u2581", "\u2581t", "he", "\u2581the", "ll"]
        w.add("tokenizer.ggml.model", "llama")
        w.add("tokenizer.ggml.tokens", tokens)
        w.add("tokenizer.ggml.scores", [float(-i) for i in range(V)], element_type=GgufType.FLOAT32)
        w.add("tokenizer.ggml.token_type", [2, 3, 3] + [6] * 32 + [1] * 5,
              element_type=GgufType.INT32)
        w.add("tokenizer.ggml.bos_token_id", 1)
        w.add("tokenizer.ggml.eos_token_id", 2)
        w.add("tokenizer.ggml.unknown_token_id", 0)
    elif tokenizer == "gpt2":
        tokens = [gpt2_spelling(bytes([b])) for b in range(32, 32 + V - 2)]
        tokens += [gpt2_spelling(b"he"), "<|endoftext|>"]
        w.add("tokenizer.ggml.model", "gpt2")
        w.add("tokenizer.ggml.pre", "llama-bpe")
        w.add("tokenizer.ggml.tokens", tokens)
        w.add("tokenizer.ggml.merges", ["h e"])
        w.add("tokenizer.ggml.token_type", [1] * (V - 1) + [3], element_type=GgufType.INT32)
        w.add("tokenizer.ggml.eos_token_id", V - 1)
    H_size = C // H
    shapes = [("token_embd.weight", (V, C)), ("blk.0.attn_norm.weight", (C,)),
              ("blk.0.attn_q.weight", (C, C)), ("blk.0.attn_k.weight", (H_size, C)),
              ("blk.0.attn_v.weight", (H_size, C)), ("blk.0.attn_output.weight", (C, C)),
              ("blk.0.ffn_norm.weight", (C,)), ("blk.0.ffn_gate.weight", (F, C)),
              ("blk.0.ffn_up.weight", (F, C)), ("blk.0.ffn_down.weight", (C, F)),
              ("output_norm.weight", (C,))]
    if arch == "qwen2":
        shapes += [("blk.0.attn_q.bias", (C,)), ("blk.0.attn_k.bias", (H_size,)),
                   ("blk.0.attn_v.bias", (H_size,))]
    for i, (name, shape) in enumerate(shapes):
        w.add_tensor(name, weights(shape, i), ggml_type if len(shape) == 2 else GGML_F32)
    return w.to_bytes()


def tiny_gpt2():
    C, V, T, F = 32, 40, 8, 64
    w = GgufWriter()
    w.add("general.architecture", "gpt2")
    w.add("gpt2.context_length", T)
    w.add("gpt2.embedding_length", C)
    w.add("gpt2.block_count", 1)
    w.add("gpt2.feed_forward_length", F)
    w.add("gpt2.attention.head_count", 2)
    w.add("gpt2.attention.layer_norm_epsilon", 1e-5)
    for i, (name, shape) in enumerate([
            ("token_embd.weight", (V, C)), ("position_embd.weight", (T, C)),
            ("blk.0.attn_norm.weight", (C,)), ("blk.0.attn_norm.bias", (C,)),
            ("blk.0.attn_qkv.weight", (3 * C, C)), ("blk.0.attn_qkv.bias", (3 * C,)),
            ("blk.0.attn_output.weight", (C, C)), ("blk.0.attn_output.bias", (C,)),
            ("blk.0.ffn_norm.weight", (C,)), ("blk.0.ffn_norm.bias", (C,)),
            ("blk.0.ffn_up.weight", (F, C)), ("blk.0.ffn_up.bias", (F,)),
            ("blk.0.ffn_down.weight", (C, F)), ("blk.0.ffn_down.bias", (C,)),
            ("output_norm.weight", (C,)), ("output_norm.bias", (C,))]):
        w.add_tensor(name, weights(shape, i))
    return w.to_bytes()


write("gguf_fuzz", "llama_f32_spm", tiny_llama())
write("gguf_fuzz", "llama_q8_0", tiny_llama(ggml_type=GGML_Q8_0, tokenizer=None))
write("gguf_fuzz", "qwen2_f16_bpe", tiny_llama("qwen2", GGML_F16, "gpt2"))
write("gguf_fuzz", "llama_bf16", tiny_llama(ggml_type=GGML_BF16, tokenizer=None))
write("gguf_fuzz", "gpt2_f32", tiny_gpt2())
every = GgufWriter(alignment=8)
every.add("general.alignment", 8)
for t in [GgufType.UINT8, GgufType.INT8, GgufType.UINT16, GgufType.INT16, GgufType.UINT32,
          GgufType.INT32, GgufType.UINT64, GgufType.INT64]:
    every.add(f"v.{t.name.lower()}", 1, t)
every.add("v.float32", 1.5, GgufType.FLOAT32)
every.add("v.float64", -2.5, GgufType.FLOAT64)
every.add("v.bool", True)
every.add("v.string", "h\u00e9")
every.add("v.ints", [1, -2, 3], element_type=GgufType.INT64)
every.add("v.floats", [0.5, 1.5], element_type=GgufType.FLOAT64)
every.add("v.bools", [True, False], element_type=GgufType.BOOL)
every.add("v.strings", ["a", "", "bc"])
every.add("v.nested", [[1, 2], [3]], element_type=GgufType.ARRAY)
every.add_tensor("t", weights((2, 3), 0))
write("gguf_fuzz", "every_value_type", every.to_bytes())
write("gguf_fuzz", "empty", GgufWriter().to_bytes())

# tokenizer_hf_json_fuzz: the input's first byte picks the tokenizer (see the target); two
# fixed tokenizer.json files, fuzz/tokenizer_hf_json/*.json, and seeds for each plus seeds that
# carry a tokenizer.json of their own (the fuzzer mutates the JSON, then a NUL, then the text).
hf_dir = os.path.join(HERE, "tokenizer_hf_json")
os.makedirs(hf_dir, exist_ok=True)
byte_vocab = {gpt2_spelling(bytes([b])): b for b in range(256)}
byte_merges = [("h", "e"), (" ", "t"), (" t", "he"), ("l", "l"), ("\xf0", "\x9f"), ("\xe4", "\xb8"),
               ("1", "2"), (" ", " "), ("'", "s")]
merges_spelled = []
for a, b in byte_merges:
    a_raw, b_raw = [x.encode("latin-1") for x in (a, b)]
    merged = gpt2_spelling(a_raw + b_raw)
    byte_vocab.setdefault(merged, len(byte_vocab))
    merges_spelled.append(f"{gpt2_spelling(a_raw)} {gpt2_spelling(b_raw)}")
n = len(byte_vocab)
byte_level = {
    "version": "1.0",
    "added_tokens": [
        {"id": n, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True},
        {"id": n + 1, "content": " <user>", "single_word": False, "lstrip": True,
         "rstrip": True, "normalized": True, "special": False}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                      "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [n],
                                                            "tokens": ["<|endoftext|>"]}}},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
              "byte_fallback": False, "ignore_merges": False, "vocab": byte_vocab,
              "merges": merges_spelled}}
m = "\u2581"
spm_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    spm_vocab[f"<0x{b:02X}>"] = len(spm_vocab)
for piece in [m, "t", "h", "e", "l", "o", "a", "b", "\u00e9", "\u4e2d", m + "t", "he", m + "the", "ll",
              "ab", m + m]:
    spm_vocab[piece] = len(spm_vocab)
sentencepiece = {
    "version": "1.0",
    "added_tokens": [
        {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
    "normalizer": None,
    "pre_tokenizer": {"type": "Metaspace", "replacement": m, "prepend_scheme": "first",
                      "split": False},
    "post_processor": None,
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": m}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True,
              "byte_fallback": True, "ignore_merges": False, "vocab": spm_vocab,
              "merges": [[m, "t"], ["h", "e"], [m + "t", "he"], ["l", "l"], ["a", "b"], [m, m]]}}
fixed = {"byte_level": byte_level, "sentencepiece": sentencepiece}
for name, j in fixed.items():
    write(os.path.join("..", "tokenizer_hf_json"), name + ".json",
          json.dumps(j, ensure_ascii=False, indent=1) + "\n")
for selector, name in enumerate(fixed):
    for text_name, text in texts.items():
        write("tokenizer_hf_json_fuzz", f"{name}_encode_{text_name}",
              bytes([selector, 0]) + text)
    write("tokenizer_hf_json_fuzz", f"{name}_encode_added",
          bytes([selector, 0]) + b"a <user> b<|endoftext|><s>x</s>")
    write("tokenizer_hf_json_fuzz", f"{name}_decode_ids",
          bytes([selector, 1]) + struct.pack("<10H", 0, 1, 2, 3, 0xF0 + 3, 0x9F + 3, 0x98 + 3,
                                             0x80 + 3, 260, 280))
    write("tokenizer_hf_json_fuzz", f"{name}_decode_out_of_range",
          bytes([selector, 1]) + struct.pack("<4H", 5, 65535, 300, 0))
    small = json.dumps(fixed[name], ensure_ascii=False, separators=(",", ":")).encode()
    write("tokenizer_hf_json_fuzz", f"own_{name}_encode",
          bytes([2]) + small + b"\0\0" + texts["utf8"])
    write("tokenizer_hf_json_fuzz", f"own_{name}_decode",
          bytes([2]) + small + b"\0\1" + struct.pack("<6H", 3, 4, 5, 260, 270, 1))

# request_fuzz: the first byte picks the route (0 completions, 1 attention, 2 tokenize JSON,
# 3 a serialized GenerateRequest, 4 chat completions); one valid request for each.
write("request_fuzz", "completion", b"\x00" + json.dumps({
    "model": "shakespeare-char", "prompt": "ROMEO:", "max_tokens": 5, "temperature": 0.8,
    "top_p": 0.9, "stop": ["\n"], "seed": 1, "logprobs": 2, "echo": True, "stream": True,
    "stream_options": {"include_usage": True}, "top_k": 4,
    "repetition_penalty": 1.1}, separators=(",", ":")).encode())
write("request_fuzz", "completion_ids", b"\x00" + json.dumps({
    "prompt": [1, 2, 3], "max_tokens": 2, "attention_tap": {"layers": [0], "heads": [1]}},
    separators=(",", ":")).encode())
write("request_fuzz", "attention", b"\x01" + json.dumps({
    "prompt": "ROMEO:", "layers": [0, 1], "heads": [], "encoding": "u8"},
    separators=(",", ":")).encode())
write("request_fuzz", "tokenize", b"\x02" + b'{"prompt":"But soft"}')
write("request_fuzz", "chat", b"\x04" + json.dumps({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function",
                      "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "2"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "n": 2, "max_completion_tokens": 4, "logprobs": True, "top_logprobs": 2,
    "chat_template_kwargs": {"enable_thinking": False}, "stream": True},
    separators=(",", ":")).encode())
# GenerateRequest{prompt{text "ROMEO:"} max_new_tokens 5 sampling{temperature 0.8 top_k 3
# seed 7} stop "\n"}, as protoc serializes it.
write("request_fuzz", "generate_proto",
      b"\x03" + bytes.fromhex("0a080a06524f4d454f3a10051a090dcdcc4c3f1003280722010a"))
write("request_fuzz", "completion_constraint", b"\x00" + json.dumps({
    "prompt": "ROMEO:", "max_tokens": 4, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {
            "type": "object", "properties": {"a": {"type": "integer"}}}}}},
    separators=(",", ":")).encode())
write("request_fuzz", "chat_guided_choice", b"\x04" + json.dumps({
    "messages": [{"role": "user", "content": "yes?"}], "guided_choice": ["yes", "no"]},
    separators=(",", ":")).encode())

# constraint_fuzz: the first byte picks the kind (0 GBNF, 1 JSON Schema, 2 regex).
write("constraint_fuzz", "gbnf_simple", b"\x00" + b'root ::= "a" [b-d]* ("x" | "y"){1,3}')
write("constraint_fuzz", "gbnf_json", b"\x00" + rb'''root ::= obj
obj ::= "{" (str ":" val ("," str ":" val)*)? "}"
val ::= obj | str | [0-9]+ | "\u00e9"
str ::= "\"" [^"\\]* "\""
''')
write("constraint_fuzz", "schema_object", b"\x01" + json.dumps({
    "type": "object", "properties": {
        "a": {"type": "integer", "minimum": 3, "maximum": 120},
        "b": {"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 3},
        "c": {"enum": ["x", 1, None]}, "d": {"type": "number", "minimum": 0}},
    "required": ["a"]}).encode())
write("constraint_fuzz", "schema_recursive", b"\x01" + json.dumps({
    "$defs": {"n": {"type": "object", "properties": {
        "v": {"type": "string", "pattern": "^[a-z]{2,4}$", "maxLength": 4},
        "next": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}}},
    "$ref": "#/$defs/n"}).encode())
write("constraint_fuzz", "regex_phone", b"\x02" + rb"^\d{3}-[A-Z]{2}(x|yz)*\.?$")
write("constraint_fuzz", "regex_alt", b"\x02" + rb"([a-z]+@[a-z]+\.(com|org)|\u00e9{2,})")
