#!/usr/bin/env python3
"""Train textgen's default character-level model and export it for the C++ loader.

The model is a GPT-2 style decoder with *sinusoidal* (fixed, not learned) positional
encoding, trained with PyTorch on the CPU on any UTF-8 text file (default: Tiny
Shakespeare).  Its math is spelled out exactly below because the C++ Eigen decoder
reproduces it bit for bit (up to float rounding):

  x = wte[ids] + PE[pos]
      PE[p, 2i]   = sin(p / 10000^(2i/C))
      PE[p, 2i+1] = cos(p / 10000^(2i/C))        (computed in float64, cast to float32;
                                                    wte is not scaled)
  for each of n_layer pre-LN blocks:
      x = x + attn(LN1(x))
      x = x + mlp(LN2(x))
  attn(h):  qkv = h @ W_attn + b_attn             (W_attn is [C, 3C]; q, k, v are columns
                                                   [:C], [C:2C], [2C:]; head j uses the
                                                   columns j*D:(j+1)*D of each, D = C/n_head)
            scores = q k^T / sqrt(D), causal mask, softmax, weighted sum of v,
            out = y @ W_proj + b_proj              (W_proj is [C, C])
  mlp(h):   gelu_tanh(h @ W_fc + b_fc) @ W_proj2 + b_proj2   ([C, 4C] and [4C, C])
            gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  x = LN_f(x)                                      (all LayerNorms: eps 1e-5, with bias)
  logits = x @ wte^T                               (tied LM head)

Dropout (embeddings and residual branches) is used during training only.

Validation loss definition (metrics.json "val_loss"; a C++ test reproduces it):
  The validation split is the last 10% of the file's characters (train = first
  floor(0.9 * n) characters).  Its ids are cut into consecutive non-overlapping windows
  of T+1 ids with stride T, T = n_positions: window k = ids[k*T : k*T+T+1].  The last
  window may be shorter; it is kept if it has at least 2 ids.  Each window is evaluated
  on its own, from an empty context, in eval mode (no dropout), in float32: the model
  reads window[:-1] and predicts window[1:].  The loss is the mean cross-entropy (natural
  log, nats/char) over all predicted positions of all windows, i.e. the sum of the
  per-position losses divided by the number of predictions (= len(val ids) - 1).

Training details: AdamW, linear warmup then cosine decay to min_lr.  The decay is sized
to the budget: progress = max(step / max_iters, elapsed / training-time budget), so with
--max_minutes the learning rate reaches its floor when the time runs out (with only
--max_iters the run is deterministic).  Matrix multiplies run in bfloat16 autocast
(oneDNN; about 100x faster than the float32 BLAS of this torch build); weights, the
optimizer, the residual stream, LayerNorm, softmax and the loss stay float32.  The final
validation loss and the export are float32.

Exported to --out:  config.json (Hugging Face GPT-2 keys), model.safetensors (HF GPT-2
tensor names, Conv1D [in, out] layout, no wpe), char_vocab.json, train_log.csv,
metrics.json.  A checkpoint (model, optimizer, step, RNG states, log) is written to
--work_dir regularly; --resume continues from it.

Example:
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 tools/train.py \\
      --max_minutes 80 --work_dir /tmp/textgen-train
"""

import argparse
import hashlib
import json
import math
import os
import platform
import random
import shlex
import signal
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The corpus lives beside the repository (../shared/data, see its SOURCES.md), never in it.
DEFAULT_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "tinyshakespeare.txt")
DEFAULT_OUT = os.path.join(REPO_ROOT, "models", "shakespeare-char")

