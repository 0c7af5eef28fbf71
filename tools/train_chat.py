#!/usr/bin/env python3
"""Train models/chat-instruct/: a small Llama-shaped instruct model that answers calendar
questions in ChatML, with its own byte-level BPE tokenizer.json and chat
template, so chat works with no download.

The conversations are tools/chat_dataset.py's (fixed seeds; held-out split by problem).
Each is rendered with the chat template below by jinja2 exactly as Hugging Face's
transformers renders it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks), so
the training text is the prompt text a server builds from the same messages.

Tokenizer (tokenizer.json, Hugging Face's `tokenizers` serialization): byte-level BPE laid
out as Qwen2's -- NFC normalizer, a Split pre-tokenizer with Qwen2's regex (digits one by
one, as numbers are best read by a small model), ByteLevel pre-tokenizer/decoder -- with 256
byte symbols (id = byte value), merges learnt here on training text until the vocabulary
has 445 entries (189 merges), then <|endoftext|> 445, <|im_start|> 446, <|im_end|> 447 (special).
Its encoder is written below in plain Python (the text is ASCII, so \\p{L} / \\p{N} are
[A-Za-z] / [0-9]); --hf_tokenizers (the npm package `tokenizers`, Hugging Face's Rust
library) checks that it gives the same ids on rendered training and held-out text.

Model: Llama (RMSNorm, rotate_half RoPE, SwiGLU, tied head; model_type "llama", HF
tensor names) trained on the assistant messages' tokens only: each answer and the
<|im_end|> that closes it (so the model learns to stop).  The training forward below is
tools/reference_model.py's llama_forward batched; after training the export is reloaded
and reference_model.forward (float64) is checked against it.  Matrix multiplies train in
bfloat16 autocast; weights, optimizer, norms, softmax and loss stay float32; evaluation
and export are float32.

Held-out evaluation: every heldout.jsonl conversation rendered with
add_generation_prompt=True (no system message in a quarter of them: the template's
default stands in), greedy decoding in float32 until <|im_end|> or MAX_NEW tokens, exact
match of the decoded text with the answer.

Writes to --out: config.json, model.safetensors (F32), generation_config.json,
tokenizer.json, tokenizer_config.json (chat_template inside), chat_template.jinja,
heldout.jsonl (task, messages, answer, prompt = the rendered text, prompt_ids,
prediction = PyTorch's greedy answer, prediction_ids, correct), metrics.json, README.md.

Example (about 10 minutes on 2 cores):
    /usr/bin/python3 tools/train_chat.py --out models/chat-instruct
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shlex
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_dataset as data  # noqa: E402
from chat_model_card import write_model_card  # noqa: E402
from chatml import CHAT_TEMPLATE, render  # noqa: E402
from chat_tokenizer import (N_REGULAR, SPECIAL_TOKENS, Tokenizer, hf_encode,  # noqa: E402
                            learn_merges)
from machine import cpu_model  # noqa: E402
import reference_model  # noqa: E402
import safetensors_io  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_NEW = 16          # greedy budget: the longest answer (an ISO date) is 9 tokens + <|im_end|>
HELDOUT_PER_TASK = {"days_in_month": 300, "leap_year": 80, "iso_date": 300}
HELDOUT_SEED = 7


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO_ROOT, "models", "chat-instruct"))
    p.add_argument("--hidden_size", type=int, default=128)
    p.add_argument("--intermediate_size", type=int, default=384)
    p.add_argument("--num_hidden_layers", type=int, default=4)
    p.add_argument("--num_attention_heads", type=int, default=4)
    p.add_argument("--num_key_value_heads", type=int, default=4)
    p.add_argument("--max_position_embeddings", type=int, default=256)
    p.add_argument("--rope_theta", type=float, default=10000.0)
    p.add_argument("--batch_size", type=int, default=64, help="conversations per step")
    p.add_argument("--buckets", type=int, default=8, help="batches per length-sorted pool")
    p.add_argument("--max_iters", type=int, default=6000)
    p.add_argument("--max_minutes", type=float, default=10.0,
                   help="training-time budget (0 = none); the learning rate reaches its "
                        "floor when either budget runs out")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min_lr", type=float, default=1e-4)
    p.add_argument("--warmup_iters", type=int, default=100)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--init_std", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log_every", type=int, default=100)
    p.add_argument("--bpe_corpus", type=int, default=20000,
                   help="training conversations the BPE merges are learnt from")
    p.add_argument("--hf_tokenizers", default=os.path.join(REPO_ROOT, "tests", "npm",
                                                           "node_modules", "tokenizers"),
                   help="the npm package `tokenizers` (checked against when present)")
    p.add_argument("--probe", type=int, default=0, help="time this many steps and exit")
    p.add_argument("--card_only", action="store_true",
                   help="only rewrite OUT/README.md from OUT/metrics.json")
    p.add_argument("--verify_only", action="store_true",
                   help="only rerun verify_export on OUT (and rewrite its README.md)")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- tokenizer

def tokenizer_config() -> dict:
    """tokenizer_config.json as transformers writes it for a Qwen2-style tokenizer."""
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(N_REGULAR + i): {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": None,  # set from the config below
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


# ----------------------------------------------------------------------------- data

def encode_conversation(tok: Tokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    """(ids, labels): the rendered conversation's ids, and labels = the next token at the
    positions whose next token is part of an assistant message (its content and the
    <|im_end|> closing it), -100 elsewhere."""
    ids = tok.encode(render(messages, add_generation_prompt=False))
    labels = [-100] * len(ids)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prefix = tok.encode(render(messages[:i], add_generation_prompt=True))
        answer = tok.encode(m["content"]) + [tok.im_end]
        start = len(prefix)
        assert ids[:start] == prefix and ids[start:start + len(answer)] == answer
        for j in range(start, start + len(answer)):
            labels[j - 1] = ids[j]
    return ids, labels


def length_buckets(rng: random.Random, tok: Tokenizer, train: dict[str, list],
                   batch_size: int, buckets: int, context: int) -> list:
    """`buckets` batches from buckets * batch_size fresh training conversations sorted by
    length, in random order (less padding).  A conversation longer than the
    context is drawn again."""
    pool = []
    while len(pool) < buckets * batch_size:
        row = encode_conversation(tok, data.training_sample(rng, train)["messages"])
        if len(row[0]) <= context:
            pool.append(row)
    pool.sort(key=lambda r: len(r[0]))
    batches = [pool[i * batch_size:(i + 1) * batch_size] for i in range(buckets)]
    rng.shuffle(batches)
    return batches


def make_batch(rows: list[tuple[list[int], list[int]]], pad: int):
    """Right-padded [B, T] inputs and labels (causal attention needs no padding mask)."""
    T = max(len(ids) for ids, _ in rows)
    x = torch.full((len(rows), T), pad, dtype=torch.long)
    y = torch.full((len(rows), T), -100, dtype=torch.long)
    for b, (ids, labels) in enumerate(rows):
        x[b, :len(ids)] = torch.tensor(ids)
        y[b, :len(labels)] = torch.tensor(labels)
    return x, y


# ----------------------------------------------------------------------------- model

def model_config(args, tok: Tokenizer) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tok.size,
        "hidden_size": args.hidden_size,
        "intermediate_size": args.intermediate_size,
        "num_hidden_layers": args.num_hidden_layers,
        "num_attention_heads": args.num_attention_heads,
        "num_key_value_heads": args.num_key_value_heads,
        "head_dim": args.hidden_size // args.num_attention_heads,
        "max_position_embeddings": args.max_position_embeddings,
        "rms_norm_eps": 1e-5,
        "rope_theta": args.rope_theta,
        "rope_scaling": None,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": tok.im_end,
        "pad_token_id": tok.endoftext,
        "torch_dtype": "float32",
    }


def init_weights(cfg: dict, std: float, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Matrices N(0, std), the two that write into the residual stream (o_proj, down_proj)
    N(0, std / sqrt(2 L)), RMSNorm gains 1."""
    w = {}
    for name, shape in reference_model.expected_shapes(cfg).items():
        if len(shape) == 1:
            t = torch.ones(shape)
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            t = torch.randn(*shape, generator=g) * (std / math.sqrt(2 * cfg["L"]))
        else:
            t = torch.randn(*shape, generator=g) * std
        w[name] = t.requires_grad_(True)
    return w


