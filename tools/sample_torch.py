#!/usr/bin/env python3
"""Load an exported textgen char model with PyTorch and print continuations.

Reads only the exported directory (config.json + model.safetensors + char_vocab.json), so
it checks that the export round-trips: the greedy continuation must equal the one the
in-memory model produced at the end of training (metrics.json "greedy_check"), and with
--reference the logits are compared with an independent float64 NumPy implementation of
the model math documented in tools/train.py (the math the C++ decoder implements).

  /usr/bin/python3 tools/sample_torch.py --model_dir models/shakespeare-char \\
      --prompt "ROMEO:" --n 300 --temperature 0.8 --seed 1337 --check --reference
"""

import argparse
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import train  # noqa: E402  (tools/train.py: model, safetensors reader)


def reference_logits(tensors, cfg, ids):
    """Float64 NumPy forward pass of the documented math; returns [len(ids), vocab]."""
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    D, T = C // H, len(ids)
    t = {k: v.astype(np.float64) for k, v in tensors.items()}

    def ln(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg["layer_norm_epsilon"]) * w + b

    pos = np.arange(T, dtype=np.float64)[:, None]
    two_i = np.arange(0, C, 2, dtype=np.float64)[None, :]
    pe = np.zeros((T, C))
    pe[:, 0::2] = np.sin(pos / 10000.0 ** (two_i / C))
    pe[:, 1::2] = np.cos(pos / 10000.0 ** (two_i / C))
    x = t["wte.weight"][ids] + pe.astype(np.float32)
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(L):
        g = lambda name: t[f"h.{i}.{name}"]  # noqa: E731
        qkv = ln(x, g("ln_1.weight"), g("ln_1.bias")) @ g("attn.c_attn.weight") + g("attn.c_attn.bias")
        y = np.zeros((T, C))
        for h in range(H):
            q = qkv[:, h * D:(h + 1) * D]
            k = qkv[:, C + h * D:C + (h + 1) * D]
            v = qkv[:, 2 * C + h * D:2 * C + (h + 1) * D]
            s = q @ k.T / np.sqrt(D)
            s[future] = -np.inf
            s = np.exp(s - s.max(-1, keepdims=True))
            y[:, h * D:(h + 1) * D] = (s / s.sum(-1, keepdims=True)) @ v
        x = x + y @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
        f = ln(x, g("ln_2.weight"), g("ln_2.bias")) @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias")
        f = 0.5 * f * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
    x = ln(x, t["ln_f.weight"], t["ln_f.bias"])
    return x @ t["wte.weight"].T


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model_dir", default=train.DEFAULT_OUT)
    p.add_argument("--prompt", default="ROMEO:")
    p.add_argument("--n", type=int, default=300, help="characters to generate")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--check", action="store_true",
                   help="fail unless the greedy text equals metrics.json greedy_check")
    p.add_argument("--reference", action="store_true",
                   help="compare the prompt's logits with a float64 NumPy reference")
    args = p.parse_args()
    torch.set_num_threads(1)

    model, chars, meta = train.model_from_export(args.model_dir)
    model.set_fast_fp32(True)
    stoi = {c: i for i, c in enumerate(chars)}
    missing = sorted({c for c in args.prompt if c not in stoi})
    if missing:
        sys.exit(f"prompt has characters outside the vocabulary: {missing}")
    ids = [stoi[c] for c in args.prompt]
    print(f"model: {args.model_dir} ({model.num_params():,} params, vocab {len(chars)}, "
          f"context {model.cfg['block_size']}); metadata {meta}")

    ok = True
    if args.reference:
        tensors, _ = train.load_safetensors(os.path.join(args.model_dir, "model.safetensors"))
        with open(os.path.join(args.model_dir, "config.json")) as f:
            hc = json.load(f)
        probe = (ids * (model.cfg["block_size"] // len(ids) + 1))[:model.cfg["block_size"]]
        ref = reference_logits(tensors, hc, probe)
        with torch.no_grad():
            got = model(torch.tensor([probe]))[0].double().numpy()
        diff = float(np.abs(ref - got).max())
        print(f"reference check ({len(probe)} positions): max |torch fp32 - numpy fp64| logit "
              f"difference {diff:.2e}")
        ok &= diff < 1e-3

    greedy = "".join(chars[i] for i in model.generate(ids, args.n))
    print(f"--- greedy ({args.n} chars)\n{greedy}")
    gen = torch.Generator().manual_seed(args.seed)
    sampled = "".join(chars[i] for i in model.generate(ids, args.n, args.temperature, gen))
    print(f"--- sampled (temperature {args.temperature}, seed {args.seed})\n{sampled}")

    if args.check:
        with open(os.path.join(args.model_dir, "metrics.json"), encoding="utf-8") as f:
            gc = json.load(f)["greedy_check"]
        if gc["prompt"] == args.prompt and gc["n_new"] >= 1:
            mine = "".join(chars[i] for i in model.generate(ids, gc["n_new"])) \
                if gc["n_new"] != args.n else greedy
            same = mine == gc["text"]
            print(f"--- round trip: greedy from the exported file "
                  f"{'EQUALS' if same else 'DIFFERS FROM'} the in-memory model's "
                  f"({gc['n_new']} chars)")
            ok &= same
        else:
            print("--- round trip: metrics.json greedy_check uses another prompt; skipped")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
