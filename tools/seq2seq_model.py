#!/usr/bin/env python3
"""Plain-PyTorch encoder–decoder ("seq2seq") model: the oracle and the training model.

The equations are those of model/decoder.h (tensor names: model/weights.h): GPT-2 blocks, pre-LN,
plus an encoder stack and a cross-attention sub-layer in every decoder block, as Hugging
Face GPT-2 with `add_cross_attention`:

  Encoder (once per source, bidirectional; padded source keys get weight exactly 0):
      e = wte[src] + P_enc[0..S)                 P = sinusoidal table, or encoder.wpe
      per encoder layer:  e = e + SelfAttn(LN_1(e));  e = e + MLP(LN_2(e))
      context = LN_enc_f(e)                                          [B, S, C]
  Decoder (causal):
      x = wte[tgt] + P_dec[0..T)                 P = sinusoidal table, or wpe
      per decoder layer:  x = x + CausalSelfAttn(LN_1(x))
                          x = x + CrossAttn(LN_cross(x), context)    keys = real source
                          x = x + MLP(LN_2(x))
      logits = LN_f(x) @ wte^T                                       tied head
  CrossAttn(y, ctx): q = y Wq + bq [T, C];  [k | v] = ctx Wkv + bkv [S, 2C];
      per head h (D = C / H, head h = columns h*D:(h+1)*D of q, k and v):
      softmax(q_h k_h^T / sqrt(D)) v_h;  concat heads;  @ Wo + bo.
  Weights are Conv1D, stored [in, out]: y = x @ W + b.  MLP = c_fc -> gelu_new -> c_proj.

One module serves both uses, so the architecture has a single home:
  * tools/make_golden.py runs it in float64 on random weights (the C++ parity goldens);
  * tools/train_seq2seq.py runs it in float32 with autograd (bfloat16 autocast matmuls)
    and decodes the held-out set with `greedy_decode` in float32.
The weights are a plain dict name -> tensor with exactly the contract's names (no
"transformer." prefix), so what is trained is what is saved is what the C++ side loads.

Batches are padded: sources [B, S_max] with lengths [B], targets [B, T_max] with lengths
[B].  Every source and target has at least one token.  Padding rows (query positions
past a sequence's length) compute finite values that mean nothing; padded *key* columns
are masked with -inf before the softmax, so their probabilities are exactly 0 (asserted).
Causality makes padded target keys invisible to real target rows, so the decoder
self-attention needs no target padding mask.

Shapes: B batch, S source length, T target length, C width, H heads, D = C / H,
I feed-forward width, V vocabulary.

Usage:
    cfg, w = load_model("tests/golden/seq2seq_sinusoidal")          # float64 weights
    out = forward(cfg, w, src, src_len, tgt)
    out.logits [B, T, V]; out.enc_attn / out.dec_attn / out.cross_attn: per layer
    [B, H, S, S] / [B, H, T, T] / [B, H, T, S]
"""

from __future__ import annotations

import json
import math
import os
from typing import NamedTuple

import torch
import torch.nn.functional as F

from reference_model import sinusoidal_positions
from safetensors_io import load_file, save_file


# ----------------------------------------------------------------------------- config

def load_config(directory: str) -> dict:
    """Reads <directory>/config.json; see `parse_config`."""
    path = os.path.join(directory, "config.json")
    with open(path, encoding="utf-8") as f:
        return parse_config(json.load(f), source=path)


def parse_config(hf_config: dict, source: str = "config") -> dict:
    """Checks an encoder–decoder config.json and adds normalized entries:
    C, H, D, I, V, L_enc, L_dec, eps, n_positions, position_embedding_type."""
    cfg = dict(hf_config)
    if cfg.get("model_type") != "gpt2" or not cfg.get("is_encoder_decoder"):
        raise ValueError(f"{source}: not a gpt2 encoder-decoder config")
    assert cfg.get("add_cross_attention", True), f"{source}: add_cross_attention must be true"
    C, H = cfg["n_embd"], cfg["n_head"]
    cfg.update(family="gpt2", C=C, H=H, V=cfg["vocab_size"], L_enc=cfg["encoder_layers"],
               L_dec=cfg["n_layer"], L=cfg["n_layer"], eps=cfg.get("layer_norm_epsilon", 1e-5),
               I=cfg.get("n_inner") or 4 * C)
    pos = cfg.get("position_embedding_type") or "sinusoidal"   # the contract's default
    cfg["position_embedding_type"] = {"absolute": "learned"}.get(pos, pos)
    assert cfg["position_embedding_type"] in ("learned", "sinusoidal"), pos
    assert cfg.get("activation_function", "gelu_new") in ("gelu_new", "gelu_pytorch_tanh")
    assert cfg.get("tie_word_embeddings", True), "the LM head is tied to wte"
    assert cfg["L_enc"] >= 1 and cfg["L_dec"] >= 1
    assert C % H == 0 and C % 2 == 0, "width must be even and divisible by the heads"
    cfg["D"] = C // H
    return cfg


