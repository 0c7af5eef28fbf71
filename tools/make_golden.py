#!/usr/bin/env python3
"""Writes the golden test data for the C++ decoder's parity tests (tests/model/parity_test.cc).

For each config below this creates `<out>/<name>/` with
    config.json         Hugging Face config keys (plus our `position_embedding_type`)
    model.safetensors   random weights, HF tensor names, in the config's storage dtype
    golden.safetensors  input_ids  I64 [64]          random token ids in [0, V)
                        logits     F32 [64, V]       reference logits
                        prompt_logprobs F32 [63]     log P(token t + 1 | tokens ..t)
                        attn.{l}   F32 [H, 64, 64]   attention probabilities of layer l
                        __metadata__                 generator, torch version, seed, ...

The reference (tools/reference_model.py) runs in float64 on the weights *as stored*: the
script writes model.safetensors first, reads it back and runs the reference on what it
read, so rounding to F16/BF16 is part of the model rather than an error the C++ side
would be blamed for.  Results are cast to float32 only at the end.

Random weights are scaled so that the test has teeth: query/key projections are large
enough that attention is sharp (mean max-probability per row well above the ~0.07 of
uniform causal attention over 64 tokens), so a wrong mask, scale, RoPE layout or head
mapping shows up as a large difference; norm weights are 1 + noise and biases are small
but nonzero, so a dropped bias or a swapped norm parameter is visible too.

Encoder–decoder configs (SEQ2SEQ_CONFIGS, the reference is tools/seq2seq_model.py) write
the same three files; golden.safetensors then holds a padded batch of B = 3 sources and
targets of different lengths (pad id 0):
                        source_ids      I64 [B, S]        source_lengths I64 [B]
                        target_ids      I64 [B, T]        target_lengths I64 [B]
                                        (target_ids[b, 0] is the decoder start token)
                        logits          F32 [B, T, V]
                        enc_attn.{l}    F32 [B, H, S, S]  encoder self-attention, layer l
                        dec_attn.{l}    F32 [B, H, T, T]  decoder self-attention (causal)
                        cross_attn.{l}  F32 [B, H, T, S]  decoder -> source attention
Rows past a sequence's length (padded queries) are 0 in every tensor; columns past the
source length (padded keys) are 0 because the softmax gives them weight exactly 0.

Everything is deterministic (fixed seeds, one thread, fixed JSON layout): running the
script twice gives byte-identical files.

Usage:
    /usr/bin/python3 tools/make_golden.py [--out tests/golden]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model as ref  # noqa: E402
import seq2seq_model as s2s  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

T = 64  # Prompt length of every golden case (tests/model/parity_test.cc expects 64).

STORAGE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
TORCH_DTYPE_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}

# name -> (seed, storage dtype, HF config).  Seeds are fixed integers (never hash(), which
# is randomized per process).
CONFIGS: dict[str, tuple[int, str, dict]] = {
    "gpt2_learned": (1001, "F32", {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": 97,
        "n_positions": 128,
        "n_embd": 64,
        "n_layer": 3,
        "n_head": 4,
        "n_inner": None,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
        "position_embedding_type": "learned",
    }),
    "gpt2_sinusoidal": (1002, "F16", {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": 80,
        "n_positions": 128,
        "n_embd": 64,
        "n_layer": 2,
        "n_head": 8,
        "n_inner": 192,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
        "position_embedding_type": "sinusoidal",
    }),
    "llama_gqa": (1003, "BF16", {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 101,
        "hidden_size": 64,
        "intermediate_size": 172,
        "num_hidden_layers": 3,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    }),
    "llama_tied_mha": (1004, "F32", {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 67,
        "hidden_size": 48,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 96,
        "rms_norm_eps": 1e-6,
        "rope_theta": 500.0,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
    }),
    # Llama 3 as published (θ 500000, "llama3" rope_scaling, GQA, tied like Llama 3.2),
    # scaled down; original_max_position_embeddings 32 puts the 8 rotary pairs in all
    # three bands of the scaling (kept, blended, divided by factor).
    "llama3_scaled": (1005, "BF16", {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 89,
        "hidden_size": 64,
        "intermediate_size": 160,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32, "rope_type": "llama3"},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
    }),
    # LLaMA's optional biases (attention_bias: q/k/v/o; mlp_bias: gate/up/down) and an
    # explicit head_dim that is not hidden_size / heads (4 x 16 = 64 != 48).
    "llama_bias_head_dim": (1006, "F32", {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 71,
        "hidden_size": 48,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "max_position_embeddings": 96,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "attention_bias": True,
        "mlp_bias": True,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    }),
    # Qwen2 (Qwen2.5 shape, scaled down): q/k/v biases, no o_proj bias, tied head.
    "qwen2_bias": (1007, "F32", {
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 83,
        "hidden_size": 48,
        "intermediate_size": 136,
        "num_hidden_layers": 2,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "use_sliding_window": False,
        "sliding_window": 128,
        "max_window_layers": 2,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
    }),
    # Qwen3: per-head q/k RMSNorm before RoPE, explicit head_dim (4 x 16 = 64 != 48),
    # separate head.
    "qwen3_qk_norm": (1008, "BF16", {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": 79,
        "hidden_size": 48,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": 2,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    }),
    # Mistral without a sliding window (the only kind served), F16.
    "mistral_no_window": (1009, "F16", {
        "model_type": "mistral",
        "architectures": ["MistralForCausalLM"],
        "vocab_size": 61,
        "hidden_size": 64,
        "intermediate_size": 112,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    }),
}

# Encoder–decoder (model/weights.h): name -> (seed, storage dtype, config, source lengths,
# target lengths).  Three sequences of different lengths so padding is exercised both
# ways (the longest source is not the longest target).
SEQ2SEQ_CONFIGS: dict[str, tuple[int, str, dict, list[int], list[int]]] = {
    "seq2seq_sinusoidal": (1201, "F32", {
        "model_type": "gpt2",
        "architectures": ["GPT2EncoderDecoder"],
        "is_encoder_decoder": True,
        "add_cross_attention": True,
        "encoder_layers": 2,
        "n_layer": 2,
        "vocab_size": 70,
        "n_positions": 64,
        "n_embd": 64,
        "n_head": 4,
        "n_inner": 160,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
        "position_embedding_type": "sinusoidal",
        "tie_word_embeddings": True,
        "bos_token_id": 68,
        "eos_token_id": 69,
        "decoder_start_token_id": 68,
    }, [23, 40, 9], [17, 30, 12]),
    # Learned tables for both stacks (wpe, encoder.wpe), more encoder than decoder
    # layers, 8 heads of 8, BF16 storage.
    "seq2seq_learned": (1202, "BF16", {
        "model_type": "gpt2",
        "architectures": ["GPT2EncoderDecoder"],
        "is_encoder_decoder": True,
        "add_cross_attention": True,
        "encoder_layers": 3,
        "n_layer": 1,
        "vocab_size": 53,
        "n_positions": 48,
        "n_embd": 64,
        "n_head": 8,
        "n_inner": 128,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
        "position_embedding_type": "learned",
        "tie_word_embeddings": True,
        "bos_token_id": 51,
        "eos_token_id": 52,
        "decoder_start_token_id": 51,
    }, [11, 37, 26], [29, 6, 21]),
}

# Shapes of published models (random weights), made at test time or by the benchmarks
# (--only NAME --out DIR), never committed: tools/make_checkpoint.py writes the same.
# Deep and wide, they are drawn with DEEP_INIT (see init_weights).
LARGE_CONFIGS: dict[str, tuple[int, str, dict]] = {
    "smollm2_135m": (1101, "F32", {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
    }),
}

# Init scales (standard deviations).  Attention scores are q.k / sqrt(D) with q, k the
# projections of a unit-variance normalized input, so score std ~ C * QK_STD^2: the
# QK_GAIN / sqrt(C) choice below makes that ~QK_GAIN^2, i.e. sharp but not one-hot.
QK_GAIN = 1.6
QK_NORM_GAIN = 1.6    # Qwen3's q/k norm weights: normalized heads scaled by this, so
                      # score std ~ QK_NORM_GAIN^2 as for the other families.
EMBED_STD = 0.45      # Token (and learned position) embeddings; tied heads reuse wte, so
                      # this also sets the logit spread: std(logits) ~ sqrt(C) * 0.45.
NORM_NOISE = 0.1      # Norm weights are 1 + NORM_NOISE * N(0, 1).
BIAS_STD = 0.05       # Small but nonzero biases.
FC_GAIN = 1.5         # MLP input projections: pre-activations of a few units, so GELU/SiLU
                      # work in their curved region, not their linear tails.


def init_weights(cfg: dict, g: torch.Generator, deep: bool = False,
                 shapes: dict[str, list[int]] | None = None, qk_gain: float = QK_GAIN,
                 fc_gain: float = FC_GAIN) -> dict[str, torch.Tensor]:
    """Random float32 master weights for `cfg`, in `shapes` order (default
    `ref.expected_shapes(cfg)`; encoder–decoders pass `s2s.expected_shapes(cfg)`).

    deep: for many-layer, wide shapes (LARGE_CONFIGS, tools/make_checkpoint.py presets).
    The small goldens' scales would let the residual stream grow with every layer and give
    logits of std sqrt(C) * EMBED_STD (~11 at C = 576); trained models stay far below that.
    So, as GPT-2 initializes (and trained models end up): the projections that write into
    the residual stream (o_proj, down_proj) are scaled by 1 / sqrt(2 L), and the embedding
    std is 4 / sqrt(C), for logits of std ~4 whatever the width.

    qk_gain, fc_gain: QK_GAIN and FC_GAIN for this call (tools/make_checkpoint.py's
    --qk_gain/--fc_gain): lower gains make a deep random model less sensitive to small
    changes of its weights (bench/peers/kl.py needs one in a trained model's regime).
    """
    C, I = cfg["C"], cfg["I"]
    residual_scale = 1.0 / math.sqrt(2 * cfg["L"]) if deep else 1.0
    embed_std = 4.0 / math.sqrt(C) if deep else EMBED_STD

    def normal(shape, std):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std

    qk_std = qk_gain / math.sqrt(C)
    w: dict[str, torch.Tensor] = {}
    for name, shape in (shapes or ref.expected_shapes(cfg)).items():
        leaf = name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1]  # e.g. "c_fc.weight"
        if leaf in ("q_norm.weight", "k_norm.weight"):
            w[name] = QK_NORM_GAIN * (1.0 + normal(shape, NORM_NOISE))
        elif "norm" in name or leaf.startswith("ln_"):
            # LayerNorm / RMSNorm parameters.
            w[name] = 1.0 + normal(shape, NORM_NOISE) if name.endswith("weight") \
                else normal(shape, BIAS_STD)
        elif name.endswith("bias"):
            w[name] = normal(shape, BIAS_STD)
        elif name in ("wte.weight", "wpe.weight", "encoder.wpe.weight",
                      "model.embed_tokens.weight", "lm_head.weight"):
            w[name] = normal(shape, embed_std)
        elif leaf == "c_attn.weight" and ".crossattention." in name:
            # [C, 2C]: columns [:C] are k (scores: sharp, as self-attention), [C:] are v.
            w[name] = torch.cat([normal([C, C], qk_std),
                                 normal([C, C], 1.0 / math.sqrt(C))], dim=1)
        elif leaf == "q_attn.weight":  # cross-attention queries
            w[name] = normal(shape, qk_std)
        elif leaf == "c_attn.weight":
            # [C, 3C] Conv1D: columns [:2C] are q and k, [2C:] is v.
            w[name] = torch.cat([normal([C, 2 * C], qk_std),
                                 normal([C, C], 1.0 / math.sqrt(C))], dim=1)
        elif leaf in ("q_proj.weight", "k_proj.weight"):
            w[name] = normal(shape, qk_std)
        elif leaf in ("c_fc.weight", "gate_proj.weight", "up_proj.weight"):
            w[name] = normal(shape, fc_gain / math.sqrt(C))
        elif (leaf == "c_proj.weight" and ".mlp." in name) or leaf == "down_proj.weight":
            w[name] = normal(shape, residual_scale / math.sqrt(I))
        else:  # v_proj, o_proj, attn.c_proj: keep the residual stream at unit scale.
            fan_in = shape[1] if cfg["family"] == "llama" else shape[0]
            scale = residual_scale if leaf in ("o_proj.weight", "c_proj.weight") else 1.0
            w[name] = normal(shape, scale / math.sqrt(fan_in))
    return w


def write_json(path: str, obj: dict) -> None:
    """Pretty JSON with a trailing newline; `"key": value` spacing is what the C++ tests
    edit (e.g. "\\"n_layer\\": 3"), so keep json.dumps' default separators."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2) + "\n")


def mean_max_prob(attn: torch.Tensor) -> float:
    """Mean over heads and query rows of the largest attention probability. [H, T, T]"""
    return attn.max(dim=-1).values.mean().item()


def make_one(name: str, out_dir: str) -> dict:
    """Generates one golden directory; returns summary numbers."""
    seed, dtype_name, hf_config = {**CONFIGS, **LARGE_CONFIGS}[name]
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)

    config = dict(hf_config, torch_dtype=TORCH_DTYPE_NAMES[dtype_name])
    cfg = ref.parse_config(config, source=name)
    g = torch.Generator().manual_seed(seed)
    master = init_weights(cfg, g, deep=name in LARGE_CONFIGS)      # float32
    ids = torch.randint(0, cfg["V"], (T,), generator=g, dtype=torch.int64)

    # 1. Write the checkpoint in its storage dtype.
    stored = {k: v.to(STORAGE_DTYPES[dtype_name]) for k, v in master.items()}
    write_json(os.path.join(d, "config.json"), config)
    save_file(stored, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt", "generator": "tools/make_golden.py"})

    # 2. Read it back exactly as a consumer would and run the float64 reference on it.
    cfg, weights = ref.load_model(d)
    logits, attn = ref.forward(cfg, weights, ids)                  # float64
    for a in attn:
        assert torch.equal(torch.triu(a, diagonal=1), torch.zeros_like(a)), "not causal"
        assert (a.sum(-1) - 1).abs().max() < 1e-12, "rows do not sum to 1"
    assert torch.isfinite(logits).all() and all(torch.isfinite(a).all() for a in attn)

    # How much the storage rounding matters: the same reference on the float32 masters.
    # A large value is why the golden uses stored weights.
    # (For F32 storage this is 0, and skipped: large shapes would run twice.)
    rounding_shift = 0.0
    if dtype_name != "F32":
        master_logits, _ = ref.forward(cfg, master, ids)
        rounding_shift = (master_logits - logits).abs().max().item()

    # What prompt_logprobs reports: log P(ids[t + 1] | ids[..t]), t < T - 1.
    prompt_logprobs = torch.log_softmax(logits, dim=-1)[:-1].gather(
        1, ids[1:].unsqueeze(1)).squeeze(1)
    golden = {"input_ids": ids, "logits": logits.to(torch.float32),
              "prompt_logprobs": prompt_logprobs.to(torch.float32)}
    for l, a in enumerate(attn):
        golden[f"attn.{l}"] = a.to(torch.float32)                 # [H, T, T]
    save_file(golden, os.path.join(d, "golden.safetensors"), metadata={
        "generator": "tools/make_golden.py",
        "reference": "tools/reference_model.py (float64 on the stored weights, cast to F32)",
        "torch_version": torch.__version__,
        "config": name,
        "seed": str(seed),
        "weights_dtype": dtype_name,
        "contents": "input_ids I64 [T]; logits F32 [T, vocab]; "
                    "prompt_logprobs F32 [T - 1] (log_softmax(logits)[t, ids[t + 1]]); "
                    "attn.{layer} F32 [heads, T, T]",
    })

    return {
        "name": name, "dtype": dtype_name, "family": cfg["model_type"],
        "params": sum(t.numel() for t in stored.values()),
        "logits_min": logits.min().item(), "logits_max": logits.max().item(),
        "logits_std": logits.std().item(),
        "max_prob": [mean_max_prob(a) for a in attn],
        "rounding_shift": rounding_shift,
        "files": {f: os.path.getsize(os.path.join(d, f))
                  for f in ("config.json", "model.safetensors", "golden.safetensors")},
    }


def make_one_seq2seq(name: str, out_dir: str) -> dict:
    """Generates one encoder–decoder golden directory; returns summary numbers."""
    seed, dtype_name, hf_config, src_lens, tgt_lens = SEQ2SEQ_CONFIGS[name]
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)

    config = dict(hf_config, torch_dtype=TORCH_DTYPE_NAMES[dtype_name])
    cfg = s2s.parse_config(config, source=name)
    g = torch.Generator().manual_seed(seed)
    master = init_weights(cfg, g, shapes=s2s.expected_shapes(cfg))   # float32
    B, S, T = len(src_lens), max(src_lens), max(tgt_lens)
    src_len = torch.tensor(src_lens, dtype=torch.int64)               # [B]
    tgt_len = torch.tensor(tgt_lens, dtype=torch.int64)               # [B]
    real_src = s2s.key_mask(src_len, S)                               # [B, S]
    real_tgt = s2s.key_mask(tgt_len, T)                               # [B, T]
    # Random ids, 0 (the pad id) past each length; targets start with the start token.
    src = torch.randint(0, cfg["V"], (B, S), generator=g, dtype=torch.int64) * real_src
    tgt = torch.randint(0, cfg["V"], (B, T), generator=g, dtype=torch.int64)
    tgt[:, 0] = config["decoder_start_token_id"]
    tgt = tgt * real_tgt

    # 1. Write the checkpoint in its storage dtype.
    write_json(os.path.join(d, "config.json"), config)
    s2s.save_weights(cfg, master, os.path.join(d, "model.safetensors"),
                     STORAGE_DTYPES[dtype_name],
                     metadata={"format": "pt", "generator": "tools/make_golden.py"})

    # 2. Read it back and run the float64 reference on the whole padded batch.
    cfg, weights = s2s.load_model(d)
    out = s2s.forward(cfg, weights, src, src_len, tgt)                # float64

    # 3. Zero the padded query rows (their values mean nothing); padded keys are 0 already.
    def rows(x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """x [B, ..., n, m] with real [B, n]: rows past the length set to 0."""
        shape = [x.shape[0]] + [1] * (x.dim() - 3) + [x.shape[-2], 1]
        return x * real.reshape(shape).to(x.dtype)

    golden = {"source_ids": src, "source_lengths": src_len,
              "target_ids": tgt, "target_lengths": tgt_len,
              "logits": rows(out.logits[:, None], real_tgt)[:, 0]}
    maps = [("enc_attn", out.enc_attn, real_src, real_src, False),
            ("dec_attn", out.dec_attn, real_tgt, real_tgt, True),
            ("cross_attn", out.cross_attn, real_tgt, real_src, False)]
    for kind, layers, real_q, real_k, causal in maps:
        for l, a in enumerate(layers):
            a = rows(a, real_q)                                       # [B, H, q, k]
            assert torch.isfinite(a).all()
            assert not a.masked_fill(real_k[:, None, None, :], 0).any(), "padded key attended"
            sums = a.sum(-1)[real_q[:, None, :].expand(a.shape[:3])]
            assert (sums - 1).abs().max() < 1e-12, "rows do not sum to 1"
            if causal:
                assert torch.equal(a.triu(1), torch.zeros_like(a)), "not causal"
            golden[f"{kind}.{l}"] = a
    golden = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in golden.items()}

    rounding_shift = 0.0
    if dtype_name != "F32":  # The same reference on the float32 masters (see make_one).
        shifted = s2s.forward(cfg, {k: v.double() for k, v in master.items()},
                              src, src_len, tgt).logits
        rounding_shift = ((shifted - out.logits).abs().max(-1).values * real_tgt).max().item()

    save_file(golden, os.path.join(d, "golden.safetensors"), metadata={
        "generator": "tools/make_golden.py",
        "reference": "tools/seq2seq_model.py (float64 on the stored weights, cast to F32)",
        "torch_version": torch.__version__,
        "config": name,
        "seed": str(seed),
        "weights_dtype": dtype_name,
        "contents": "source_ids I64 [B, S], source_lengths I64 [B], target_ids I64 [B, T], "
                    "target_lengths I64 [B] (pad id 0; target_ids[b, 0] = decoder start); "
                    "logits F32 [B, T, vocab]; enc_attn.{layer} F32 [B, heads, S, S]; "
                    "dec_attn.{layer} F32 [B, heads, T, T]; cross_attn.{layer} F32 "
                    "[B, heads, T, S]; rows past a length and columns past a source length "
                    "are 0",
    })
    real_logits = out.logits[real_tgt]                                # [n, V]
    return {
        "name": name, "dtype": dtype_name, "family": "gpt2 enc-dec",
        "params": sum(t.numel() for t in master.values()),
        "logits_min": real_logits.min().item(), "logits_max": real_logits.max().item(),
        "logits_std": real_logits.std().item(),
        "max_prob": [mean_max_prob(golden[f"{k}.{l}"][b, :, :n])
                     for k, layers, real_q, _, _ in maps for l in range(len(layers))
                     for b, n in [(1, int(real_q[1].sum()))]],
        "rounding_shift": rounding_shift,
        "files": {f: os.path.getsize(os.path.join(d, f))
                  for f in ("config.json", "model.safetensors", "golden.safetensors")},
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/golden", help="output directory (tests/golden)")
    ap.add_argument("--only", nargs="*",
                    choices=sorted({**CONFIGS, **SEQ2SEQ_CONFIGS, **LARGE_CONFIGS}),
                    help="subset of configs (the default: every small one)")
    args = ap.parse_args(argv)

    # One thread: float64 BLAS results must not depend on how work is split across cores,
    # otherwise a last-bit difference could flip a float32 rounding between runs/machines.
    torch.set_num_threads(1)

    # Uniform causal attention over T tokens would give a mean max-prob of H_T / T.
    uniform = sum(1.0 / (i + 1) for i in range(T)) / T
    total = 0
    for name in args.only or [*CONFIGS, *SEQ2SEQ_CONFIGS]:
        s = make_one_seq2seq(name, args.out) if name in SEQ2SEQ_CONFIGS else make_one(name, args.out)
        size = sum(s["files"].values())
        total += size
        probs = ", ".join(f"{p:.2f}" for p in s["max_prob"])
        if name in SEQ2SEQ_CONFIGS:  # Sequence 1's maps: encoder, decoder, cross layers.
            probs = "sequence 1, enc/dec/cross: " + probs
        print(f"{name:19s} {s['family']:7s} {s['dtype']:4s} {s['params']:7d} params  "
              f"logits [{s['logits_min']:+.2f}, {s['logits_max']:+.2f}] std {s['logits_std']:.2f}  "
              f"mean max attn prob per layer [{probs}] (uniform {uniform:.2f})  "
              f"storage rounding shifts logits by {s['rounding_shift']:.2g}  "
              f"{size / 1024:.0f} KiB")
    print(f"wrote {args.out}: {total / 1024:.0f} KiB in total")


if __name__ == "__main__":
    main()
