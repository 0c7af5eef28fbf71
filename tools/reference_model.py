#!/usr/bin/env python3
"""Plain-PyTorch reference forward passes for textgen's decoder families.

This is the oracle the C++ decoder is tested against (tests/golden/, written by
tools/make_golden.py).  It is deliberately simple: one function per building block, a
Python loop over layers and heads, every operation written out, and everything computed
in float64 so that its own rounding error is far below the tolerances of the C++ tests.
It reads Hugging Face checkpoints as they are (config.json + HF tensor names); it shares
no code with the C++ side or with tools/train.py.

Families (see `forward`):

  GPT-2  (model_type "gpt2", HF GPT2LMHeadModel tensor names without "transformer.")
      x = wte[ids] + P                          P = wpe[0:T] ("learned") or the fixed
                                                sinusoidal table ("sinusoidal", our key)
      per layer:  x = x + attn(LN_1(x));  x = x + mlp(LN_2(x))
      logits = LN_f(x) @ wte^T                  (tied head)
      Weights are Conv1D, stored [in, out]: y = x @ W + b.

  LLaMA  (model_type "llama", HF LlamaForCausalLM tensor names)
      x = embed_tokens[ids]
      per layer:  x = x + attn(RMS_in(x));  x = x + mlp(RMS_post(x))
      logits = RMS_norm(x) @ lm_head^T          (lm_head = embed_tokens when tied)
      Weights are nn.Linear, stored [out, in]: y = x @ W^T.
      RoPE in HF's rotate_half layout; grouped-query attention.
      Published variants on the same equations (HF model_type, tensor names as
      transformers' modeling_<type>.py):
        llama    rope_scaling {"rope_type": "llama3"} (Llama 3.1+: long wavelengths
                 divided by `factor`, a blend between low_freq_factor and
                 high_freq_factor), explicit head_dim, attention_bias (q/k/v/o biases),
                 mlp_bias (gate/up/down biases)
        mistral  llama without biases (sliding_window must be null or cover the context)
        qwen2    q/k/v biases, no o_proj bias
        qwen3    q = RMSNorm_head(q) and k = RMSNorm_head(k) per head before RoPE
                 (self_attn.q_norm / k_norm, [D]); head_dim default 128; attention_bias

Shapes: T tokens, C model width, H query heads, KV key/value heads, D head size (C / H
unless head_dim says otherwise),
I feed-forward width, V vocabulary.

Usage:
    cfg, weights = load_model("tests/golden/llama_gqa")
    logits, attn = forward(cfg, weights, ids)    # [T, V], list of [H, T, T] per layer
"""

from __future__ import annotations

import json
import math
import os

import torch

from safetensors_io import load_file

DTYPE = torch.float64  # All reference arithmetic happens in float64.

# model_type values computed by llama_forward (family "llama").
LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3")


# ----------------------------------------------------------------------------- config

def load_config(directory: str) -> dict:
    """Reads <directory>/config.json; see `parse_config`."""
    path = os.path.join(directory, "config.json")
    with open(path, encoding="utf-8") as f:
        return parse_config(json.load(f), source=path)