def rms_norm(x, weight, eps):
    x = x.float()
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def forward(cfg: dict, w: dict[str, torch.Tensor], ids: torch.Tensor,
            rows: torch.Tensor | None = None) -> torch.Tensor:
    """reference_model.llama_forward, batched: ids [B, T] -> logits [B, T, V] (float32);
    with `rows` (a [B, T] bool mask) only those positions' logits, [N, V]."""
    B, T = ids.shape
    H, KV, D, eps = cfg["H"], cfg["KV"], cfg["D"], cfg["eps"]
    inv_freq = 1.0 / cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angle = torch.cat([angle, angle], dim=-1)
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()           # [T, D]
    mask = torch.full((T, T), float("-inf")).triu(1)
    x = w["model.embed_tokens.weight"][ids]                                  # [B, T, C]
    for i in range(cfg["L"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = F.linear(h, w[p + "self_attn.q_proj.weight"]).view(B, T, H, D).transpose(1, 2)
        k = F.linear(h, w[p + "self_attn.k_proj.weight"]).view(B, T, KV, D).transpose(1, 2)
        v = F.linear(h, w[p + "self_attn.v_proj.weight"]).view(B, T, KV, D).transpose(1, 2)
        q = q.float() * cos + rotate_half(q.float()) * sin
        k = k.float() * cos + rotate_half(k.float()) * sin
        if KV != H:
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(D) + mask
        att = torch.softmax(scores.float(), dim=-1)
        y = (att.to(v.dtype) @ v).transpose(1, 2).reshape(B, T, H * D)
        x = x + F.linear(y, w[p + "self_attn.o_proj.weight"])
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = F.linear(h, w[p + "mlp.gate_proj.weight"])
        up = F.linear(h, w[p + "mlp.up_proj.weight"])
        x = x + F.linear(F.silu(gate.float()).to(up.dtype) * up, w[p + "mlp.down_proj.weight"])
    if rows is not None:
        x = x[rows]
    x = rms_norm(x, w["model.norm.weight"], eps)
    return F.linear(x, w["model.embed_tokens.weight"]).float()


def greedy_decode(cfg, w, tok: Tokenizer, prompts: list[list[int]], batch_size: int = 128
                  ) -> tuple[list[list[int]], list[float]]:
    """Greedy float32 decoding of each prompt until <|im_end|> or MAX_NEW tokens.
    -> (generated ids without the closing <|im_end|>, the smallest top-1 minus top-2 logit
    gap over each prompt's steps).  Prompts of one length are decoded together."""
    w32 = {k: v.detach().float() for k, v in w.items()}
    out, margins = [None] * len(prompts), [math.inf] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    with torch.no_grad():
        for _, members in sorted(by_len.items()):
            for s in range(0, len(members), batch_size):
                idx = members[s:s + batch_size]
                seqs = torch.tensor([prompts[i] for i in idx])
                done = [False] * len(idx)
                gen = [[] for _ in idx]
                for _ in range(MAX_NEW):
                    logits = forward(cfg, w32, seqs)[:, -1]
                    top2 = logits.topk(2, dim=-1)
                    nxt = top2.indices[:, 0]
                    for b, i in enumerate(idx):
                        if done[b]:
                            continue
                        gap = float(top2.values[b, 0] - top2.values[b, 1])
                        margins[i] = min(margins[i], gap)
                        if int(nxt[b]) == tok.im_end:
                            done[b] = True
                        else:
                            gen[b].append(int(nxt[b]))
                    if all(done):
                        break
                    seqs = torch.cat([seqs, nxt[:, None]], dim=1)
                for b, i in enumerate(idx):
                    out[i] = gen[b]
    return out, margins


def save_weights(w: dict[str, torch.Tensor], path: str) -> None:
    safetensors_io.save_file({k: v.detach().float().contiguous() for k, v in sorted(w.items())},
                             path, metadata={"format": "pt", "generator": "tools/train_chat.py"})


# ----------------------------------------------------------------------------- schedule

def progress(args, step: int, elapsed: float) -> float:
    done = step / args.max_iters
    if args.max_minutes > 0:
        done = max(done, elapsed / (60 * args.max_minutes))
    return done


def learning_rate(args, step: int, done: float) -> float:
    if step < args.warmup_iters:
        return args.lr * (step + 1) / args.warmup_iters
    warm = args.warmup_iters / args.max_iters
    frac = (done - warm) / max(1e-9, 1 - warm)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * min(1.0, frac)))