# Hyperparameters that define the run; on --resume they come from the checkpoint.
RUN_KEYS = ("n_layer", "n_embd", "n_head", "block_size", "dropout", "batch_size", "lr",
            "min_lr", "warmup_iters", "weight_decay", "beta1", "beta2", "grad_clip",
            "seed", "bf16", "init_std", "wte_std", "embd_decay")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA, help="UTF-8 text file to train on")
    p.add_argument("--out", default=DEFAULT_OUT, help="export directory")
    p.add_argument("--work_dir", default="/tmp/textgen-train",
                   help="checkpoint directory (ckpt.pt, train_log.csv while training)")
    p.add_argument("--resume", action="store_true",
                   help="continue from WORK_DIR/ckpt.pt (model and optimizer settings come "
                        "from the checkpoint; --max_minutes/--max_iters from the command line)")
    # model
    p.add_argument("--n_layer", type=int, default=6)
    p.add_argument("--n_embd", type=int, default=192)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--block_size", type=int, default=256, help="context length (n_positions)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--init_std", type=float, default=0.02)
    p.add_argument("--wte_std", type=float, default=0.02,
                   help="init std of the token embedding (it is added, unscaled, to the unit-"
                        "amplitude sinusoidal table, and is also the tied output head)")
    # optimisation
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--min_lr", type=float, default=2e-4, help="learning-rate floor")
    p.add_argument("--warmup_iters", type=int, default=100)
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--embd_decay", type=int, default=1,
                   help="1: weight decay also on the token embedding (wte)")
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--bf16", type=int, default=1,
                   help="1: bfloat16 autocast for matmuls while training (fast on this CPU)")
    # budget
    p.add_argument("--max_iters", type=int, default=0, help="0 = no iteration limit")
    p.add_argument("--max_minutes", type=float, default=0.0,
                   help="wall-clock budget for the whole run incl. final eval and export; "
                        "0 = none")
    p.add_argument("--reserve_minutes", type=float, default=3.0,
                   help="part of --max_minutes kept for the final float32 eval and export")
    # logging / eval
    p.add_argument("--eval_interval", type=int, default=300,
                   help="iterations between loss evaluations and checkpoints")
    p.add_argument("--log_seconds", type=float, default=30.0,
                   help="seconds between progress lines")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--probe", type=int, default=0,
                   help="speed probe: time this many iterations, print it/s, exit")
    p.add_argument("--sample_prompt", default="ROMEO:")
    p.add_argument("--sample_chars", type=int, default=300)
    args = p.parse_args(argv)
    if args.max_iters <= 0 and args.max_minutes <= 0 and not args.probe:
        p.error("give --max_iters and/or --max_minutes")
    return args


# Run as a script: parse the command line first, because thread settings must be in the
# environment before torch (and its BLAS) load.  Imported (tools/sample_torch.py): no args.
ARGS = parse_args() if __name__ == "__main__" else None
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(ARGS.threads if ARGS else 1))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402  (tools/safetensors_io.py)

T_START = time.time()


# ----------------------------------------------------------------------------- model

def sinusoidal_table(n_positions, n_embd):
    """PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(...), float64 -> float32."""
    pos = np.arange(n_positions, dtype=np.float64)[:, None]
    two_i = np.arange(0, n_embd, 2, dtype=np.float64)[None, :]
    angle = pos / np.power(10000.0, two_i / n_embd)
    pe = np.zeros((n_positions, n_embd), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : n_embd // 2])
    return torch.from_numpy(pe.astype(np.float32))


class Linear(nn.Module):
    """y = x @ W^T + b with W stored [out, in] (exported transposed, as HF Conv1D [in, out]).

    In eval mode with `fast_fp32` the float32 product runs through oneDNN (mkldnn_linear),
    which is ~20x faster than this torch build's reference BLAS; the math is the same.
    """

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out))
        self._mkldnn = None

    def forward(self, x):
        if self._mkldnn is not None and x.dtype == torch.float32 and not torch.is_grad_enabled():
            w, b = self._mkldnn
            shape = x.shape
            y = torch._C._nn.mkldnn_linear(x.reshape(-1, shape[-1]).contiguous().to_mkldnn(), w, b)
            return y.to_dense().reshape(*shape[:-1], w.size(0))
        return F.linear(x, self.weight, self.bias)