def parse_config(hf_config: dict, source: str = "config") -> dict:
    """Fills in the HF defaults this module relies on.

    Returns a copy of the HF keys plus normalized entries:
      family ("gpt2" | "llama"), C, H, KV, D, I, V, L, eps, and for family "llama" the
      seams qkv_bias, o_bias, mlp_bias, qk_norm.
    Rejects anything this reference does not implement rather than silently ignoring it.
    """
    cfg = dict(hf_config)
    kind = cfg.get("model_type")
    if cfg.get("is_encoder_decoder"):
        raise ValueError(f"{source}: an encoder-decoder; tools/seq2seq_model.py reads it")
    if kind == "gpt2":
        C = cfg["n_embd"]
        cfg.update(family="gpt2", C=C, H=cfg["n_head"], KV=cfg["n_head"], V=cfg["vocab_size"],
                   L=cfg["n_layer"], eps=cfg.get("layer_norm_epsilon", 1e-5),
                   I=cfg.get("n_inner") or 4 * C)  # n_inner null -> 4C (HF GPT-2).
        pos = cfg.get("position_embedding_type") or "learned"
        cfg["position_embedding_type"] = {"absolute": "learned"}.get(pos, pos)
        assert cfg["position_embedding_type"] in ("learned", "sinusoidal"), pos
        assert cfg.get("activation_function", "gelu_new") in ("gelu_new", "gelu_pytorch_tanh")
        assert cfg.get("tie_word_embeddings", True), "GPT-2 always ties its LM head"
    elif kind in LLAMA_LIKE:
        H = cfg["num_attention_heads"]
        cfg.update(family="llama", C=cfg["hidden_size"], H=H,
                   KV=cfg.get("num_key_value_heads") or H, V=cfg["vocab_size"],
                   L=cfg["num_hidden_layers"], I=cfg["intermediate_size"],
                   eps=cfg.get("rms_norm_eps", 1e-6))
        cfg.setdefault("rope_theta", 10000.0)
        cfg.setdefault("tie_word_embeddings", False)  # Every one of these configs' default.
        assert cfg.get("hidden_act", "silu") == "silu"
        # head_dim: Qwen3Config defaults to 128, the others to hidden / heads.
        cfg["D"] = cfg.get("head_dim") or (128 if kind == "qwen3" else cfg["C"] // H)
        if cfg.get("head_dim") is None and kind != "qwen3":
            assert cfg["C"] % H == 0, "width must be divisible by the number of heads"
        attention_bias = cfg.get("attention_bias", False)
        cfg["qkv_bias"] = kind == "qwen2" or (kind in ("llama", "qwen3") and attention_bias)
        cfg["o_bias"] = kind in ("llama", "qwen3") and attention_bias
        cfg["mlp_bias"] = kind == "llama" and cfg.get("mlp_bias", False)
        cfg["qk_norm"] = kind == "qwen3"
        scaling = cfg.get("rope_scaling")
        if scaling is not None:
            kind_of = scaling.get("rope_type", scaling.get("type"))
            assert kind_of in ("llama3", "default"), f"rope_scaling {kind_of!r} not implemented"
        window = cfg.get("sliding_window", 4096) if kind == "mistral" else None
        if kind in ("qwen2", "qwen3") and cfg.get("use_sliding_window", False) \
                and cfg.get("max_window_layers", 28) < cfg["L"]:
            window = cfg.get("sliding_window", 4096)
        assert window is None or window >= cfg["max_position_embeddings"], \
            "sliding-window attention is not implemented"
        assert cfg["H"] % cfg["KV"] == 0, "num_key_value_heads must divide the heads"
        return cfg
    else:
        raise ValueError(f"{source}: unsupported model_type {kind!r}")
    assert cfg["C"] % cfg["H"] == 0, "width must be divisible by the number of heads"
    cfg["D"] = cfg["C"] // cfg["H"]
    return cfg


def expected_shapes(cfg: dict) -> dict[str, list[int]]:
    """Every tensor name the checkpoint must contain (no more, no fewer) and its shape."""
    C, H, KV, D, I, V = (cfg[k] for k in ("C", "H", "KV", "D", "I", "V"))
    shapes: dict[str, list[int]] = {}
    if cfg["family"] == "gpt2":
        shapes["wte.weight"] = [V, C]
        if cfg["position_embedding_type"] == "learned":
            shapes["wpe.weight"] = [cfg["n_positions"], C]
        for i in range(cfg["L"]):
            p = f"h.{i}."
            shapes.update({
                p + "ln_1.weight": [C], p + "ln_1.bias": [C],
                p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
                p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                p + "ln_2.weight": [C], p + "ln_2.bias": [C],
                p + "mlp.c_fc.weight": [C, I], p + "mlp.c_fc.bias": [I],
                p + "mlp.c_proj.weight": [I, C], p + "mlp.c_proj.bias": [C],
            })
        shapes["ln_f.weight"] = [C]
        shapes["ln_f.bias"] = [C]
    else:
        shapes["model.embed_tokens.weight"] = [V, C]
        for i in range(cfg["L"]):
            p = f"model.layers.{i}."
            shapes.update({
                p + "input_layernorm.weight": [C],
                p + "self_attn.q_proj.weight": [H * D, C],
                p + "self_attn.k_proj.weight": [KV * D, C],
                p + "self_attn.v_proj.weight": [KV * D, C],
                p + "self_attn.o_proj.weight": [C, H * D],
                p + "post_attention_layernorm.weight": [C],
                p + "mlp.gate_proj.weight": [I, C],
                p + "mlp.up_proj.weight": [I, C],
                p + "mlp.down_proj.weight": [C, I],
            })
            if cfg["qkv_bias"]:
                shapes.update({p + "self_attn.q_proj.bias": [H * D],
                               p + "self_attn.k_proj.bias": [KV * D],
                               p + "self_attn.v_proj.bias": [KV * D]})
            if cfg["o_bias"]:
                shapes[p + "self_attn.o_proj.bias"] = [C]
            if cfg["qk_norm"]:
                shapes.update({p + "self_attn.q_norm.weight": [D],
                               p + "self_attn.k_norm.weight": [D]})
            if cfg["mlp_bias"]:
                shapes.update({p + "mlp.gate_proj.bias": [I], p + "mlp.up_proj.bias": [I],
                               p + "mlp.down_proj.bias": [C]})
        shapes["model.norm.weight"] = [C]
        if not cfg["tie_word_embeddings"]:
            shapes["lm_head.weight"] = [V, C]
    return shapes


def check_weights(cfg: dict, weights: dict[str, torch.Tensor]) -> None:
    """Raises if the tensor names or shapes differ from what `cfg` implies."""
    want = expected_shapes(cfg)
    missing = sorted(set(want) - set(weights))
    unexpected = sorted(set(weights) - set(want))
    if missing or unexpected:
        raise ValueError(f"checkpoint mismatch: missing {missing}, unexpected {unexpected}")
    for name, shape in want.items():
        if list(weights[name].shape) != shape:
            raise ValueError(f"tensor '{name}': shape {list(weights[name].shape)}, "
                             f"expected {shape}")


def load_model(directory: str) -> tuple[dict, dict[str, torch.Tensor]]:
    """Loads config.json and model.safetensors (or the shards model.safetensors.index.json
    lists); weights are converted to float64.

    The conversion is exact for every stored float type (F16/BF16/F32 all embed in F64),
    so the reference sees precisely the values the C++ loader sees.
    """
    cfg = load_config(directory)
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):  # Sharded: every file the weight_map names.
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        weights = {}
        for shard in shards:
            weights.update(load_file(os.path.join(directory, shard)))
    else:
        weights = load_file(os.path.join(directory, "model.safetensors"))
    check_weights(cfg, weights)
    return cfg, {name: t.to(DTYPE) for name, t in weights.items()}


