#!/usr/bin/env python3
"""Sanity checks for the golden test data written by tools/make_golden.py.

For every `<golden>/<name>/` directory (with config.json, model.safetensors and
golden.safetensors) this checks that:

  1. the files parse strictly (safetensors_io) and hold exactly the expected tensors:
     input_ids I64 [T], logits F32 [T, V], attn.{l} F32 [H, T, T] for every layer, and a
     __metadata__ naming the generator and torch version;
  2. tools/reference_model.py, rerun on the stored weights, reproduces the stored logits
     and attention (it is deterministic, so the difference is expected to be 0);
  3. a second, independently written forward pass (below: batched heads, torch.nn.functional
     building blocks, and for LLaMA Meta's original interleaved complex-number RoPE on
     weights un-permuted back to Meta's layout) agrees with the reference in float64.
     This guards the oracle itself against a convention slip (RoPE layout, GQA mapping,
     Conv1D orientation, q/k/v split) that a self-comparison would never catch;
  4. the stored attention is causal: exactly 0 above the diagonal, >= 0, rows sum to 1.

Encoder–decoder trees (config.json with "is_encoder_decoder": true, written by the same
script from tools/seq2seq_model.py) get the same four checks, adapted: the tensors are
make_golden.py's padded batch; the second opinion (alt_seq2seq) runs each sequence on its
own, cut to its length (no padding and no key mask at all), with the LayerNorm, GELU and
softmax formulas written out; the stored maps have exactly 0 in padded key columns and
padded query rows, real rows sum to 1, and the decoder self-attention is causal.

Usage:
    /usr/bin/python3 tools/check_golden.py [--golden tests/golden]
Exits non-zero on the first failure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model as ref  # noqa: E402
import seq2seq_model as s2s  # noqa: E402
from safetensors_io import load_file, load_metadata  # noqa: E402


# ----------------------------------------------------------------------------- second opinion

def alt_gpt2(cfg: dict, w: dict[str, torch.Tensor], ids: torch.Tensor):
    """GPT-2 with all heads at once and torch.nn.functional blocks.  -> [T, V], L x [H, T, T]"""
    T, C, H, D, eps = len(ids), cfg["C"], cfg["H"], cfg["D"], cfg["eps"]
    if cfg["position_embedding_type"] == "learned":
        pos = w["wpe.weight"][:T]
    else:  # Element by element from the formula, with Python's math module.
        pos = torch.tensor([[math.sin(p / 10000 ** (c / C)) if c % 2 == 0
                             else math.cos(p / 10000 ** ((c - 1) / C)) for c in range(C)]
                            for p in range(T)], dtype=torch.float64)
    x = F.embedding(ids, w["wte.weight"]) + pos
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    maps = []
    for i in range(cfg["L"]):
        p = f"h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        # Conv1D [in, out] == nn.Linear with the transposed weight.
        q, k, v = F.linear(h, w[p + "attn.c_attn.weight"].T, w[p + "attn.c_attn.bias"]).split(C, -1)
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in (q, k, v))    # [H, T, D]
        s = (q @ k.transpose(1, 2)) * D ** -0.5
        a = F.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)        # [H, T, T]
        maps.append(a)
        y = (a @ v).transpose(0, 1).reshape(T, C)
        x = x + F.linear(y, w[p + "attn.c_proj.weight"].T, w[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = F.gelu(F.linear(h, w[p + "mlp.c_fc.weight"].T, w[p + "mlp.c_fc.bias"]),
                   approximate="tanh")
        x = x + F.linear(h, w[p + "mlp.c_proj.weight"].T, w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], eps)
    return F.linear(x, w["wte.weight"]), maps


def hf_to_meta(wq: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undoes the row permutation HF's convert_llama_weights_to_hf.py applies to q/k.

    Meta rotates adjacent pairs (2i, 2i+1) of each head; HF rotates (i, i + D/2) and
    permutes the projection rows to compensate:
        hf = meta.view(H, D/2, 2, C).transpose(1, 2).reshape(H*D, C)
    so meta = hf.view(H, 2, D/2, C).transpose(1, 2).reshape(H*D, C).
    """
    rows, C = wq.shape
    D = rows // n_heads
    return wq.view(n_heads, 2, D // 2, C).transpose(1, 2).reshape(rows, C)


def hf_to_meta_vector(b: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The same permutation for a bias [H*D] (or a q/k norm weight [D], n_heads=1)."""
    return hf_to_meta(b[:, None], n_heads)[:, 0]


def meta_llama3_freqs(freqs: torch.Tensor, scaling: dict) -> torch.Tensor:
    """Meta's apply_scaling (llama-models, Llama 3.1), written per frequency."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(f)
        elif wavelen > old / low:
            out.append(f / factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=freqs.dtype)


def meta_rope(x: torch.Tensor, theta: float, scaling: dict | None = None) -> torch.Tensor:
    """Meta LLaMA's apply_rotary_emb: pairs (2i, 2i+1) as complex numbers times e^{i p f_i}.
    x [H, T, D] -> [H, T, D]"""
    Hh, T, D = x.shape
    freqs = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64)[: D // 2] / D)
    if scaling is not None and scaling.get("rope_type", scaling.get("type")) == "llama3":
        freqs = meta_llama3_freqs(freqs, scaling)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), freqs)       # [T, D/2]
    rot = torch.polar(torch.ones_like(angles), angles)                      # e^{i angle}
    xc = torch.view_as_complex(x.reshape(Hh, T, D // 2, 2).contiguous())
    return torch.view_as_real(xc * rot).reshape(Hh, T, D)


def alt_llama(cfg: dict, w: dict[str, torch.Tensor], ids: torch.Tensor):
    """LLaMA in Meta's original formulation (interleaved complex RoPE, repeat_interleave
    for grouped kv heads), with the biases and Qwen3's q/k norm permuted alike.
    -> [T, V], L x [H, T, T]"""
    T, C, H, KV, D, eps = len(ids), cfg["C"], cfg["H"], cfg["KV"], cfg["D"], cfg["eps"]

    def rms(x, g):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    x = F.embedding(ids, w["model.embed_tokens.weight"])
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    maps = []
    for i in range(cfg["L"]):
        p = f"model.layers.{i}.self_attn."
        h = rms(x, w[f"model.layers.{i}.input_layernorm.weight"])
        bq = hf_to_meta_vector(w[p + "q_proj.bias"], H) if cfg["qkv_bias"] else None
        bk = hf_to_meta_vector(w[p + "k_proj.bias"], KV) if cfg["qkv_bias"] else None
        bv = w[p + "v_proj.bias"] if cfg["qkv_bias"] else None
        q = F.linear(h, hf_to_meta(w[p + "q_proj.weight"], H), bq).view(T, H, D).transpose(0, 1)
        k = F.linear(h, hf_to_meta(w[p + "k_proj.weight"], KV), bk).view(T, KV, D).transpose(0, 1)
        v = F.linear(h, w[p + "v_proj.weight"], bv).view(T, KV, D).transpose(0, 1)
        if cfg["qk_norm"]:  # RMS over a head is blind to the permutation; the gain is not.
            q = rms(q, hf_to_meta_vector(w[p + "q_norm.weight"], 1))
            k = rms(k, hf_to_meta_vector(w[p + "k_norm.weight"], 1))
        scaling = cfg.get("rope_scaling")
        q, k = meta_rope(q, cfg["rope_theta"], scaling), meta_rope(k, cfg["rope_theta"], scaling)
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        s = (q @ k.transpose(1, 2)) / math.sqrt(D)
        a = F.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)        # [H, T, T]
        maps.append(a)
        x = x + F.linear((a @ v).transpose(0, 1).reshape(T, H * D), w[p + "o_proj.weight"],
                         w.get(p + "o_proj.bias"))
        m = f"model.layers.{i}.mlp."
        h = rms(x, w[f"model.layers.{i}.post_attention_layernorm.weight"])
        x = x + F.linear(F.silu(F.linear(h, w[m + "gate_proj.weight"], w.get(m + "gate_proj.bias")))
                         * F.linear(h, w[m + "up_proj.weight"], w.get(m + "up_proj.bias")),
                         w[m + "down_proj.weight"], w.get(m + "down_proj.bias"))
    x = rms(x, w["model.norm.weight"])
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return F.linear(x, head), maps


def alt_seq2seq(cfg: dict, w: dict[str, torch.Tensor], src: torch.Tensor, tgt: torch.Tensor):
    """One unpadded sequence through SEQ2SEQ.md's equations, written independently of
    tools/seq2seq_model.py: explicit LayerNorm / GELU / softmax formulas, heads by
    einsum, sinusoids from Python's math module, no masks (the source is cut to its
    length, so there is nothing to mask).
    src [S], tgt [T] -> logits [T, V], enc L_enc x [H, S, S], dec / cross L_dec x
    [H, T, T] / [H, T, S]"""
    C, H, eps = cfg["C"], cfg["H"], cfg["eps"]
    D = C // H

    def ln(x, name):
        mu = x.mean(-1, keepdim=True)
        sd = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
        return (x - mu) / sd * w[name + ".weight"] + w[name + ".bias"]

    def lin(x, name):
        return torch.einsum("ti,io->to", x, w[name + ".weight"]) + w[name + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    def heads(q, k, v, causal):
        q, k, v = (t.reshape(t.shape[0], H, D) for t in (q, k, v))  # [n, H, D]
        s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(D)       # [H, Tq, Tk]
        if causal:
            s = s + torch.full(s.shape[1:], float("-inf"), dtype=s.dtype).triu(1)
        e = torch.exp(s - s.amax(-1, keepdim=True))
        a = e / e.sum(-1, keepdim=True)
        return torch.einsum("hts,shd->thd", a, v).reshape(q.shape[0], C), a

    def pos(n, table):
        if cfg["position_embedding_type"] == "learned":
            return w[table][:n]
        return torch.tensor([[math.sin(p / 10000 ** (c / C)) if c % 2 == 0
                              else math.cos(p / 10000 ** ((c - 1) / C)) for c in range(C)]
                             for p in range(n)], dtype=torch.float64)

    def mlp(x, p):
        return lin(gelu(lin(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")

    e = w["wte.weight"][src] + pos(len(src), "encoder.wpe.weight")
    enc = []
    for i in range(cfg["L_enc"]):
        p = f"encoder.h.{i}."
        q, k, v = lin(ln(e, p + "ln_1"), p + "attn.c_attn").split(C, -1)
        y, a = heads(q, k, v, causal=False)
        e = e + lin(y, p + "attn.c_proj")
        e = e + mlp(e, p)
        enc.append(a)
    context = ln(e, "encoder.ln_f")
    x = w["wte.weight"][tgt] + pos(len(tgt), "wpe.weight")
    dec, cross = [], []
    for i in range(cfg["L_dec"]):
        p = f"h.{i}."
        q, k, v = lin(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, -1)
        y, a = heads(q, k, v, causal=True)
        x = x + lin(y, p + "attn.c_proj")
        dec.append(a)
        q = lin(ln(x, p + "ln_cross_attn"), p + "crossattention.q_attn")
        k, v = lin(context, p + "crossattention.c_attn").split(C, -1)
        y, a = heads(q, k, v, causal=False)
        x = x + lin(y, p + "crossattention.c_proj")
        cross.append(a)
        x = x + mlp(x, p)
    return ln(x, "ln_f") @ w["wte.weight"].T, enc, dec, cross


# ----------------------------------------------------------------------------- checks

def check_seq2seq_dir(d: str) -> str:
    """check_dir for an encoder–decoder tree (see the module docstring)."""
    cfg, weights = s2s.load_model(d)                    # strict: names, shapes, file layout
    golden = load_file(os.path.join(d, "golden.safetensors"))
    meta = load_metadata(os.path.join(d, "golden.safetensors"))
    assert "generator" in meta and "torch_version" in meta, f"{d}: metadata {meta}"

    H, V = cfg["H"], cfg["V"]
    src, tgt = golden["source_ids"], golden["target_ids"]
    src_len, tgt_len = golden["source_lengths"], golden["target_lengths"]
    (B, S), T = src.shape, tgt.shape[1]
    want = {"source_ids": (torch.int64, [B, S]), "source_lengths": (torch.int64, [B]),
            "target_ids": (torch.int64, [B, T]), "target_lengths": (torch.int64, [B]),
            "logits": (torch.float32, [B, T, V])}
    want.update({f"enc_attn.{l}": (torch.float32, [B, H, S, S]) for l in range(cfg["L_enc"])})
    want.update({f"dec_attn.{l}": (torch.float32, [B, H, T, T]) for l in range(cfg["L_dec"])})
    want.update({f"cross_attn.{l}": (torch.float32, [B, H, T, S]) for l in range(cfg["L_dec"])})
    got = {k: (t.dtype, list(t.shape)) for k, t in golden.items()}
    assert got == want, f"{d}: golden tensors {got}, expected {want}"
    assert B >= 2 and len(set(src_len.tolist())) == B, f"{d}: want sources of different lengths"
    assert int(src_len.max()) == S and int(tgt_len.max()) == T and int(src_len.min()) >= 1
    assert max(S, T) <= cfg["n_positions"] and 0 <= int(src.min()) and int(src.max()) < V
    real_src, real_tgt = s2s.key_mask(src_len, S), s2s.key_mask(tgt_len, T)
    assert not src.masked_fill(real_src, 0).any() and not tgt.masked_fill(real_tgt, 0).any(), \
        f"{d}: padding ids are not 0"

    # Per map kind: its layers, which rows and columns are real, causal or not.
    kinds = {"enc_attn": (cfg["L_enc"], real_src, real_src, False),
             "dec_attn": (cfg["L_dec"], real_tgt, real_tgt, True),
             "cross_attn": (cfg["L_dec"], real_tgt, real_src, False)}

    # 2. The reference reproduces the stored values (real rows; padded rows are stored 0).
    out = s2s.forward(cfg, weights, src, src_len, tgt)
    mine = {"logits": out.logits}
    for kind, layers in (("enc_attn", out.enc_attn), ("dec_attn", out.dec_attn),
                         ("cross_attn", out.cross_attn)):
        mine.update({f"{kind}.{l}": a for l, a in enumerate(layers)})
    d_logits = d_attn = 0.0
    for b in range(B):
        s, t = int(src_len[b]), int(tgt_len[b])
        d_logits = max(d_logits, (mine["logits"][b, :t].float() - golden["logits"][b, :t])
                       .abs().max().item())
        for kind, (L, real_q, _, _) in kinds.items():
            n = int(real_q[b].sum())
            for l in range(L):
                diff = mine[f"{kind}.{l}"][b, :, :n].float() - golden[f"{kind}.{l}"][b, :, :n]
                d_attn = max(d_attn, diff.abs().max().item())
    assert d_logits <= 1e-6 and d_attn <= 1e-7, f"{d}: reference moved: {d_logits}, {d_attn}"

    # 3. The independent, unbatched implementation agrees in float64, sequence by sequence.
    x_logits = x_attn = 0.0
    for b in range(B):
        s, t = int(src_len[b]), int(tgt_len[b])
        logits, enc, dec, cross = alt_seq2seq(cfg, weights, src[b, :s], tgt[b, :t])
        x_logits = max(x_logits, (logits - out.logits[b, :t]).abs().max().item())
        for mine_l, theirs, (q, k) in ((out.enc_attn, enc, (s, s)), (out.dec_attn, dec, (t, t)),
                                       (out.cross_attn, cross, (t, s))):
            for a, alt in zip(mine_l, theirs):
                x_attn = max(x_attn, (a[b, :, :q, :k] - alt).abs().max().item())
    assert x_logits <= 1e-10 and x_attn <= 1e-12, \
        f"{d}: second opinion differs: {x_logits}, {x_attn}"

    # 4. Stored maps: padded keys and padded rows exactly 0, real rows distributions, causal.
    worst_sum = 0.0
    for kind, (L, real_q, real_k, causal) in kinds.items():
        for l in range(L):
            a = golden[f"{kind}.{l}"]                                 # [B, H, q, k]
            name = f"{d}: {kind}.{l}"
            assert (a >= 0).all() and torch.isfinite(a).all(), f"{name} bad values"
            assert not a.masked_fill(real_k[:, None, None, :], 0).any(), f"{name}: padded key"
            assert not a.masked_fill(real_q[:, None, :, None], 0).any(), f"{name}: padded row"
            if causal:
                assert torch.equal(a.triu(1), torch.zeros_like(a)), f"{name} not causal"
            sums = a.double().sum(-1)[real_q[:, None, :].expand(a.shape[:3])]
            worst_sum = max(worst_sum, (sums - 1).abs().max().item())
    assert worst_sum <= 1e-6, f"{d}: attention rows sum to 1 +- {worst_sum}"
    assert torch.isfinite(golden["logits"]).all()
    assert not golden["logits"].masked_fill(real_tgt[:, :, None], 0).any(), f"{d}: padded logits"

    return (f"{os.path.basename(d):19s} ok  reference vs stored: logits {d_logits:.1g}, "
            f"attn {d_attn:.1g}; second opinion (unbatched) vs reference: logits "
            f"{x_logits:.1g}, attn {x_attn:.1g}; |row sum - 1| <= {worst_sum:.1g}; "
            f"padded keys exactly 0")


def is_encoder_decoder(d: str) -> bool:
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        return bool(json.load(f).get("is_encoder_decoder"))


def check_dir(d: str) -> str:
    """Runs all checks on one golden directory; returns a one-line summary."""
    cfg, weights = ref.load_model(d)                    # strict: names, shapes, file layout
    golden = load_file(os.path.join(d, "golden.safetensors"))
    meta = load_metadata(os.path.join(d, "golden.safetensors"))
    assert "generator" in meta and "torch_version" in meta, f"{d}: metadata {meta}"

    L, H, V = cfg["L"], cfg["H"], cfg["V"]
    ids = golden["input_ids"]
    T = len(ids)
    want = {"input_ids": (torch.int64, [T]), "logits": (torch.float32, [T, V]),
            "prompt_logprobs": (torch.float32, [T - 1])}
    want.update({f"attn.{l}": (torch.float32, [H, T, T]) for l in range(L)})
    got = {k: (t.dtype, list(t.shape)) for k, t in golden.items()}
    assert got == want, f"{d}: golden tensors {got}, expected {want}"
    assert T == 64 and 0 <= int(ids.min()) and int(ids.max()) < V

    # 2. The reference reproduces the stored values.
    logits, attn = ref.forward(cfg, weights, ids)
    d_logits = (logits.float() - golden["logits"]).abs().max().item()
    d_attn = max((a.float() - golden[f"attn.{l}"]).abs().max().item() for l, a in enumerate(attn))
    assert d_logits <= 1e-6 and d_attn <= 1e-7, f"{d}: reference moved: {d_logits}, {d_attn}"
    # prompt_logprobs is log_softmax of those logits at the next prompt token.
    scores = torch.log_softmax(logits, -1)[:-1].gather(1, ids[1:].unsqueeze(1)).squeeze(1)
    d_scores = (scores.float() - golden["prompt_logprobs"]).abs().max().item()
    assert d_scores <= 1e-6, f"{d}: prompt_logprobs moved: {d_scores}"

    # 3. The independent implementation agrees in float64.
    alt = alt_gpt2 if cfg["family"] == "gpt2" else alt_llama
    alt_logits, alt_attn = alt(cfg, weights, ids)
    x_logits = (alt_logits - logits).abs().max().item()
    x_attn = max((a - b).abs().max().item() for a, b in zip(alt_attn, attn))
    assert x_logits <= 1e-9 and x_attn <= 1e-11, f"{d}: second opinion differs: {x_logits}, {x_attn}"

    # 4. Stored attention is a causal distribution.
    worst_sum = 0.0
    for l in range(L):
        a = golden[f"attn.{l}"]
        assert torch.equal(a.triu(1), torch.zeros_like(a)), f"{d}: attn.{l} not causal"
        assert (a >= 0).all() and torch.isfinite(a).all(), f"{d}: attn.{l} bad values"
        worst_sum = max(worst_sum, (a.double().sum(-1) - 1).abs().max().item())
    assert worst_sum <= 1e-6, f"{d}: attention rows sum to 1 +- {worst_sum}"
    assert torch.isfinite(golden["logits"]).all()

    return (f"{os.path.basename(d):19s} ok  reference vs stored: logits {d_logits:.1g}, "
            f"attn {d_attn:.1g}; second opinion vs reference: logits {x_logits:.1g}, "
            f"attn {x_attn:.1g}; |row sum - 1| <= {worst_sum:.1g}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--golden", default="tests/golden", help="directory of golden cases")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # Same as make_golden.py, so the rerun is bit-identical.

    dirs = sorted(os.path.join(args.golden, n) for n in os.listdir(args.golden)
                  if os.path.isfile(os.path.join(args.golden, n, "golden.safetensors")))
    assert dirs, f"no golden directories under {args.golden}"
    for d in dirs:
        print(check_seq2seq_dir(d) if is_encoder_decoder(d) else check_dir(d))
    print(f"all {len(dirs)} golden directories OK")


if __name__ == "__main__":
    main()