def block_shapes(prefix: str, C: int, I: int) -> dict[str, list[int]]:
    """A GPT-2 block's tensors (self-attention and MLP) under `prefix`."""
    p = prefix
    return {
        p + "ln_1.weight": [C], p + "ln_1.bias": [C],
        p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
        p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
        p + "ln_2.weight": [C], p + "ln_2.bias": [C],
        p + "mlp.c_fc.weight": [C, I], p + "mlp.c_fc.bias": [I],
        p + "mlp.c_proj.weight": [I, C], p + "mlp.c_proj.bias": [C],
    }


def expected_shapes(cfg: dict) -> dict[str, list[int]]:
    """Every tensor the checkpoint must hold (no more, no fewer) and its shape, in a fixed
    order (the order the writers use)."""
    C, I, V = cfg["C"], cfg["I"], cfg["V"]
    shapes: dict[str, list[int]] = {"wte.weight": [V, C]}
    if cfg["position_embedding_type"] == "learned":
        shapes["wpe.weight"] = [cfg["n_positions"], C]
        shapes["encoder.wpe.weight"] = [cfg["n_positions"], C]
    for i in range(cfg["L_enc"]):
        shapes.update(block_shapes(f"encoder.h.{i}.", C, I))
    shapes["encoder.ln_f.weight"] = [C]
    shapes["encoder.ln_f.bias"] = [C]
    for i in range(cfg["L_dec"]):
        p = f"h.{i}."
        shapes.update(block_shapes(p, C, I))
        shapes.update({
            p + "ln_cross_attn.weight": [C], p + "ln_cross_attn.bias": [C],
            p + "crossattention.q_attn.weight": [C, C], p + "crossattention.q_attn.bias": [C],
            p + "crossattention.c_attn.weight": [C, 2 * C],
            p + "crossattention.c_attn.bias": [2 * C],
            p + "crossattention.c_proj.weight": [C, C], p + "crossattention.c_proj.bias": [C],
        })
    shapes["ln_f.weight"] = [C]
    shapes["ln_f.bias"] = [C]
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


def load_model(directory: str, dtype: torch.dtype = torch.float64
               ) -> tuple[dict, dict[str, torch.Tensor]]:
    """config.json + model.safetensors (an optional "transformer." prefix is stripped),
    weights converted to `dtype` (exact for F16/BF16/F32 -> float64)."""
    cfg = load_config(directory)
    weights = load_file(os.path.join(directory, "model.safetensors"))
    weights = {name.removeprefix("transformer."): t for name, t in weights.items()}
    check_weights(cfg, weights)
    return cfg, {name: t.to(dtype) for name, t in weights.items()}


def save_weights(cfg: dict, weights: dict[str, torch.Tensor], path: str,
                 dtype: torch.dtype = torch.float32, metadata: dict | None = None) -> None:
    """Writes the weights in `expected_shapes` order, in storage dtype `dtype`."""
    check_weights(cfg, weights)
    stored = {name: weights[name].detach().to(dtype).contiguous()
              for name in expected_shapes(cfg)}
    save_file(stored, path, metadata=metadata)


# ----------------------------------------------------------------------------- blocks

def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last axis (biased variance), torch's fused kernel: the function
    reference_model.layer_norm writes out (equal to ~1e-16 in float64), several times
    faster for training.
    (tools/check_golden.py's second opinion writes the formula out.)  [..., C] -> [..., C]"""
    return F.layer_norm(x, x.shape[-1:], w.to(x.dtype), b.to(x.dtype), eps)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), fused."""
    return F.gelu(x, approximate="tanh")


def conv1d(w: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    """GPT-2 Conv1D: x [..., in] @ W [in, out] + b [out] -> [..., out]."""
    return x @ w[name + ".weight"] + w[name + ".bias"]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, H: int,
           allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head scaled dot-product attention with a key mask.

    q [B, T, C]; k, v [B, S, C]; allowed [B, T, S] bool (query t may see key s).
    -> out [B, T, C], probs [B, H, T, S] with probs exactly 0 where not allowed.
    Head h uses columns h*D:(h+1)*D of q, k and v.
    """
    B, T, C = q.shape
    S = k.shape[1]
    D = C // H
    dtype = v.dtype if not torch.is_autocast_cpu_enabled() else torch.float32
    q = q.reshape(B, T, H, D).transpose(1, 2)                    # [B, H, T, D]
    k = k.reshape(B, S, H, D).transpose(1, 2)                    # [B, H, S, D]
    v = v.reshape(B, S, H, D).transpose(1, 2)                    # [B, H, S, D]
    # Under bfloat16 autocast the product is bf16; the softmax runs in float32.
    scores = (q @ k.transpose(-1, -2)).to(dtype) / math.sqrt(D)  # [B, H, T, S]
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    # Softmax over keys; exp(-inf) = 0, so masked keys get weight exactly 0.
    probs = torch.softmax(scores, dim=-1)                        # [B, H, T, S]
    if not probs.requires_grad:  # (not while training: it costs a pass over the scores)
        assert not bool(probs.masked_fill(allowed[:, None], 0).any()), "masked key leaked"
    out = (probs @ v).transpose(1, 2).reshape(B, T, C)           # [B, T, C]
    return out, probs