# ----------------------------------------------------------------------------- blocks

def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last axis, biased variance (divide by C), as torch/HF do.
    x [T, C], w [C], b [C] -> [T, C]"""
    mean = x.mean(dim=-1, keepdim=True)                          # [T, 1]
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)           # [T, 1]
    return (x - mean) / torch.sqrt(var + eps) * w + b


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """LLaMA RMSNorm: x * rsqrt(mean(x^2) + eps) * w.  x [T, C], w [C] -> [T, C]"""
    ms = (x * x).mean(dim=-1, keepdim=True)                      # [T, 1]
    return x * torch.rsqrt(ms + eps) * w


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU ("gelu_new"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x: torch.Tensor) -> torch.Tensor:
    """SiLU / swish: x * sigmoid(x) = x / (1 + exp(-x))."""
    return x / (1.0 + torch.exp(-x))


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """One head of causal scaled dot-product attention.

    q, k, v [T, D] -> (out [T, D], probs [T, T]); probs[i, j] = 0 exactly for j > i.
    """
    T, D = q.shape
    scores = (q @ k.T) / math.sqrt(D)                            # [T, T]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))           # query i sees keys 0..i
    # Softmax over keys; subtracting the row max changes nothing mathematically but keeps
    # exp() in range.  exp(-inf) = 0, so masked entries are exactly zero.
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    probs = e / e.sum(dim=-1, keepdim=True)                      # [T, T], rows sum to 1
    return probs @ v, probs                                      # [T, D], [T, T]


def sinusoidal_positions(T: int, C: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(p / 10000^(2i/C)).  -> [T, C]"""
    p = torch.arange(T, dtype=DTYPE)[:, None]                    # [T, 1]
    two_i = torch.arange(0, C, 2, dtype=DTYPE)[None, :]          # [1, C/2]
    angle = p / torch.pow(torch.tensor(10000.0, dtype=DTYPE), two_i / C)  # [T, C/2]
    pe = torch.zeros(T, C, dtype=DTYPE)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def rope_inv_freq(cfg: dict) -> torch.Tensor:
    """inv_freq[i] = 1 / theta^(2i/D), rescaled when rope_scaling is "llama3".  -> [D/2]

    Llama 3.1's scheme (transformers' _compute_llama3_parameters), with wavelen = 2 pi /
    inv_freq and old = original_max_position_embeddings:
      wavelen > old / low_freq_factor            -> inv_freq / factor
      wavelen < old / high_freq_factor           -> inv_freq
      otherwise, s = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
                                                  -> (1 - s) inv_freq / factor + s inv_freq
    """
    D = cfg["D"]
    inv_freq = 1.0 / cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=DTYPE) / D)
    scaling = cfg.get("rope_scaling")
    if scaling is None or scaling.get("rope_type", scaling.get("type")) == "default":
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    out = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return torch.where(medium, blended, out)


