#!/usr/bin/env python3
"""PyTorch eager reference for bench/model_bench.cc: the same shapes on the same weights.

    /usr/bin/python3 bench/torch_reference.py --models models/shakespeare-char,DIR --threads 1

For each checkpoint (config.json + model.safetensors, GPT-2 family, learned or sinusoidal
positions; BF16/F16 weights are widened to F32, as the C++ loader does) it times, under
torch.inference_mode with a preallocated KV cache, the shapes textgen_model_bench times:

    decode/<model>/batch:B        one decode step of B = 1, 8, 32 sequences, each with
                                  --decode_context positions cached
    prefill/<model>/tokens:T      a prompt of T = 128, 512 tokens (clipped to the context)
    full_context/<model>/cache:C  one decode step of one sequence with C - 1 positions cached

in two configurations:

    linear   nn.Linear projections (the usual eager model), batched attention
    mv       batch-1 rows through torch.mv (addmv with the bias): the strongest eager
             decode here, because Debian's torch sends a single row through BLAS's
             matrix-matrix routine (sgemm at ~2-3 GFLOP/s) while sgemv streams the weights.
             Batch-1 shapes only (decode batch 1 and full_context).

One line per measurement, key=value, median of --repetitions:

    torch config=linear model=gpt2-small threads=1 bench=decode/gpt2-small/batch:1 \
        ms=... tokens_per_s=...

Environment (set here before torch loads, as the issue prescribes): OPENBLAS_CORETYPE is
removed so that OpenBLAS picks its AVX-512 kernels; with 2+ threads OMP_WAIT_POLICY=PASSIVE
(spinning OpenMP workers otherwise steal the core the main thread needs). The BLAS behind
torch is whatever libblas.so.3 points to; scripts/setup.sh installs OpenBLAS for it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=os.path.join(REPO, "models", "shakespeare-char"),
                   help="comma-separated checkpoint directories")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--configs", default="linear,mv")
    p.add_argument("--decode_context", type=int, default=128)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--min_time", type=float, default=0.5,
                   help="seconds each repetition runs at least")
    p.add_argument("--filter", default="", help="run only benchmarks whose name contains this")
    return p.parse_args()


ARGS = parse_args()
if ARGS.threads < 1:
    sys.exit("torch_reference: --threads must be >= 1")
# Before torch (and its OpenMP and BLAS) load.
os.environ.pop("OPENBLAS_CORETYPE", None)
if ARGS.threads >= 2:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tools"))
from safetensors_io import load_file  # noqa: E402


class Gpt2:
    """GPT-2 (pre-LayerNorm, fused QKV, GELU tanh, tied head) with a KV cache of
    [slots, heads, context, head_dim] per layer and per K/V."""

    def __init__(self, directory: str, slots: int):
        with open(os.path.join(directory, "config.json")) as f:
            cfg = json.load(f)
        if cfg.get("model_type") != "gpt2":
            raise SystemExit(f"{directory}: only GPT-2-family checkpoints are supported here")
        self.C = cfg["n_embd"]
        self.H = cfg["n_head"]
        self.D = self.C // self.H
        self.L = cfg["n_layer"]
        self.ctx = cfg["n_positions"]
        self.vocab = cfg["vocab_size"]
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        w = {k: v.float() for k, v in load_file(os.path.join(directory, "model.safetensors")).items()}
        self.wte = w["wte.weight"].contiguous()                        # [V, C]
        if cfg.get("position_embedding_type", "learned") == "sinusoidal":
            p = torch.arange(self.ctx, dtype=torch.float64)[:, None]
            two_i = torch.arange(0, self.C, 2, dtype=torch.float64)[None, :]
            angle = p / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / self.C)
            pe = torch.zeros(self.ctx, self.C, dtype=torch.float64)
            pe[:, 0::2] = torch.sin(angle)
            pe[:, 1::2] = torch.cos(angle)
            self.wpe = pe.float()
        else:
            self.wpe = w["wpe.weight"].contiguous()
        self.layers = []
        for i in range(self.L):
            h = f"h.{i}."

            def linear(name: str) -> torch.nn.Linear:
                W = w[h + name + ".weight"]                            # Conv1D: [in, out]
                lin = torch.nn.Linear(W.shape[0], W.shape[1])
                lin.weight = torch.nn.Parameter(W.t().contiguous(), requires_grad=False)
                lin.bias = torch.nn.Parameter(w[h + name + ".bias"].clone(), requires_grad=False)
                return lin

            self.layers.append({
                "ln_1": (w[h + "ln_1.weight"], w[h + "ln_1.bias"]),
                "ln_2": (w[h + "ln_2.weight"], w[h + "ln_2.bias"]),
                "c_attn": linear("attn.c_attn"),
                "attn_proj": linear("attn.c_proj"),
                "c_fc": linear("mlp.c_fc"),
                "mlp_proj": linear("mlp.c_proj"),
            })
        self.ln_f = (w["ln_f.weight"], w["ln_f.bias"])
        self.head = torch.nn.Linear(self.C, self.vocab, bias=False)
        self.head.weight = torch.nn.Parameter(self.wte, requires_grad=False)
        self.k = [torch.zeros(slots, self.H, self.ctx, self.D) for _ in range(self.L)]
        self.v = [torch.zeros(slots, self.H, self.ctx, self.D) for _ in range(self.L)]

    def ln(self, x, p):
        return F.layer_norm(x, (self.C,), p[0], p[1], self.eps)

    def _project(self, lin, x, use_mv: bool):
        if use_mv:  # x is [1, 1, C]: one row through sgemv.
            return torch.addmv(lin.bias, lin.weight, x.reshape(-1)).reshape(1, 1, -1)
        return lin(x)

    def forward(self, ids: torch.Tensor, start: int, use_mv: bool = False) -> torch.Tensor:
        """ids [B, T] at positions start .. start+T-1 of slots 0 .. B-1 → last-row logits [B, V]."""
        B, T = ids.shape
        x = self.wte[ids] + self.wpe[start:start + T]
        end = start + T
        mask = None
        if T > 1:
            q_pos = torch.arange(start, end)[:, None]
            k_pos = torch.arange(end)[None, :]
            mask = torch.where(k_pos <= q_pos, 0.0, float("-inf"))
        for i, lw in enumerate(self.layers):
            a = self.ln(x, lw["ln_1"])
            qkv = self._project(lw["c_attn"], a, use_mv)                   # [B, T, 3C]
            q, k, v = qkv.split(self.C, dim=2)
            q = q.view(B, T, self.H, self.D).transpose(1, 2)               # [B, H, T, D]
            self.k[i][:B, :, start:end] = k.view(B, T, self.H, self.D).transpose(1, 2)
            self.v[i][:B, :, start:end] = v.view(B, T, self.H, self.D).transpose(1, 2)
            K = self.k[i][:B, :, :end]
            V = self.v[i][:B, :, :end]
            s = (q @ K.transpose(-1, -2)) * (1.0 / math.sqrt(self.D))      # [B, H, T, end]
            if mask is not None:
                s = s + mask
            o = (torch.softmax(s, dim=-1) @ V).transpose(1, 2).reshape(B, T, self.C)
            x = x + self._project(lw["attn_proj"], o, use_mv)
            m = self.ln(x, lw["ln_2"])
            m = F.gelu(self._project(lw["c_fc"], m, use_mv), approximate="tanh")
            x = x + self._project(lw["mlp_proj"], m, use_mv)
        last = self.ln(x[:, -1], self.ln_f)                                 # [B, C]
        if use_mv:
            return torch.mv(self.wte, last.reshape(-1)).reshape(1, -1)
        return self.head(last)


def ids_for(n: int, vocab: int, salt: int) -> torch.Tensor:
    return torch.tensor([(7919 * (i + 1) + 104729 * salt) % vocab for i in range(n)])


def time_it(fn, tokens_per_call: int) -> tuple[float, float]:
    """Median over repetitions of (ms per call, tokens/s)."""
    fn()  # Warm-up.
    per_call = []
    for _ in range(ARGS.repetitions):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= ARGS.min_time:
                break
        per_call.append(elapsed / n)
    s = statistics.median(per_call)
    return s * 1e3, tokens_per_call / s


def report(config: str, model: str, bench: str, ms: float, tps: float) -> None:
    print(f"torch config={config} model={model} threads={ARGS.threads} bench={bench} "
          f"ms={ms:.3f} tokens_per_s={tps:.1f}", flush=True)


def run_model(directory: str) -> None:
    name = os.path.basename(os.path.normpath(directory))
    m = Gpt2(directory, slots=32)
    dc = min(ARGS.decode_context, m.ctx - 1)
    configs = [c for c in ARGS.configs.split(",") if c]

    def wanted(bench: str) -> bool:
        return ARGS.filter in bench

    def decode(batch: int, context: int, use_mv: bool):
        for b in range(batch):  # Fill each slot's cache with `context` positions.
            m.forward(ids_for(context, m.vocab, b)[None, :], 0)
        nxt = ids_for(batch, m.vocab, 99)[:, None]
        return lambda: m.forward(nxt, context, use_mv)

    for config in configs:
        use_mv = config == "mv"
        if config not in ("linear", "mv"):
            sys.exit(f"torch_reference: unknown config {config!r} (linear, mv)")
        for batch in (1, 8, 32):
            bench = f"decode/{name}/batch:{batch}"
            if use_mv and batch > 1 or not wanted(bench):
                continue
            ms, tps = time_it(decode(batch, dc, use_mv), batch)
            report(config, name, bench, ms, tps)
        if not use_mv:
            for tokens in sorted({min(128, m.ctx), min(512, m.ctx)}):
                bench = f"prefill/{name}/tokens:{tokens}"
                if not wanted(bench):
                    continue
                ids = ids_for(tokens, m.vocab, 7)[None, :]
                ms, tps = time_it(lambda: m.forward(ids, 0), tokens)
                report(config, name, bench, ms, tps)
        bench = f"full_context/{name}/cache:{m.ctx}"
        if wanted(bench):
            ms, tps = time_it(decode(1, m.ctx - 1, use_mv), 1)
            report(config, name, bench, ms, tps)


def main() -> int:
    torch.set_num_threads(ARGS.threads)
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}", file=sys.stderr)
    with torch.inference_mode():
        for directory in [d for d in ARGS.models.split(",") if d]:
            run_model(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