class Block(nn.Module):
    def __init__(self, cfg, pool):
        super().__init__()
        C = cfg["n_embd"]
        self.n_head = cfg["n_head"]
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = Linear(C, 3 * C)
        self.c_proj = Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = Linear(C, 4 * C)
        self.mlp_proj = Linear(4 * C, C)
        self.drop = PoolDropout(cfg["dropout"], pool)  # on the residual branches
        T = cfg["block_size"]
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)),
                             persistent=False)
        self.register_buffer("neg_mask", torch.zeros(T, T).masked_fill(~self.mask, float("-inf")),
                             persistent=False)

    def attn(self, h):
        B, T, C = h.shape
        H = self.n_head
        D = C // H
        q, k, v = self.c_attn(h).split(C, dim=2)
        q = q.reshape(B, T, H, D).transpose(1, 2)  # [B, H, T, D]; head j = columns j*D:(j+1)*D
        k = k.reshape(B, T, H, D).transpose(1, 2)
        v = v.reshape(B, T, H, D).transpose(1, 2)
        if torch.is_autocast_cpu_enabled():
            # Training fast path: the same math in bfloat16 (scale folded into q, additive
            # mask), avoiding float32 copies of the [B, H, T, T] scores.
            scores = (q * (1.0 / math.sqrt(D))) @ k.transpose(-2, -1)
            att = torch.softmax(scores + self.neg_mask[:T, :T].to(scores.dtype), dim=-1)
        else:
            # Reference path (float32 eval/export): scores / sqrt(D), causal mask, softmax.
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
            scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
            att = torch.softmax(scores, dim=-1)
        y = (att.to(v.dtype) @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)

    def mlp(self, h):
        a = self.c_fc(h)
        # GELU (tanh form) in float32: this torch's bfloat16 GELU kernels are slower.
        return self.mlp_proj(F.gelu(a.float(), approximate="tanh"))

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln_1(x)))
        x = x + self.drop(self.mlp(self.ln_2(x)))
        return x


class PoolDropout(nn.Module):
    """Inverted dropout whose masks are random windows of a pre-drawn mask pool.

    torch's bernoulli is ~15x slower than a multiply on this CPU; slicing a shared pool
    of pre-drawn Bernoulli masks at a random offset is nearly free.  Identity in eval mode.
    """

    def __init__(self, p, pool):
        super().__init__()
        self.p = p
        self.pool = pool  # shared dict {"mask": float32 tensor of 0 and 1/(1-p)}

    def forward(self, x):
        if not self.training or self.p <= 0:
            return x
        n = x.numel()
        mask = self.pool.get("mask")
        if mask is None or mask.numel() < 2 * n:
            size = max(2 * n, 1 << 24)
            # Own generator: the pool does not depend on (or advance) the global RNG, so a
            # resumed run draws the same masks as an uninterrupted one.
            keep = torch.rand(size, generator=torch.Generator().manual_seed(20240601)) >= self.p
            mask = keep.float() / (1.0 - self.p)
            self.pool["mask"] = mask
        off = int(torch.randint(0, mask.numel() - n + 1, (1,)))
        return x * mask[off:off + n].view(x.shape).to(x.dtype)


class CharGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        C, L = cfg["n_embd"], cfg["n_layer"]
        assert C % cfg["n_head"] == 0 and C % 2 == 0
        self.wte = nn.Embedding(cfg["vocab_size"], C)
        self.register_buffer("pe", sinusoidal_table(cfg["block_size"], C), persistent=False)
        pool = {}
        self.drop = PoolDropout(cfg["dropout"], pool)  # on the embeddings
        self.h = nn.ModuleList([Block(cfg, pool) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        std = cfg.get("init_std", 0.02)
        for name, p in self.named_parameters():
            if name.endswith(".weight") and p.dim() == 2:
                s = std / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else std
                if name == "wte.weight":
                    s = cfg.get("wte_std", std)
                nn.init.normal_(p, 0.0, s)
        # The head is tied (logits = ln_f(x) @ wte^T): start ln_f's gain so that the initial
        # logits have about unit spread whatever the embedding scale (gain = 1 when
        # wte_std * sqrt(C) <= 1, i.e. for the GPT-2 default 0.02 at these widths).
        nn.init.constant_(self.ln_f.weight, min(1.0, 1.0 / (cfg.get("wte_std", std) * math.sqrt(C))))

    def forward(self, idx, targets=None, reduction="mean"):
        T = idx.size(1)
        assert T <= self.cfg["block_size"]
        x = self.drop(self.wte(idx) + self.pe[:T])
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight).float()
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                               reduction=reduction)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def set_fast_fp32(self, on):
        """Route float32 no-grad Linear layers through oneDNN (eval/generation only)."""
        for m in self.modules():
            if isinstance(m, Linear):
                m._mkldnn = ((m.weight.detach().contiguous().to_mkldnn(),
                              m.bias.detach().contiguous().to_mkldnn()) if on else None)

    @torch.no_grad()
    def generate(self, ids, n_new, temperature=0.0, generator=None):
        """Greedy (temperature 0) or sampled continuation, float32, context cropped to T."""
        ids = list(ids)
        T = self.cfg["block_size"]
        for _ in range(n_new):
            ctx = torch.tensor([ids[-T:]], dtype=torch.long)
            logits = self(ctx)[0, -1].double()
            if temperature <= 0:
                nxt = int(torch.argmax(logits))
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                nxt = int(torch.multinomial(probs, 1, generator=generator))
            ids.append(nxt)
        return ids