def rope_cos_sin(T: int, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HF LLaMA rotary tables: angle[p, i] = p * inv_freq[i], cos/sin = cat(angle, angle)
    along the last axis.  -> cos, sin [T, D]"""
    angle = torch.arange(T, dtype=DTYPE)[:, None] * inv_freq[None, :]   # [T, D/2]
    angle = torch.cat([angle, angle], dim=-1)                           # [T, D]
    return torch.cos(angle), torch.sin(angle)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] with x1 = x[..., :D/2], x2 = x[..., D/2:]."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates one head's vectors: x [T, D] -> [T, D].  Pairs are (i, i + D/2), not (2i, 2i+1)."""
    return x * cos + rotate_half(x) * sin


# ----------------------------------------------------------------------------- GPT-2

def gpt2_forward(cfg: dict, w: dict[str, torch.Tensor], ids: torch.Tensor
                 ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """GPT-2 forward pass.  ids [T] int -> logits [T, V], attention probs L x [H, T, T]."""
    T, C, H, D, eps = len(ids), cfg["C"], cfg["H"], cfg["D"], cfg["eps"]

    x = w["wte.weight"][ids]                                     # [T, C]
    if cfg["position_embedding_type"] == "learned":
        x = x + w["wpe.weight"][:T]                              # [T, C]
    else:
        x = x + sinusoidal_positions(T, C)                       # [T, C], not scaled

    attn_maps = []
    for i in range(cfg["L"]):
        p = f"h.{i}."
        # --- attention: Conv1D weights are [in, out], so y = h @ W + b.
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)       # [T, C]
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]      # [T, 3C]
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]                  # [T, C] each
        heads, probs = [], []
        for j in range(H):
            cols = slice(j * D, (j + 1) * D)                     # head j's D columns
            out, pr = causal_attention(q[:, cols], k[:, cols], v[:, cols])     # [T, D], [T, T]
            heads.append(out)
            probs.append(pr)
        y = torch.cat(heads, dim=-1)                                           # [T, C]
        x = x + (y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])  # [T, C]
        attn_maps.append(torch.stack(probs))                                   # [H, T, T]

        # --- MLP
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)       # [T, C]
        u = gelu_tanh(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])   # [T, I]
        x = x + (u @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])    # [T, C]

    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)     # [T, C]
    logits = x @ w["wte.weight"].T                               # [T, V], tied head
    return logits, attn_maps


# ----------------------------------------------------------------------------- LLaMA