def self_attention(cfg: dict, w: dict, p: str, h: torch.Tensor, allowed: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-2 attention: fused c_attn [C, 3C] = [Q | K | V], then c_proj.
    h [B, T, C] -> ([B, T, C], probs [B, H, T, T])"""
    C = cfg["C"]
    qkv = conv1d(w, p + "attn.c_attn", h)                        # [B, T, 3C]
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]  # [B, T, C] each
    y, probs = attend(q, k, v, cfg["H"], allowed)
    return conv1d(w, p + "attn.c_proj", y), probs                # [B, T, C]


def cross_attention(cfg: dict, w: dict, p: str, h: torch.Tensor, context: torch.Tensor,
                    allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries from the decoder, keys/values from the encoder's context.
    h [B, T, C], context [B, S, C] -> ([B, T, C], probs [B, H, T, S])"""
    C = cfg["C"]
    q = conv1d(w, p + "crossattention.q_attn", h)                # [B, T, C]
    kv = conv1d(w, p + "crossattention.c_attn", context)         # [B, S, 2C] = [K | V]
    k, v = kv[..., :C], kv[..., C:]                              # [B, S, C] each
    y, probs = attend(q, k, v, cfg["H"], allowed)
    return conv1d(w, p + "crossattention.c_proj", y), probs      # [B, T, C]


def mlp(w: dict, p: str, h: torch.Tensor) -> torch.Tensor:
    """c_fc -> gelu_new (tanh) -> c_proj.  h [B, T, C] -> [B, T, C]"""
    return conv1d(w, p + "mlp.c_proj", gelu_tanh(conv1d(w, p + "mlp.c_fc", h)))


def positions(cfg: dict, w: dict, table: str, n: int, dtype: torch.dtype) -> torch.Tensor:
    """The first n rows of the position table: the sinusoidal formula (computed in float64,
    then cast) or the learned table `table` ("wpe.weight" / "encoder.wpe.weight").  [n, C]"""
    assert n <= cfg["n_positions"], f"{n} positions exceed n_positions {cfg['n_positions']}"
    if cfg["position_embedding_type"] == "learned":
        return w[table][:n]
    return sinusoidal_positions(n, cfg["C"]).to(dtype)


def key_mask(lengths: torch.Tensor, n: int) -> torch.Tensor:
    """[B] lengths -> [B, n] bool, True for the real positions 0..length-1."""
    return torch.arange(n)[None, :] < lengths[:, None]


# ----------------------------------------------------------------------------- model

def encode(cfg: dict, w: dict[str, torch.Tensor], src: torch.Tensor, src_len: torch.Tensor
           ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The encoder.  src [B, S] ids (any valid id past each length), src_len [B] >= 1
    -> context [B, S, C], encoder self-attention per layer [B, H, S, S]."""
    B, S = src.shape
    eps, wte = cfg["eps"], w["wte.weight"]
    real = key_mask(src_len, S)                                  # [B, S]
    allowed = real[:, None, :].expand(B, S, S)                   # every real key, no causality
    e = wte[src] + positions(cfg, w, "encoder.wpe.weight", S, wte.dtype)  # [B, S, C]
    maps = []
    for i in range(cfg["L_enc"]):
        p = f"encoder.h.{i}."
        a, probs = self_attention(cfg, w, p, layer_norm(e, w[p + "ln_1.weight"],
                                                        w[p + "ln_1.bias"], eps), allowed)
        e = e + a                                                              # [B, S, C]
        e = e + mlp(w, p, layer_norm(e, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps))
        maps.append(probs)                                                     # [B, H, S, S]
    context = layer_norm(e, w["encoder.ln_f.weight"], w["encoder.ln_f.bias"], eps)
    return context, maps                                                       # [B, S, C]


def decode(cfg: dict, w: dict[str, torch.Tensor], context: torch.Tensor, src_len: torch.Tensor,
           tgt: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """The decoder over the whole target prefix (no cache: full recompute).
    context [B, S, C], src_len [B], tgt [B, T] ids
    -> logits [B, T, V], self-attention per layer [B, H, T, T], cross per layer [B, H, T, S]."""
    B, T = tgt.shape
    S = context.shape[1]
    eps, wte = cfg["eps"], w["wte.weight"]
    causal = torch.ones(T, T, dtype=torch.bool).tril()           # query t sees keys 0..t
    self_allowed = causal[None].expand(B, T, T)
    cross_allowed = key_mask(src_len, S)[:, None, :].expand(B, T, S)  # real source keys
    x = wte[tgt] + positions(cfg, w, "wpe.weight", T, wte.dtype)           # [B, T, C]
    self_maps, cross_maps = [], []
    for i in range(cfg["L_dec"]):
        p = f"h.{i}."
        a, probs = self_attention(cfg, w, p, layer_norm(x, w[p + "ln_1.weight"],
                                                        w[p + "ln_1.bias"], eps), self_allowed)
        x = x + a                                                              # [B, T, C]
        self_maps.append(probs)                                                # [B, H, T, T]
        h = layer_norm(x, w[p + "ln_cross_attn.weight"], w[p + "ln_cross_attn.bias"], eps)
        a, probs = cross_attention(cfg, w, p, h, context, cross_allowed)
        x = x + a                                                              # [B, T, C]
        cross_maps.append(probs)                                               # [B, H, T, S]
        x = x + mlp(w, p, layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps))
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)    # [B, T, C]
    logits = x @ wte.T                                           # [B, T, V], tied head
    return logits, self_maps, cross_maps


class Output(NamedTuple):
    logits: torch.Tensor              # [B, T, V]
    enc_attn: list[torch.Tensor]      # L_enc x [B, H, S, S]
    dec_attn: list[torch.Tensor]      # L_dec x [B, H, T, T]
    cross_attn: list[torch.Tensor]    # L_dec x [B, H, T, S]


def forward(cfg: dict, w: dict[str, torch.Tensor], src: torch.Tensor, src_len: torch.Tensor,
            tgt: torch.Tensor) -> Output:
    """Encoder then decoder on a padded batch, in the weights' dtype (float64 for goldens,
    float32 for training; bfloat16 autocast matmuls work too).
    src [B, S], src_len [B], tgt [B, T] (teacher forcing: [BOS] + answer ...)."""
    src = torch.as_tensor(src, dtype=torch.long)
    tgt = torch.as_tensor(tgt, dtype=torch.long)
    src_len = torch.as_tensor(src_len, dtype=torch.long)
    assert src.dim() == 2 and tgt.dim() == 2 and src.shape[0] == tgt.shape[0] == len(src_len)
    # Every row has a key to attend to (no all -inf softmax): lengths >= 1.
    assert int(src_len.min()) >= 1 and int(src_len.max()) <= src.shape[1]
    for ids in (src, tgt):
        assert int(ids.min()) >= 0 and int(ids.max()) < cfg["V"], "token id out of range"
    context, enc_maps = encode(cfg, w, src, src_len)
    logits, dec_maps, cross_maps = decode(cfg, w, context, src_len, tgt)
    return Output(logits, enc_maps, dec_maps, cross_maps)


@torch.no_grad()
def greedy_decode(cfg: dict, w: dict[str, torch.Tensor], src: torch.Tensor,
                  src_len: torch.Tensor, bos: int, eos: int, max_new: int) -> list[list[int]]:
    """Greedy decoding: the decoder starts from [BOS]; each step appends the argmax of the
    last position's logits, until EOS or max_new tokens.  The encoder runs once; the
    decoder recomputes the whole prefix each step (simple; the C++ side caches).
    -> per sequence, the generated ids without BOS and without EOS."""
    src = torch.as_tensor(src, dtype=torch.long)
    src_len = torch.as_tensor(src_len, dtype=torch.long)
    B = src.shape[0]
    context, _ = encode(cfg, w, src, src_len)
    tgt = torch.full((B, 1), bos, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_new):
        logits, _, _ = decode(cfg, w, context, src_len, tgt)
        nxt = logits[:, -1].argmax(dim=-1)                       # [B]
        nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
        tgt = torch.cat([tgt, nxt[:, None]], dim=1)
        done |= nxt == eos
        if bool(done.all()):
            break
    out = []
    for row in tgt[:, 1:].tolist():
        out.append(row[:row.index(eos)] if eos in row else row)
    return out