# ------------------------------------------------------------------ export formats

HF_NAMES = (("ln_1.weight", "ln_1.weight", False), ("ln_1.bias", "ln_1.bias", False),
            ("c_attn.weight", "attn.c_attn.weight", True), ("c_attn.bias", "attn.c_attn.bias", False),
            ("c_proj.weight", "attn.c_proj.weight", True), ("c_proj.bias", "attn.c_proj.bias", False),
            ("ln_2.weight", "ln_2.weight", False), ("ln_2.bias", "ln_2.bias", False),
            ("c_fc.weight", "mlp.c_fc.weight", True), ("c_fc.bias", "mlp.c_fc.bias", False),
            ("mlp_proj.weight", "mlp.c_proj.weight", True), ("mlp_proj.bias", "mlp.c_proj.bias", False))


def to_hf_tensors(model):
    """HF GPT-2 names, Conv1D layout [in, out] for the projections, float32 numpy."""
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    out = {"wte.weight": sd["wte.weight"]}
    for i in range(model.cfg["n_layer"]):
        for ours, hf, transpose in HF_NAMES:
            t = sd[f"h.{i}.{ours}"]
            out[f"h.{i}.{hf}"] = t.t() if transpose else t
    out["ln_f.weight"] = sd["ln_f.weight"]
    out["ln_f.bias"] = sd["ln_f.bias"]
    return {k: np.ascontiguousarray(v.numpy()) for k, v in out.items()}


def from_hf_tensors(tensors, model):
    """Inverse of to_hf_tensors: loads HF-named arrays into a CharGPT."""
    sd = {"wte.weight": tensors["wte.weight"], "ln_f.weight": tensors["ln_f.weight"],
          "ln_f.bias": tensors["ln_f.bias"]}
    for i in range(model.cfg["n_layer"]):
        for ours, hf, transpose in HF_NAMES:
            a = tensors[f"h.{i}.{hf}"]
            sd[f"h.{i}.{ours}"] = a.T if transpose else a
    sd = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in sd.items()}
    model.load_state_dict(sd, strict=True)
    return model


def save_safetensors(tensors, path, metadata=None):
    """Writes float numpy arrays (name -> array) with tools/safetensors_io.py."""
    safetensors_io.save_file({k: torch.from_numpy(np.ascontiguousarray(v))
                              for k, v in tensors.items()}, path, metadata)


def load_safetensors(path):
    """Reads a model export into float32 numpy arrays, plus its metadata."""
    tensors = safetensors_io.load_file(path)
    return ({k: v.float().numpy() for k, v in tensors.items()},
            safetensors_io.load_metadata(path))


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def hf_config(cfg):
    C = cfg["n_embd"]
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": cfg["vocab_size"],
        "n_positions": cfg["block_size"],
        "n_embd": C,
        "n_layer": cfg["n_layer"],
        "n_head": cfg["n_head"],
        "n_inner": 4 * C,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
        "position_embedding_type": "sinusoidal",
    }


