#!/usr/bin/env python3
"""Writes a Hugging Face layout checkpoint (config.json + model.safetensors, or its shards
with model.safetensors.index.json) as a GGUF file.

    /usr/bin/python3 tools/hf_to_gguf.py DIR OUT.gguf --type f32|f16|bf16|q8_0
        [--hf_tokenizer DIR | --gpt2_tokenizer DIR | --llama2c_tokenizer FILE] [--alignment N]
    /usr/bin/python3 tools/hf_to_gguf.py --vocab_only OUT.gguf --hf_tokenizer DIR ...

Families (config.json "model_type") and GGUF names, as llama.cpp's converter writes them:

    llama, qwen2, qwen3:  token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
    (mistral as llama)    ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm, output (absent
                          when tied); biases where the checkpoint has them (qwen2: q/k/v;
                          llama: attention_bias, mlp_bias); qwen3 attn_{q,k}_norm. head_dim is
                          attention.key_length/value_length.
    gpt2:                 token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output,
                          ffn_norm, ffn_up, ffn_down} (weight and bias), output_norm, output
                          (a copy of token_embd; GPT-2's head is tied).

Tensor layout changes (the loader undoes them):
  - llama only: the rows of attn_q / attn_k (weights and biases) are permuted within each head from Hugging
    Face's rotate-half RoPE layout to Meta's interleaved pairs (llama.cpp's `permute`:
    reshape [heads, 2, head_dim / 2, in], swap axes 1 and 2). qwen2/qwen3 are not permuted.
  - gpt2: Conv1D weights ([in, out]) are transposed to [out, in] like every other matrix.
Matrices (2-D tensors) get the chosen --type; 1-D tensors (norms, biases) stay F32, and a
matrix whose rows are not a multiple of 32 values falls back from Q8_0 to F16, as llama.cpp
does. Values are converted from the checkpoint's stored dtype (F32/F16/BF16) exactly, then
rounded once to the output type.

Tokenizer keys (tokenizer.ggml.*), optional:
  --hf_tokenizer DIR       tokenizer.json (+ tokenizer_config.json), byte-level BPE: the keys
                           llama.cpp's converter writes, with its tokenizer.ggml.pre name
                           (gpt-2, llama-bpe, qwen2, smollm, gpt-4o; tools/gguf_vocab.py)
  --gpt2_tokenizer DIR     vocab.json + merges.txt (or encoder.json + vocab.bpe): model "gpt2",
                           pre "gpt-2" (llama.cpp's name; files written before were "gpt2",
                           which textgen still reads), tokens by id, merges, token types
                           (<|endoftext|> is CONTROL), bos = eos = <|endoftext|>.
  --llama2c_tokenizer F    llama2.c's tokenizer.bin: model "llama", tokens (spaces spelled
                           "▁"), scores, token types (0 UNKNOWN, 1-2 CONTROL, <0xXX> BYTE),
                           unk 0, bos 1, eos 2.
  neither                  tokenizer.ggml.model "none" and <arch>.vocab_size, as llama.cpp's
                           converter writes a model without a vocabulary: llama.cpp then loads
                           it with vocab_size placeholder tokens (llama-bench needs nothing
                           more; it feeds random ids), and textgen runs it on token ids.
--vocab_only writes only general.architecture (--arch) and the tokenizer keys, no tensors
(llama.cpp's vocab-only files).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_writer import (GGML_BF16, GGML_F16, GGML_F32, GGML_Q8_0, Q8_0_BLOCK,  # noqa: E402
                         GgufType, GgufWriter)
from gguf_vocab import add_hf_tokenizer  # noqa: E402
from safetensors_io import load_file  # noqa: E402

TYPES = {"f32": GGML_F32, "f16": GGML_F16, "bf16": GGML_BF16, "q8_0": GGML_Q8_0}
# general.file_type (llama_ftype): ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}

# SentencePiece token types (tokenizer.ggml.token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def permute_for_gguf(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Rotate-half rows -> interleaved pairs, per head (llama.cpp's `permute`)."""
    rows = w.shape[0]
    return (w.reshape(heads, 2, rows // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_factors(cfg: dict) -> torch.Tensor:
    """Llama 3.1's rope_scaling as one divisor per rotated pair: rope_freqs.weight, as
    llama.cpp's convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) writes it."""
    scaling = cfg["rope_scaling"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    base = cfg.get("rope_theta", 10000.0)
    factor = scaling.get("factor", 8.0)
    low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
    old_context = scaling.get("original_max_position_embeddings", 8192)
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1.0)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def llama_tensors(cfg: dict, hf: dict[str, torch.Tensor], arch: str):
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    scaling = cfg.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "llama3":
        yield "rope_freqs.weight", llama3_rope_factors(cfg)
    elif rope_type != "default":
        raise SystemExit(f"rope_scaling type {rope_type!r} is not written by this tool")
    yield "token_embd.weight", hf.pop("model.embed_tokens.weight")
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        names = {
            "input_layernorm.weight": "attn_norm.weight",
            "self_attn.q_proj.weight": "attn_q.weight",
            "self_attn.k_proj.weight": "attn_k.weight",
            "self_attn.v_proj.weight": "attn_v.weight",
            "self_attn.o_proj.weight": "attn_output.weight",
            "post_attention_layernorm.weight": "ffn_norm.weight",
            "mlp.gate_proj.weight": "ffn_gate.weight",
            "mlp.up_proj.weight": "ffn_up.weight",
            "mlp.down_proj.weight": "ffn_down.weight",
            "self_attn.q_proj.bias": "attn_q.bias",
            "self_attn.k_proj.bias": "attn_k.bias",
            "self_attn.v_proj.bias": "attn_v.bias",
            "self_attn.o_proj.bias": "attn_output.bias",
            "mlp.gate_proj.bias": "ffn_gate.bias",
            "mlp.up_proj.bias": "ffn_up.bias",
            "mlp.down_proj.bias": "ffn_down.bias",
            "self_attn.q_norm.weight": "attn_q_norm.weight",
            "self_attn.k_norm.weight": "attn_k_norm.weight",
        }
        for hf_name, gguf_name in names.items():
            if p + hf_name not in hf:
                continue
            t = hf.pop(p + hf_name)
            # Weights and biases alike, as llama.cpp's LlamaModel does.
            if arch == "llama" and gguf_name.startswith("attn_q."):
                t = permute_for_gguf(t, heads)
            elif arch == "llama" and gguf_name.startswith("attn_k."):
                t = permute_for_gguf(t, kv_heads)
            yield b + gguf_name, t
    yield "output_norm.weight", hf.pop("model.norm.weight")
    if "lm_head.weight" in hf:
        head = hf.pop("lm_head.weight")
        if not cfg.get("tie_word_embeddings", False):
            yield "output.weight", head


def gpt2_tensors(cfg: dict, hf: dict[str, torch.Tensor]):
    prefix = "transformer." if "transformer.wte.weight" in hf else ""
    get = lambda name: hf.pop(prefix + name)  # noqa: E731
    wte = get("wte.weight")
    yield "token_embd.weight", wte
    if prefix + "wpe.weight" not in hf:
        raise SystemExit("GGUF gpt2 needs learned positions (wpe.weight); this checkpoint "
                         "has sinusoidal ones, which GGUF cannot express")
    yield "position_embd.weight", get("wpe.weight")
    for i in range(cfg["n_layer"]):
        h, b = f"h.{i}.", f"blk.{i}."
        for hf_name, gguf_name, conv in [
                ("ln_1", "attn_norm", False), ("attn.c_attn", "attn_qkv", True),
                ("attn.c_proj", "attn_output", True), ("ln_2", "ffn_norm", False),
                ("mlp.c_fc", "ffn_up", True), ("mlp.c_proj", "ffn_down", True)]:
            w = get(h + hf_name + ".weight")
            yield b + gguf_name + ".weight", w.t().contiguous() if conv else w
            yield b + gguf_name + ".bias", get(h + hf_name + ".bias")
        for buffer in ("attn.bias", "attn.masked_bias"):
            hf.pop(prefix + h + buffer, None)
    yield "output_norm.weight", get("ln_f.weight")
    yield "output_norm.bias", get("ln_f.bias")
    hf.pop("lm_head.weight", None)
    yield "output.weight", wte


def add_model_keys(w: GgufWriter, cfg: dict, arch: str, hf: dict[str, torch.Tensor]) -> None:
    U32 = GgufType.UINT32
    if arch == "gpt2":
        d = cfg["n_embd"]
        w.add("gpt2.context_length", cfg["n_positions"], U32)
        w.add("gpt2.embedding_length", d, U32)
        w.add("gpt2.feed_forward_length", cfg.get("n_inner") or 4 * d, U32)
        w.add("gpt2.block_count", cfg["n_layer"], U32)
        w.add("gpt2.attention.head_count", cfg["n_head"], U32)
        w.add("gpt2.attention.layer_norm_epsilon", float(cfg["layer_norm_epsilon"]))
        return
    d, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or d // heads
    w.add(f"{arch}.context_length", cfg["max_position_embeddings"], U32)
    w.add(f"{arch}.embedding_length", d, U32)
    w.add(f"{arch}.feed_forward_length", cfg["intermediate_size"], U32)
    w.add(f"{arch}.block_count", cfg["num_hidden_layers"], U32)
    w.add(f"{arch}.attention.head_count", heads, U32)
    w.add(f"{arch}.attention.head_count_kv", cfg.get("num_key_value_heads") or heads, U32)
    w.add(f"{arch}.rope.freq_base", float(cfg.get("rope_theta", 10000.0)))
    w.add(f"{arch}.rope.dimension_count", head_dim, U32)
    w.add(f"{arch}.attention.layer_norm_rms_epsilon", float(cfg["rms_norm_eps"]))
    if cfg.get("head_dim"):
        w.add(f"{arch}.attention.key_length", head_dim, U32)
        w.add(f"{arch}.attention.value_length", head_dim, U32)


def gpt2_vocab(directory: str) -> tuple[dict[str, int], list[str]]:
    for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
        v, m = os.path.join(directory, vocab), os.path.join(directory, merges)
        if os.path.exists(v) and os.path.exists(m):
            with open(v, encoding="utf-8") as f:
                ids = json.load(f)
            with open(m, encoding="utf-8") as f:
                lines = [line.rstrip("\n") for line in f]
            return ids, [line for line in lines if line and not line.startswith("#version")]
    raise SystemExit(f"{directory}: no vocab.json + merges.txt or encoder.json + vocab.bpe")


def add_gpt2_tokenizer(w: GgufWriter, directory: str) -> None:
    ids, merges = gpt2_vocab(directory)
    tokens = [""] * len(ids)
    for token, i in ids.items():
        tokens[i] = token
    eot = ids["<|endoftext|>"]
    types = [CONTROL if i == eot else NORMAL for i in range(len(tokens))]
    w.add("tokenizer.ggml.model", "gpt2")
    w.add("tokenizer.ggml.pre", "gpt-2")
    w.add("tokenizer.ggml.tokens", tokens, GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.token_type", types, GgufType.ARRAY, GgufType.INT32)
    w.add("tokenizer.ggml.merges", merges, GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.bos_token_id", eot, GgufType.UINT32)
    w.add("tokenizer.ggml.eos_token_id", eot, GgufType.UINT32)


def add_llama2c_tokenizer(w: GgufWriter, path: str, vocab_size: int) -> None:
    with open(path, "rb") as f:
        raw = f.read()
    pos, tokens, scores = 4, [], []
    while pos < len(raw) and len(tokens) < vocab_size:
        score, length = struct.unpack_from("<fi", raw, pos)
        pos += 8
        piece = raw[pos:pos + length].decode("utf-8")
        pos += length
        tokens.append(piece.replace(" ", "\u2581"))
        scores.append(score)
    types = []
    for i, t in enumerate(tokens):
        if i == 0:
            types.append(UNKNOWN)
        elif i in (1, 2):
            types.append(CONTROL)
        elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.tokens", tokens, GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.scores", scores, GgufType.ARRAY, GgufType.FLOAT32)
    w.add("tokenizer.ggml.token_type", types, GgufType.ARRAY, GgufType.INT32)
    w.add("tokenizer.ggml.unknown_token_id", 0, GgufType.UINT32)
    w.add("tokenizer.ggml.bos_token_id", 1, GgufType.UINT32)
    w.add("tokenizer.ggml.eos_token_id", 2, GgufType.UINT32)


def tensor_type(t: torch.Tensor, requested: int) -> int:
    if t.dim() < 2:
        return GGML_F32
    if requested == GGML_Q8_0 and t.shape[-1] % Q8_0_BLOCK != 0:
        return GGML_F16
    return requested


def load_checkpoint(model_dir: str) -> dict[str, torch.Tensor]:
    """model.safetensors, or every shard model.safetensors.index.json's weight_map names."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single) or not os.path.exists(index):
        return load_file(single)
    with open(index, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        for name, t in load_file(os.path.join(model_dir, shard)).items():
            if weight_map.get(name) != shard:
                raise SystemExit(f"{model_dir}/{shard}: tensor {name} is not mapped to it by "
                                 "model.safetensors.index.json")
            tensors[name] = t
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise SystemExit(f"{model_dir}: tensors in the index but in no shard: {missing[:5]}")
    return tensors


def convert(model_dir: str, out: str, type_name: str, alignment: int,
            gpt2_tokenizer: str | None, llama2c_tokenizer: str | None,
            hf_tokenizer: str | None = None) -> None:
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    # llama.cpp writes Mistral (without a sliding window) as llama.
    arch = "llama" if cfg["model_type"] == "mistral" else cfg["model_type"]
    if cfg["model_type"] == "mistral" and cfg.get("sliding_window"):
        raise SystemExit("mistral with a sliding window: not written by this tool")
    if cfg.get("is_encoder_decoder"):
        # GGUF's gpt2 architecture has no encoder or cross-attention tensors.
        raise SystemExit(f"{model_dir}: an encoder-decoder model has no GGUF form here; "
                         "serve its safetensors directory")
    hf = load_checkpoint(model_dir)
    w = GgufWriter(alignment)
    w.add("general.architecture", arch)
    w.add("general.name", os.path.basename(os.path.normpath(model_dir)))
    if alignment != 32:
        w.add("general.alignment", alignment, GgufType.UINT32)
    w.add("general.file_type", FILE_TYPES[type_name], GgufType.UINT32)
    if type_name == "q8_0":
        w.add("general.quantization_version", 2, GgufType.UINT32)
    add_model_keys(w, cfg, arch, hf)
    vocab_size = cfg["vocab_size"]
    if hf_tokenizer:
        add_hf_tokenizer(w, hf_tokenizer, vocab_size, cfg)
    if gpt2_tokenizer:
        add_gpt2_tokenizer(w, gpt2_tokenizer)
    if llama2c_tokenizer:
        add_llama2c_tokenizer(w, llama2c_tokenizer, vocab_size)
    if not gpt2_tokenizer and not llama2c_tokenizer and not hf_tokenizer:
        # llama.cpp refuses a file without tokenizer.ggml.model; "none" plus the vocabulary
        # size is its own converter's spelling of "no tokenizer" (NoVocab models).
        w.add("tokenizer.ggml.model", "none")
        w.add(f"{arch}.vocab_size", vocab_size, GgufType.UINT32)
    tensors = gpt2_tensors(cfg, hf) if arch == "gpt2" else llama_tensors(cfg, hf, arch)
    for name, t in list(tensors):
        array = t.to(torch.float32).numpy()  # F16/BF16 -> F32 is exact.
        w.add_tensor(name, array, tensor_type(t, TYPES[type_name]))
    leftover = [name for name in hf if not name.endswith("rotary_emb.inv_freq")]
    if leftover:
        raise SystemExit(f"{model_dir}: tensors not converted: {leftover}")
    w.write(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", metavar="[MODEL_DIR] OUT",
                    help="the checkpoint directory (config.json + model.safetensors or "
                         "shards), unless "
                         "--vocab_only, and the .gguf file to write")
    ap.add_argument("--type", choices=sorted(TYPES), default="f32")
    ap.add_argument("--alignment", type=int, default=32)
    ap.add_argument("--hf_tokenizer", help="directory with tokenizer.json (byte-level BPE)")
    ap.add_argument("--gpt2_tokenizer", help="directory with vocab.json + merges.txt")
    ap.add_argument("--llama2c_tokenizer", help="llama2.c tokenizer.bin")
    ap.add_argument("--vocab_only", action="store_true", help="tokenizer keys only")
    ap.add_argument("--arch", default="llama", help="general.architecture with --vocab_only")
    ap.add_argument("--vocab_size", type=int, default=1 << 30,
                    help="records to read from a llama2.c tokenizer with --vocab_only")
    args = ap.parse_args(argv)
    if len(args.paths) != (1 if args.vocab_only else 2):
        ap.error("expected MODEL_DIR OUT, or OUT with --vocab_only")
    if args.vocab_only:
        w = GgufWriter(args.alignment)
        w.add("general.architecture", args.arch)
        if args.hf_tokenizer:
            add_hf_tokenizer(w, args.hf_tokenizer)
        if args.gpt2_tokenizer:
            add_gpt2_tokenizer(w, args.gpt2_tokenizer)
        if args.llama2c_tokenizer:
            add_llama2c_tokenizer(w, args.llama2c_tokenizer, args.vocab_size)
        w.write(args.paths[0])
        return
    if sum(bool(t) for t in (args.hf_tokenizer, args.gpt2_tokenizer,
                             args.llama2c_tokenizer)) > 1:
        ap.error("at most one of --hf_tokenizer, --gpt2_tokenizer, --llama2c_tokenizer")
    convert(args.paths[0], args.paths[1], args.type, args.alignment, args.gpt2_tokenizer,
            args.llama2c_tokenizer, args.hf_tokenizer)


if __name__ == "__main__":
    main()
