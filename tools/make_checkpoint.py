#!/usr/bin/env python3
"""Writes a random-weight checkpoint of any supported family in Hugging Face layout.

The directory gets what transformers itself would save for the model: `config.json`
(the model_type's own keys) and `model.safetensors`, or with --shards N the files
`model-0000i-of-0000N.safetensors` plus `model.safetensors.index.json`
({"metadata": {"total_size": bytes}, "weight_map": {tensor: file}}).  Tensor names are
transformers' (model.layers.N.self_attn.q_proj.weight, ...: tools/reference_model.py's
`expected_shapes`), and the weights are drawn as tools/make_golden.py draws them (sharp
attention, unit-scale residual stream), so the logits are far from uniform.

Presets are the published configs of the models people serve on CPUs (random weights,
no tokenizer); the tiny ones are tools/make_golden.py's golden configs.

Usage:
    /usr/bin/python3 tools/make_checkpoint.py --preset smollm2-135m --out /tmp/smollm2
    /usr/bin/python3 tools/make_checkpoint.py --preset qwen2.5-0.5b --dtype BF16 \\
        --shards 3 --out /tmp/qwen
    /usr/bin/python3 tools/make_checkpoint.py --list
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden  # noqa: E402
import reference_model as ref  # noqa: E402
from safetensors_io import save_file  # noqa: E402

# Published configs (config.json on the Hugging Face hub), abridged to the keys the
# architecture needs.
PRESETS: dict[str, dict] = {
    "gpt2-small": {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "vocab_size": 50257, "n_positions": 1024, "n_ctx": 1024, "n_embd": 768,
        "n_layer": 12, "n_head": 12, "n_inner": None, "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new", "tie_word_embeddings": True,
        "position_embedding_type": "learned",
    },
    "smollm2-135m": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0, "rope_scaling": None, "attention_bias": False,
        "mlp_bias": False, "tie_word_embeddings": True, "hidden_act": "silu",
    },
    "smollm2-360m": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "vocab_size": 49152, "hidden_size": 960, "intermediate_size": 2560,
        "num_hidden_layers": 32, "num_attention_heads": 15, "num_key_value_heads": 5,
        "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0, "rope_scaling": None, "attention_bias": False,
        "mlp_bias": False, "tie_word_embeddings": True, "hidden_act": "silu",
    },
    "qwen2.5-0.5b": {
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": None, "use_sliding_window": False, "sliding_window": 32768,
        "max_window_layers": 21, "tie_word_embeddings": True, "hidden_act": "silu",
    },
    "qwen3-0.6b": {
        "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000, "rope_scaling": None, "attention_bias": False,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28,
        "tie_word_embeddings": True, "hidden_act": "silu",
    },
    "tinyllama-1.1b": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
        "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_scaling": None, "tie_word_embeddings": False, "hidden_act": "silu",
    },
    "llama-3.2-1b": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "hidden_act": "silu",
    },
    # Not a published model: Qwen2.5-0.5B's depth and heads (24 layers x 14
    # heads, 2 KV heads) at a width of 16 per head and a 4,096-token context,
    # for attention at the scale of real models (maps of 24 x 14 x 4,096^2
    # weights) on machines and in tests where the 0.5B's width would make a
    # 4,096-token pass take a minute (tests/explorer, bench/attention).
    "attention-24x14": {
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 512, "hidden_size": 224, "intermediate_size": 448,
        "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "rope_scaling": None, "use_sliding_window": False, "sliding_window": 4096,
        "max_window_layers": 24, "tie_word_embeddings": True, "hidden_act": "silu",
    },
}
# The golden configs, by name (tiny; e.g. "tiny-qwen3_qk_norm").
for _name, (_seed, _dtype, _config) in make_golden.CONFIGS.items():
    PRESETS["tiny-" + _name] = _config

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
TORCH_DTYPE_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def shard_names(n: int) -> list[str]:
    """transformers' names: model-00001-of-00003.safetensors, ..."""
    return [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]