def model_from_export(directory):
    """Builds a float32 CharGPT from an exported directory; returns (model, chars, meta)."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
        hc = json.load(f)
    with open(os.path.join(directory, "char_vocab.json"), encoding="utf-8") as f:
        chars = json.load(f)["chars"]
    assert hc.get("position_embedding_type") == "sinusoidal"
    cfg = {"vocab_size": hc["vocab_size"], "block_size": hc["n_positions"],
           "n_embd": hc["n_embd"], "n_layer": hc["n_layer"], "n_head": hc["n_head"],
           "dropout": 0.0}
    assert len(chars) == cfg["vocab_size"]
    tensors, meta = load_safetensors(os.path.join(directory, "model.safetensors"))
    model = from_hf_tensors(tensors, CharGPT(cfg)).eval()
    return model, chars, meta


# --------------------------------------------------------------------------- data

def load_text(path):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    dtype = np.uint16 if len(chars) < 65536 else np.int32
    ids = np.fromiter((stoi[c] for c in text), dtype=dtype, count=len(text))
    n_train = int(0.9 * len(ids))
    return {"path": os.path.abspath(path), "bytes": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest(), "chars": chars,
            "train": torch.from_numpy(ids[:n_train].astype(np.int64)),
            "val": torch.from_numpy(ids[n_train:].astype(np.int64))}


def eval_windows(ids, T):
    """Windows of the validation definition: ids[k*T : k*T+T+1], last kept if >= 2 ids."""
    n = len(ids)
    return [(s, min(s + T + 1, n)) for s in range(0, n - 1, T)]


@torch.no_grad()
def windowed_loss(model, ids, T, batch=32, bf16=False):
    """Mean cross-entropy (nats/char) under the documented validation definition."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    wins = eval_windows(ids, T)
    full = [w for w in wins if w[1] - w[0] == T + 1]
    short = [w for w in wins if w[1] - w[0] != T + 1]
    groups = [full[i:i + batch] for i in range(0, len(full), batch)] + [[w] for w in short]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for g in groups:
            x = torch.stack([ids[s:e - 1] for s, e in g])
            y = torch.stack([ids[s + 1:e] for s, e in g])
            total += float(model(x, y, reduction="sum").double())
            count += y.numel()
    model.train(was_training)
    return total / count, count


# ------------------------------------------------------------------------ helpers

def cpu_model_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def command_line():
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
                   if k in os.environ)
    cmd = shlex.join([sys.executable] + [os.path.relpath(sys.argv[0], REPO_ROOT)
                                          if os.path.abspath(sys.argv[0]).startswith(REPO_ROOT)
                                          else sys.argv[0]] + sys.argv[1:])
    return (env + " " + cmd).strip()