def llama_forward(cfg: dict, w: dict[str, torch.Tensor], ids: torch.Tensor
                  ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """LLaMA forward pass.  ids [T] int -> logits [T, V], attention probs L x [H, T, T]."""
    T, H, KV, D, eps = len(ids), cfg["H"], cfg["KV"], cfg["D"], cfg["eps"]
    group = H // KV                                 # query heads sharing one kv head
    cos, sin = rope_cos_sin(T, rope_inv_freq(cfg))               # [T, D] each

    def linear(h: torch.Tensor, name: str, with_bias: bool) -> torch.Tensor:
        """nn.Linear: h @ W^T (+ b)."""
        y = h @ w[name + ".weight"].T
        return y + w[name + ".bias"] if with_bias else y

    x = w["model.embed_tokens.weight"][ids]                      # [T, C]
    attn_maps = []
    for i in range(cfg["L"]):
        p = f"model.layers.{i}."
        # --- attention: nn.Linear weights are [out, in], so y = h @ W^T.
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)                  # [T, C]
        q = linear(h, p + "self_attn.q_proj", cfg["qkv_bias"])                 # [T, H*D]
        k = linear(h, p + "self_attn.k_proj", cfg["qkv_bias"])                 # [T, KV*D]
        v = linear(h, p + "self_attn.v_proj", cfg["qkv_bias"])                 # [T, KV*D]
        heads, probs = [], []
        for j in range(H):
            kv = j // group                                      # GQA: shared kv head
            qj = q[:, j * D:(j + 1) * D]                         # [T, D]
            kj = k[:, kv * D:(kv + 1) * D]                       # [T, D]
            if cfg["qk_norm"]:                                   # Qwen3: per-head RMSNorm
                qj = rms_norm(qj, w[p + "self_attn.q_norm.weight"], eps)
                kj = rms_norm(kj, w[p + "self_attn.k_norm.weight"], eps)
            qj = apply_rope(qj, cos, sin)                        # [T, D]
            kj = apply_rope(kj, cos, sin)                        # [T, D]
            vj = v[:, kv * D:(kv + 1) * D]                       # [T, D], no rotation
            out, pr = causal_attention(qj, kj, vj)               # [T, D], [T, T]
            heads.append(out)
            probs.append(pr)
        y = torch.cat(heads, dim=-1)                                           # [T, H*D]
        x = x + linear(y, p + "self_attn.o_proj", cfg["o_bias"])               # [T, C]
        attn_maps.append(torch.stack(probs))                                   # [H, T, T]

        # --- SwiGLU MLP: down(silu(gate(h)) * up(h))
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)         # [T, C]
        gate = linear(h, p + "mlp.gate_proj", cfg["mlp_bias"])                 # [T, I]
        up = linear(h, p + "mlp.up_proj", cfg["mlp_bias"])                     # [T, I]
        x = x + linear(silu(gate) * up, p + "mlp.down_proj", cfg["mlp_bias"])  # [T, C]

    x = rms_norm(x, w["model.norm.weight"], eps)                 # [T, C]
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    logits = x @ head.T                                          # [T, V]
    return logits, attn_maps


# ----------------------------------------------------------------------------- entry

def forward(cfg: dict, weights: dict[str, torch.Tensor], ids: torch.Tensor
            ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Runs the model on one sequence from an empty context.

    cfg: from load_config; weights: name -> tensor (any float dtype; converted to float64);
    ids: [T] integer token ids, T <= context length.
    Returns float64 logits [T, V] and, per layer, attention probabilities [H, T, T] (after
    softmax, causal: zero above the diagonal).
    """
    ids = torch.as_tensor(ids, dtype=torch.long)
    assert ids.dim() == 1, "one sequence at a time"
    context = cfg["n_positions"] if cfg["family"] == "gpt2" else cfg["max_position_embeddings"]
    assert len(ids) <= context, f"{len(ids)} tokens exceed the context length {context}"
    assert int(ids.min()) >= 0 and int(ids.max()) < cfg["V"], "token id out of range"
    w = {name: t.to(DTYPE) for name, t in weights.items()}
    fn = gpt2_forward if cfg["family"] == "gpt2" else llama_forward
    return fn(cfg, w, ids)
