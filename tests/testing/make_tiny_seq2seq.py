#!/usr/bin/env python3
"""Writes a tiny encoder-decoder checkpoint with random weights, for the API's tests.

    make_tiny_seq2seq.py OUT_DIR

OUT_DIR gets config.json, model.safetensors and char_vocab.json in the format of
model/config.h and model/weights.h (encoder-decoder models): a gpt2 config with
is_encoder_decoder, 3 encoder blocks and 2 decoder blocks (different depths, so that
the layer filters of DebugAttention are seen to apply to each stack), 2 heads of width 8,
sinusoidal positions, a tied head; a character vocabulary of 97 characters ("\\n", the
printable ASCII and "é") followed by the control tokens <s> (id 97) and </s> (id 98).

The weights are random (seeded: the same bytes every run) and large enough that the
attention maps are far from uniform, so tests that compare maps or tokens see real
differences. Nothing here is trained: tests must not rely on what it generates, only on
the server computing what the model computes.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_io import save_file  # noqa: E402

ENCODER_LAYERS = 3
DECODER_LAYERS = 2
C, H, I = 16, 2, 32
CHARS = ["\n"] + [chr(c) for c in range(ord(" "), ord("~") + 1)] + ["\u00e9"]
CONTROL = ["<s>", "</s>"]
V = len(CHARS) + len(CONTROL)
N_POSITIONS = 64


def block(prefix, g, tensors, cross):
    def lin(name, n_in, n_out, scale=0.3):
        tensors[f"{prefix}{name}.weight"] = torch.randn(n_in, n_out, generator=g) * scale
        tensors[f"{prefix}{name}.bias"] = torch.randn(n_out, generator=g) * 0.1

    def norm(name):
        tensors[f"{prefix}{name}.weight"] = 1 + torch.randn(C, generator=g) * 0.1
        tensors[f"{prefix}{name}.bias"] = torch.randn(C, generator=g) * 0.1

    norm("ln_1")
    lin("attn.c_attn", C, 3 * C, scale=0.6)
    lin("attn.c_proj", C, C)
    if cross:
        norm("ln_cross_attn")
        lin("crossattention.q_attn", C, C, scale=0.6)
        lin("crossattention.c_attn", C, 2 * C, scale=0.6)
        lin("crossattention.c_proj", C, C)
    norm("ln_2")
    lin("mlp.c_fc", C, I)
    lin("mlp.c_proj", I, C)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(20)
    tensors = {"wte.weight": torch.randn(V, C, generator=g)}
    for i in range(ENCODER_LAYERS):
        block(f"encoder.h.{i}.", g, tensors, cross=False)
    tensors["encoder.ln_f.weight"] = torch.ones(C)
    tensors["encoder.ln_f.bias"] = torch.zeros(C)
    for i in range(DECODER_LAYERS):
        block(f"h.{i}.", g, tensors, cross=True)
    tensors["ln_f.weight"] = torch.ones(C)
    tensors["ln_f.bias"] = torch.zeros(C)
    save_file({k: v.float().contiguous() for k, v in tensors.items()},
              os.path.join(out, "model.safetensors"))
    config = {
        "model_type": "gpt2", "is_encoder_decoder": True, "add_cross_attention": True,
        "encoder_layers": ENCODER_LAYERS, "n_layer": DECODER_LAYERS,
        "vocab_size": V, "n_positions": N_POSITIONS, "n_embd": C, "n_head": H, "n_inner": I,
        "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
        "position_embedding_type": "sinusoidal", "tie_word_embeddings": True,
        "bos_token_id": len(CHARS), "eos_token_id": len(CHARS) + 1,
        "decoder_start_token_id": len(CHARS),
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "char_vocab.json"), "w", encoding="utf-8") as f:
        json.dump({"type": "char", "chars": CHARS, "control_tokens": CONTROL,
                   "bos_token": "<s>", "eos_token": "</s>"}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