def fmt_time(s):
    s = int(max(0, s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def lr_at(step, progress, hp):
    """Linear warmup over warmup_iters, then cosine from lr to min_lr over progress 0..1."""
    p = min(max(progress, 0.0), 1.0)
    lr = hp["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * p)) * (hp["lr"] - hp["min_lr"])
    if step < hp["warmup_iters"]:
        lr *= (step + 1) / hp["warmup_iters"]
    return lr


def write_log_csv(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("step,elapsed_s,train_loss,val_loss,lr\n")
        for r in rows:
            f.write(f"{r['step']},{r['elapsed_s']:.1f},{r['train_loss']:.5f},"
                    f"{r['val_loss']:.5f},{r['lr']:.6g}\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- main

def main(args):
    torch.set_num_threads(args.threads)
    os.makedirs(args.work_dir, exist_ok=True)
    ckpt_path = os.path.join(args.work_dir, "ckpt.pt")

    data = load_text(args.data)
    chars = data["chars"]
    print(f"data: {data['path']}  {data['bytes']:,} bytes, {len(data['train']) + len(data['val']):,} "
          f"chars, vocab {len(chars)}; train {len(data['train']):,} / val {len(data['val']):,}",
          flush=True)

    ckpt = None
    if args.resume:
        ckpt = torch.load(ckpt_path, map_location="cpu")
        if ckpt["data_sha256"] != data["sha256"]:
            sys.exit(f"{ckpt_path} was trained on different data ({ckpt['data_path']})")
        hp = ckpt["hp"]
        print(f"resuming from {ckpt_path} at step {ckpt['step']} "
              f"({fmt_time(ckpt['elapsed'])} trained)", flush=True)
    else:
        hp = {k: getattr(args, k) for k in RUN_KEYS}

    random.seed(hp["seed"])
    np.random.seed(hp["seed"])
    torch.manual_seed(hp["seed"])
    cfg = {"vocab_size": len(chars), "block_size": hp["block_size"], "n_embd": hp["n_embd"],
           "n_layer": hp["n_layer"], "n_head": hp["n_head"], "dropout": hp["dropout"],
           "init_std": hp["init_std"], "wte_std": hp.get("wte_std", hp["init_std"])}
    model = CharGPT(cfg)
    n_params = model.num_params()
    # Weight decay on matrices (projections and, unless --embd_decay 0, the token
    # embedding); never on biases or LayerNorm gains.
    def decayed(n, p):
        return p.dim() >= 2 and (n != "wte.weight" or hp.get("embd_decay", 1))
    decay = [p for n, p in model.named_parameters() if decayed(n, p)]
    no_decay = [p for n, p in model.named_parameters() if not decayed(n, p)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), foreach=True)
    batch_gen = torch.Generator().manual_seed(hp["seed"] + 1)
    T, B = hp["block_size"], hp["batch_size"]
    print(f"model: {cfg['n_layer']} layers x {cfg['n_embd']} wide, {cfg['n_head']} heads, "
          f"context {T}, {n_params:,} params ({4 * n_params / 2**20:.2f} MiB as F32); "
          f"batch {B}, lr {hp['lr']:g}->{hp['min_lr']:g}, dropout {hp['dropout']}, "
          f"bf16 {bool(hp['bf16'])}, threads {args.threads}", flush=True)

    # Fixed evaluation subset of the training split (a quarter of the val size, contiguous,
    # seeded offset) for the train-loss column of the log; same windowing as val.
    n_te = max(len(data["val"]) // 4, T + 1)
    g_eval = torch.Generator().manual_seed(hp["seed"] + 2)
    offs = int(torch.randint(0, max(len(data["train"]) - n_te, 1), (1,), generator=g_eval))
    train_eval_ids = data["train"][offs:offs + n_te]

    step, elapsed_prev, log_rows, commands = 0, 0.0, [], []
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step, elapsed_prev = ckpt["step"], ckpt["elapsed"]
        log_rows, commands = ckpt["log_rows"], ckpt["commands"]
        torch.set_rng_state(ckpt["rng"]["torch"])
        np.random.set_state(ckpt["rng"]["numpy"])
        random.setstate(ckpt["rng"]["python"])
        batch_gen.set_state(ckpt["rng"]["batch"])
        del ckpt
    commands.append(command_line())

    train = data["train"]
    offsets = torch.arange(T + 1)

    def get_batch():
        ix = torch.randint(0, len(train) - T, (B,), generator=batch_gen)
        w = train[ix[:, None] + offsets]
        return w[:, :-1], w[:, 1:]

    def train_step(lr):
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(hp["bf16"])):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if hp["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), hp["grad_clip"])
        opt.step()
        return float(loss)

    if args.probe:
        model.train()
        for _ in range(3):
            train_step(hp["lr"])
        t0 = time.time()
        for _ in range(args.probe):
            train_step(hp["lr"])
        dt = (time.time() - t0) / args.probe
        t0 = time.time()
        vb, _ = windowed_loss(model, data["val"], T, bf16=bool(hp["bf16"]))
        t_eval = time.time() - t0
        model.set_fast_fp32(True)
        t0 = time.time()
        vf, _ = windowed_loss(model, data["val"], T, bf16=False)
        t_f32 = time.time() - t0
        print(f"PROBE {cfg['n_layer']}x{cfg['n_embd']} h{cfg['n_head']} T{T} B{B}: "
              f"{n_params:,} params, {1 / dt:.3f} it/s ({dt:.3f} s/it, "
              f"{B * T / dt:,.0f} tok/s); full val eval bf16 {t_eval:.1f}s, fp32 {t_f32:.1f}s "
              f"(val {vb:.3f}/{vf:.3f})", flush=True)
        return

    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    budget = args.max_minutes * 60.0
    train_budget = max(budget - args.reserve_minutes * 60.0, 1.0) if budget > 0 else 0.0
    session_start = T_START

    def elapsed():
        return elapsed_prev + (time.time() - session_start)

    def progress(s):
        p = 0.0
        if args.max_iters > 0:
            p = max(p, s / args.max_iters)
        if train_budget > 0:
            p = max(p, elapsed() / train_budget)
        return p

    def save_ckpt():
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                    "elapsed": elapsed(), "hp": hp, "cfg": cfg, "log_rows": log_rows,
                    "commands": commands, "data_path": data["path"],
                    "data_sha256": data["sha256"], "chars": chars,
                    "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                            "python": random.getstate(), "batch": batch_gen.get_state()}}, tmp)
        os.replace(tmp, ckpt_path)

    def evaluate():
        t0 = time.time()
        bf16 = bool(hp["bf16"])
        tl, _ = windowed_loss(model, train_eval_ids, T, bf16=bf16)
        vl, _ = windowed_loss(model, data["val"], T, bf16=bf16)
        row = {"step": step, "elapsed_s": elapsed(), "train_loss": tl, "val_loss": vl,
               "lr": lr_at(step, progress(step), hp)}
        log_rows.append(row)
        write_log_csv(os.path.join(args.work_dir, "train_log.csv"), log_rows)
        print(f"eval  step {step:6d} | train {tl:.4f} | val {vl:.4f} | "
              f"elapsed {fmt_time(row['elapsed_s'])} | eval took {time.time() - t0:.1f}s",
              flush=True)
        return row

    def done(s):
        if args.max_iters > 0 and s >= args.max_iters:
            return True
        return train_budget > 0 and elapsed() >= train_budget

    model.train()
    if not log_rows:
        evaluate()
    last_log_t, last_log_step, run_loss, run_n = time.time(), step, 0.0, 0
    session_steps, session_t0 = 0, time.time()
    last_val = log_rows[-1]["val_loss"] if log_rows else float("nan")
    while not done(step) and stop["signal"] is None:
        lr = lr_at(step, progress(step), hp)
        loss = train_step(lr)
        if not math.isfinite(loss):
            sys.exit(f"loss became {loss} at step {step}")
        step += 1
        session_steps += 1
        run_loss += loss
        run_n += 1
        now = time.time()
        if step % args.eval_interval == 0:
            last_val = evaluate()["val_loss"]
            save_ckpt()
        if now - last_log_t >= args.log_seconds or step == 1:
            its = (step - last_log_step) / max(now - last_log_t, 1e-9)
            avg_its = session_steps / max(now - session_t0, 1e-9)
            rem = []
            if train_budget > 0:
                rem.append(train_budget - elapsed())
            if args.max_iters > 0:
                rem.append((args.max_iters - step) / max(avg_its, 1e-9))
            eta = min(rem) + (args.reserve_minutes * 60 if train_budget > 0 else 0)
            est_total = step + int(min(rem) * avg_its)
            print(f"iter {step:6d}/~{est_total} | train {run_loss / run_n:.4f} | "
                  f"val {last_val:.4f} | lr {lr:.2e} | {its:.2f} it/s | "
                  f"elapsed {fmt_time(elapsed())} | ETA {fmt_time(eta)}", flush=True)
            last_log_t, last_log_step, run_loss, run_n = now, step, 0.0, 0

    if stop["signal"] is not None:
        save_ckpt()
        print(f"stopped by signal {stop['signal']} at step {step}; checkpoint saved to "
              f"{ckpt_path}; continue with --resume", flush=True)
        sys.exit(130)

    if not log_rows or log_rows[-1]["step"] != step:
        evaluate()
    save_ckpt()
    train_elapsed = elapsed()

    # ---- final float32 evaluation over the whole validation split, then export.
    model.eval()
    model.set_fast_fp32(True)
    t0 = time.time()
    val_loss, n_pred = windowed_loss(model, data["val"], T, bf16=False)
    t_eval = time.time() - t0
    print(f"final val loss (float32, full split, {n_pred:,} predictions): {val_loss:.4f} "
          f"nats/char = {val_loss / math.log(2):.4f} bits/char ({t_eval:.1f}s)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    tensors = to_hf_tensors(model)
    f32_bytes = sum(a.nbytes for a in tensors.values())
    dtype = "F32" if f32_bytes + 64 * 1024 <= 20 * 2**20 else "F16"
    if dtype == "F16":
        tensors = {k: v.astype(np.float16) for k, v in tensors.items()}
    st_meta = {"format": "pt", "producer": "textgen tools/train.py",
               "position_embedding_type": "sinusoidal", "vocab": "char_vocab.json",
               "val_loss": f"{val_loss:.6f}", "steps": str(step)}
    st_path = os.path.join(args.out, "model.safetensors")
    save_safetensors(tensors, st_path, st_meta)
    write_json(os.path.join(args.out, "config.json"), hf_config(cfg))
    write_json(os.path.join(args.out, "char_vocab.json"), {"type": "char", "chars": chars})
    write_log_csv(os.path.join(args.out, "train_log.csv"), log_rows)

    # Round trip: reload the export, and record the greedy continuation for sample_torch.py.
    reloaded, _, _ = model_from_export(args.out)
    for k, v in reloaded.state_dict().items():
        ref = model.state_dict()[k].float()
        tol = 0 if dtype == "F32" else 1e-2
        assert torch.allclose(v, ref, atol=tol, rtol=tol), f"export mismatch in {k}"
    stoi = {c: i for i, c in enumerate(chars)}
    prompt = args.sample_prompt if all(c in stoi for c in args.sample_prompt) else chars[0]
    prompt_ids = [stoi[c] for c in prompt]
    greedy = model.generate(prompt_ids, args.sample_chars)
    greedy_text = "".join(chars[i] for i in greedy)
    print(f"greedy continuation of {prompt!r}:\n{greedy_text}\n", flush=True)

    metrics = {
        "val_loss": round(val_loss, 6),
        "val_loss_units": "nats/char",
        "val_bits_per_char": round(val_loss / math.log(2), 6),
        "val_loss_definition": ("mean float32 cross-entropy over windows ids[k*T:k*T+T+1] of the "
                                "validation split (stride T = n_positions, last window kept if "
                                ">= 2 ids), each from an empty context, eval mode"),
        "val_predictions": n_pred,
        "train_loss_estimate": round(log_rows[-1]["train_loss"], 6),
        "val_loss_last_bf16_eval": round(log_rows[-1]["val_loss"], 6),
        "best_val_loss_during_training_bf16": round(min(r["val_loss"] for r in log_rows), 6),
        "params": n_params,
        "iterations": step,
        "tokens_seen": step * B * T,
        "epochs": round(step * B * T / len(data["train"]), 3),
        "train_time_s": round(train_elapsed, 1),
        "wall_time_s": round(elapsed(), 1),
        "final_eval_time_s": round(t_eval, 1),
        "safetensors_dtype": dtype,
        "safetensors_bytes": os.path.getsize(st_path),
        "hardware": {"cpu": cpu_model_name(), "cores_used": args.threads,
                     "cores_available": os.cpu_count(),
                     "matmul_precision_training": "bfloat16 autocast (oneDNN)" if hp["bf16"]
                     else "float32"},
        "software": {"torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "data": {"path": data["path"], "bytes": data["bytes"], "sha256": data["sha256"],
                 "chars": len(data["train"]) + len(data["val"]), "vocab_size": len(chars),
                 "train_chars": len(data["train"]), "val_chars": len(data["val"])},
        "model": hf_config(cfg),
        "hyperparameters": hp,
        "budget": {"max_iters": args.max_iters, "max_minutes": args.max_minutes,
                   "reserve_minutes": args.reserve_minutes},
        "command": commands[0] if len(commands) == 1 else commands,
        "greedy_check": {"prompt": prompt, "n_new": args.sample_chars, "text": greedy_text},
    }
    write_json(os.path.join(args.out, "metrics.json"), metrics)
    for name in sorted(os.listdir(args.out)):
        print(f"  {os.path.join(args.out, name)}  {os.path.getsize(os.path.join(args.out, name)):,} bytes")
    print(f"done: {step} iterations, val {val_loss:.4f}, wall {fmt_time(metrics['wall_time_s'])}",
          flush=True)


if __name__ == "__main__":
    main(ARGS)