# ----------------------------------------------------------------------------- verify

def load_tokenizer(out_dir: str) -> Tokenizer:
    with open(os.path.join(out_dir, "tokenizer.json"), encoding="utf-8") as f:
        merges = [tuple(m.split(" ")) for m in json.load(f)["model"]["merges"]]
    return Tokenizer(merges)


def verify_export(out_dir: str, n_reference: int = 40) -> dict:
    """Reloads the export from disk: the tokenizer re-encodes every rendered prompt to its
    prompt_ids, the float32 forward decodes every held-out prompt to the recorded
    prediction, and tools/reference_model.py (float64, the oracle the C++ decoder is tested
    against) agrees with the training forward on n_reference prompt + prediction
    sequences.  Returns the figures (also written into metrics.json)."""
    cfg, w64 = reference_model.load_model(out_dir)
    w = {k: v.float() for k, v in w64.items()}
    tok = load_tokenizer(out_dir)
    with open(os.path.join(out_dir, "heldout.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for r in rows:
        assert render(r["messages"], add_generation_prompt=True) == r["prompt"]
        assert tok.encode(r["prompt"]) == r["prompt_ids"]
    preds, margins = greedy_decode(cfg, w, tok, [r["prompt_ids"] for r in rows])
    mismatches = [r for r, p in zip(rows, preds) if p != r["prediction_ids"]]
    assert not mismatches, f"the exported model decodes differently: {mismatches[:3]}"
    max_diff, argmax_same = 0.0, True
    for r in rows[::max(1, len(rows) // n_reference)][:n_reference]:
        seq = r["prompt_ids"] + r["prediction_ids"]
        ref, _ = reference_model.forward(cfg, w64, torch.tensor(seq))
        with torch.no_grad():
            ours = forward(cfg, w, torch.tensor([seq]))[0].double()
        max_diff = max(max_diff, float((ref - ours).abs().max()))
        n, pred = len(r["prompt_ids"]), r["prediction_ids"]
        expected = pred + [tok.im_end] if len(pred) < MAX_NEW else pred
        argmax_same &= ref[n - 1:n - 1 + len(expected)].argmax(-1).tolist() == expected
    assert argmax_same and max_diff < 1e-3, (argmax_same, max_diff)
    figures = {"verified_from_export": "model.safetensors and tokenizer.json reloaded; every "
                                       "heldout.jsonl prompt_ids and prediction reproduced",
               "reference_model_sequences": n_reference,
               "reference_model_max_logit_diff": float(f"{max_diff:.3g}"),
               "greedy_min_logit_margin": round(min(margins), 4),
               "greedy_logit_margins_below_1": sum(m < 1.0 for m in margins)}
    path = os.path.join(out_dir, "metrics.json")
    with open(path, encoding="utf-8") as f:
        metrics = json.load(f)
    metrics.update(figures)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(metrics, indent=2) + "\n")
    print(f"verified {len(rows)} predictions from the export; reference_model max logit "
          f"diff {max_diff:.2e}; smallest top-1 - top-2 gap {min(margins):.3f}", flush=True)
    return figures


# ----------------------------------------------------------------------------- main

def main(argv=None):
    args = parse_args(argv)
    if args.card_only:
        write_model_card(args.out)
        return
    torch.set_num_threads(args.threads)
    if args.verify_only:
        verify_export(args.out)
        write_model_card(args.out)
        return
    t_start = time.time()
    torch.manual_seed(args.seed)
    split = data.split()
    train = {t: pair[0] for t, pair in split.items()}

    # Tokenizer: merges learnt on rendered training conversations.
    rng = random.Random(args.seed + 1)
    corpus = [render(data.training_sample(rng, train)["messages"], False)
              for _ in range(args.bpe_corpus)]
    tok = Tokenizer(learn_merges(corpus, N_REGULAR))
    assert len(tok.vocab) == N_REGULAR
    one_turn = [render(data.sample(rng, train, turns=1)["messages"], False) for _ in range(2000)]
    mean_tokens = sum(len(tok.encode(t)) for t in one_turn) / len(one_turn)
    print(f"tokenizer: {len(tok.merges)} merges, vocab {tok.size}, "
          f"{mean_tokens:.1f} tokens per conversation ({time.time() - t_start:.0f} s)", flush=True)

    config = model_config(args, tok)
    cfg = reference_model.parse_config(config)
    w = init_weights(cfg, args.init_std, torch.Generator().manual_seed(args.seed))
    n_params = sum(t.numel() for t in w.values())
    decay = [t for t in w.values() if t.dim() == 2]
    no_decay = [t for t in w.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    print(f"{n_params} parameters", flush=True)

    rng = random.Random(args.seed)
    log, window, queue = [], [], []
    t_train = time.time()
    steps = args.probe or args.max_iters
    done = 0.0
    for step in range(steps):
        done = progress(args, step, time.time() - t_train)
        if done >= 1.0 and not args.probe:
            break
        lr = learning_rate(args, step, done)
        for group in opt.param_groups:
            group["lr"] = lr
        if not queue:
            queue = length_buckets(rng, tok, train, args.batch_size, args.buckets,
                                       cfg["max_position_embeddings"])
        x, y = make_batch(queue.pop(), tok.endoftext)
        assert x.shape[1] <= cfg["max_position_embeddings"]
        supervised = y >= 0
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = forward(cfg, w, x, supervised)
        loss = F.cross_entropy(logits, y[supervised])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), args.grad_clip)
        opt.step()
        window.append(loss.item())
        if (step + 1) % args.log_every == 0:
            log.append({"step": step + 1, "train_loss": round(sum(window) / len(window), 5),
                        "lr": round(lr, 6), "seconds": round(time.time() - t_train, 1)})
            print(json.dumps(log[-1]), flush=True)
            window = []
    iterations = step + 1 if done < 1.0 else step
    if window:
        log.append({"step": iterations, "train_loss": round(sum(window) / len(window), 5),
                    "lr": round(lr, 6), "seconds": round(time.time() - t_train, 1)})
    train_seconds = time.time() - t_train
    if args.probe:
        print(f"{args.probe / train_seconds:.2f} steps/s")
        return

    # Held-out: rendered with the generation prompt, greedy float32.
    t_eval = time.time()
    rows = data.heldout_set(HELDOUT_PER_TASK, HELDOUT_SEED)
    for r in rows:
        r["prompt"] = render(r["messages"], add_generation_prompt=True)
        r["prompt_ids"] = tok.encode(r["prompt"])
    preds, _ = greedy_decode(cfg, w, tok, [r["prompt_ids"] for r in rows])
    by_task: dict[str, list[int]] = {t: [0, 0] for t in data.TASKS}
    for r, p in zip(rows, preds):
        r["prediction_ids"] = p
        r["prediction"] = tok.decode(p)
        r["correct"] = r["prediction"] == r["answer"]
        by_task[r["task"]][0] += r["correct"]
        by_task[r["task"]][1] += 1
    correct = sum(r["correct"] for r in rows)
    accuracy = correct / len(rows)
    eval_seconds = time.time() - t_eval
    print(f"held-out exact match {accuracy:.4f} ({correct}/{len(rows)}); " + ", ".join(
        f"{t} {c}/{n}" for t, (c, n) in by_task.items()), flush=True)

    # Export.
    os.makedirs(args.out, exist_ok=True)
    tok_path = os.path.join(args.out, "tokenizer.json")
    with open(tok_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(tok.to_json(), indent=2, ensure_ascii=False) + "\n")
    tc = tokenizer_config()
    tc["model_max_length"] = args.max_position_embeddings
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(CHAT_TEMPLATE)
    with open(os.path.join(args.out, "generation_config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"bos_token_id": None, "eos_token_id": [tok.im_end, tok.endoftext],
                            "pad_token_id": tok.endoftext, "do_sample": False}, indent=2) + "\n")
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(config, indent=2) + "\n")
    save_weights(w, os.path.join(args.out, "model.safetensors"))
    keys = ["task", "messages", "answer", "prompt", "prompt_ids", "prediction",
            "prediction_ids", "correct"]
    with open(os.path.join(args.out, "heldout.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({k: r[k] for k in keys}, ensure_ascii=False) + "\n")

    # Hugging Face's tokenizers on rendered training and held-out text.
    texts = corpus[:300] + [r["prompt"] for r in rows]
    hf_ids = hf_encode(args.hf_tokenizers, tok_path, texts)
    tokenizer_figures = {"merges": len(tok.merges), "mean_tokens_per_conversation":
                         round(mean_tokens, 1)}
    if hf_ids is not None:
        ours = [tok.encode(t) for t in texts]
        agree = sum(a == b for a, b in zip(ours, hf_ids))
        with open(os.path.join(args.hf_tokenizers, "package.json"), encoding="utf-8") as f:
            version = json.load(f)["version"]
        tokenizer_figures.update(hf_tokenizers_version=version, hf_checked_texts=len(texts),
                                 hf_agrees=f"{agree} of {len(texts)} identical")
        print(f"Hugging Face tokenizers {version}: {agree} of {len(texts)} texts encode to "
              f"the same ids", flush=True)
        assert agree == len(texts), "tokenizer.json disagrees with the script's encoder"

    command = "/usr/bin/python3 tools/train_chat.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    metrics = {
        "exact_match_accuracy": round(accuracy, 6),
        "exact_match_correct": correct,
        "heldout_examples": len(rows),
        "exact_match_by_task": {t: round(c / n, 4) for t, (c, n) in by_task.items()},
        "exact_match_by_task_counts": by_task,
        "decoding": f"greedy, float32, from the rendered prompt until <|im_end|> or {MAX_NEW} tokens",
        "special_tokens": dict(tok.special),
        "tokenizer": tokenizer_figures,
        "params": n_params,
        "iterations": iterations,
        "conversations_seen": iterations * args.batch_size,
        "train_loss_first": log[0]["train_loss"],
        "train_loss_last": log[-1]["train_loss"],
        "train_loss_curve": [[e["step"], e["train_loss"]] for e in log],
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
        "wall_seconds": round(time.time() - t_start, 1),
        "hardware": {"cpu": cpu_model(), "threads": args.threads,
                     "note": "shared machine (other jobs compiling): timings are noisy",
                     "matmul_precision_training": "bfloat16 autocast (oneDNN)"},
        "software": {"torch": torch.__version__, "python": platform.python_version()},
        "split": {t: {"train": len(a), "heldout": len(b)} for t, (a, b) in split.items()},
        "model": config,
        "hyperparameters": {k: v for k, v in vars(args).items()
                            if k not in ("out", "probe", "card_only", "verify_only",
                                         "hf_tokenizers")},
        "command": command,
    }
    with open(os.path.join(args.out, "metrics.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(metrics, indent=2) + "\n")
    verify_export(args.out)
    write_model_card(args.out)
    print(f"wrote {args.out} in {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