def write_checkpoint(config: dict, out: str, dtype: str = "F32", shards: int = 1,
                     seed: int = 0, deep: bool = True, qk_gain: float = make_golden.QK_GAIN,
                     fc_gain: float = make_golden.FC_GAIN) -> int:
    """Writes `config`'s random checkpoint to `out`; returns the tensor bytes written.
    deep: make_golden.init_weights' scaling for many-layer models (off for the tiny
    presets, so that they reproduce the golden weights for the golden seed)."""
    config = dict(config, torch_dtype=TORCH_DTYPE_NAMES[dtype])
    cfg = ref.parse_config(config, source="preset")
    g = torch.Generator().manual_seed(seed)
    os.makedirs(out, exist_ok=True)
    make_golden.write_json(os.path.join(out, "config.json"), config)

    # Tensors in expected_shapes order (embeddings, layer 0, ..., norm, head), cut into
    # `shards` runs of about equal bytes.
    shapes = ref.expected_shapes(cfg)
    element = torch.tensor([], dtype=DTYPES[dtype]).element_size()
    sizes = {name: torch.Size(s).numel() * element for name, s in shapes.items()}
    total = sum(sizes.values())
    names = shard_names(shards) if shards > 1 else ["model.safetensors"]
    groups: list[list[str]] = [[] for _ in names]
    running = 0
    for name in shapes:
        index = min(len(names) - 1, running * len(names) // max(total, 1))
        groups[index].append(name)
        running += sizes[name]
    assert all(groups), f"{shards} shards for {len(shapes)} tensors: some would be empty"

    # float32 masters of every tensor, drawn before any split: the values do not depend
    # on --shards, so a sharded and a single-file checkpoint of one seed are the same model.
    weights = make_golden.init_weights(cfg, g, deep=deep, qk_gain=qk_gain, fc_gain=fc_gain)
    weight_map = {}
    for file_name, group in zip(names, groups):
        tensors = {name: weights.pop(name).to(DTYPES[dtype]) for name in group}
        save_file(tensors, os.path.join(out, file_name),
                  metadata={"format": "pt", "generator": "tools/make_checkpoint.py"})
        weight_map.update({name: file_name for name in group})
        del tensors
    if shards > 1:
        make_golden.write_json(os.path.join(out, "model.safetensors.index.json"), {
            "metadata": {"total_size": total},
            "weight_map": dict(sorted(weight_map.items())),
        })
    return total


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), help="model shape")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--dtype", default="F32", choices=sorted(DTYPES), help="storage dtype")
    ap.add_argument("--shards", type=int, default=1,
                    help="split into this many files with model.safetensors.index.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab_size", type=int,
                    help="the preset's shape with this vocabulary (e.g. a real tokenizer's)")
    ap.add_argument("--qk_gain", type=float, default=make_golden.QK_GAIN,
                    help="q and k projections' std × sqrt(C): attention scores of std ~gain²")
    ap.add_argument("--fc_gain", type=float, default=make_golden.FC_GAIN,
                    help="MLP input projections' std × sqrt(C)")
    ap.add_argument("--list", action="store_true", help="print the presets and exit")
    args = ap.parse_args(argv)
    if args.list:
        for name in sorted(PRESETS):
            print(name)
        return
    if not args.preset or not args.out:
        ap.error("--preset and --out are required")
    if args.shards < 1:
        ap.error("--shards must be at least 1")
    torch.set_num_threads(1)
    config = dict(PRESETS[args.preset])
    if args.vocab_size:
        config["vocab_size"] = args.vocab_size
    total = write_checkpoint(config, args.out, args.dtype, args.shards,
                             args.seed, deep=not args.preset.startswith("tiny-"),
                             qk_gain=args.qk_gain, fc_gain=args.fc_gain)
    print(f"wrote {args.out}: {args.preset}, {args.dtype}, {total / 1048576:.1f} MiB of "
          f"tensors in {args.shards} file(s)")


if __name__ == "__main__":
    main()
