#!/usr/bin/env python3
"""Train models/dates-seq2seq/: a character-level encoder–decoder that rewrites written
dates as ISO 8601 ("the fourth of March, 1999" -> "1999-03-04").

The task, its formats, data rules and held-out split are tools/dates_dataset.py's.  The
model is tools/seq2seq_model.py (model/decoder.h's equations, sinusoidal positions), trained
here in float32 with autograd; matrix multiplies run in bfloat16 autocast (oneDNN, much
faster than this torch build's float32 BLAS), everything else (weights, optimizer,
residual stream, LayerNorm, softmax, loss) stays float32.  The export and the held-out
evaluation are plain float32.

Training data is drawn fresh every step from the training dates (seeded), so there is
no epoch and no overfitting to a fixed sample.  Per example the decoder reads
[BOS] + answer and predicts answer + [EOS] (cross-entropy over those 11 positions).

Held-out evaluation: HELDOUT_N examples with distinct sources from the held-out dates
(fixed seed), greedy decoding in float32 from [BOS] until EOS or MAX_NEW tokens;
exact match = the decoded text equals the ISO target.

Writes to --out: config.json, model.safetensors (F32), char_vocab.json, heldout.jsonl
(one JSON object per line: source, target, prediction, format, correct), metrics.json.

Example (about 10 minutes on 2 cores):
    /usr/bin/python3 tools/train_seq2seq.py --out models/dates-seq2seq
"""

from __future__ import annotations

import argparse
import datetime
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
import dates_dataset as data  # noqa: E402
import seq2seq_model as s2s  # noqa: E402
from machine import cpu_model  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELDOUT_N = 2000
HELDOUT_SEED = 7
MAX_NEW = 16      # greedy budget: 10 answer characters + EOS, with slack
CONTROL_TOKENS = ["<s>", "</s>"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO_ROOT, "models", "dates-seq2seq"))
    p.add_argument("--n_embd", type=int, default=128)
    p.add_argument("--n_head", type=int, default=4)
    p.add_argument("--n_inner", type=int, default=512)
    p.add_argument("--encoder_layers", type=int, default=3)
    p.add_argument("--n_layer", type=int, default=2, help="decoder layers")
    p.add_argument("--n_positions", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--buckets", type=int, default=8, help="batches per length-sorted pool")
    p.add_argument("--max_iters", type=int, default=4000)
    p.add_argument("--max_minutes", type=float, default=15.0,
                   help="training-time budget (0 = none); the learning rate reaches its "
                        "floor when either budget runs out")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min_lr", type=float, default=1e-4)
    p.add_argument("--warmup_iters", type=int, default=200)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--init_std", type=float, default=0.06,
                   help="std of the matrices; GPT-2's 0.02 (tuned for C = 768) leaves q.k so "
                        "small at C = 128 that cross-attention stays uniform for hundreds of "
                        "steps")
    p.add_argument("--wte_std", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log_every", type=int, default=100)
    p.add_argument("--probe", type=int, default=0, help="time this many steps and exit")
    p.add_argument("--card_only", action="store_true",
                   help="only rewrite OUT/README.md from OUT/metrics.json")
    p.add_argument("--verify_only", action="store_true",
                   help="only rerun verify_export on OUT (and rewrite its README.md)")
    return p.parse_args(argv)


class CharVocab:
    """char_vocab.json (model/text/char_tokenizer.h): chars 0..n-1, then the control tokens."""

    def __init__(self, chars: list[str]):
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}
        self.bos = len(chars) + CONTROL_TOKENS.index("<s>")
        self.eos = len(chars) + CONTROL_TOKENS.index("</s>")
        self.size = len(chars) + len(CONTROL_TOKENS)

    def encode(self, text: str) -> list[int]:
        return [self.index[c] for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids if i < len(self.chars))  # controls -> ""

    def to_json(self) -> dict:
        return {"type": "char", "chars": self.chars, "control_tokens": CONTROL_TOKENS,
                "bos_token": "<s>", "eos_token": "</s>"}


def model_config(args, vocab: CharVocab) -> dict:
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2EncoderDecoder"],
        "is_encoder_decoder": True,
        "add_cross_attention": True,
        "encoder_layers": args.encoder_layers,
        "n_layer": args.n_layer,
        "vocab_size": vocab.size,
        "n_positions": args.n_positions,
        "n_embd": args.n_embd,
        "n_head": args.n_head,
        "n_inner": args.n_inner,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new",
        "position_embedding_type": "sinusoidal",
        "tie_word_embeddings": True,
        "bos_token_id": vocab.bos,
        "eos_token_id": vocab.eos,
        "decoder_start_token_id": vocab.bos,
    }


def init_weights(cfg: dict, std: float, wte_std: float, g: torch.Generator
                 ) -> dict[str, torch.Tensor]:
    """GPT-2's init: matrices N(0, std), the projections that write into the residual
    stream N(0, std / sqrt(2 * layers)), biases 0, LayerNorm gains 1; except
    wte N(0, wte_std): it is added, unscaled, to the unit-amplitude sinusoids, and a tiny
    wte leaves the encoder seeing mostly positions (training then sits on a plateau where
    the decoder ignores the source).  ln_f's gain starts at 1 / (wte_std sqrt(C)) so the
    tied head's initial logits still have about unit spread."""
    layers = cfg["L_enc"] + cfg["L_dec"]
    w = {}
    for name, shape in s2s.expected_shapes(cfg).items():
        if name.endswith(".bias"):
            t = torch.zeros(shape)
        elif name == "ln_f.weight":
            t = torch.full(shape, min(1.0, 1.0 / (wte_std * math.sqrt(cfg["C"]))))
        elif name == "wte.weight":
            t = torch.randn(*shape, generator=g) * wte_std
        elif ".ln_" in name or name.startswith("ln_") or "ln_f" in name:
            t = torch.ones(shape)
        elif name.endswith("c_proj.weight"):
            t = torch.randn(*shape, generator=g) * (std / math.sqrt(2 * layers))
        else:
            t = torch.randn(*shape, generator=g) * std
        w[name] = t.requires_grad_(True)
    return w


def length_buckets(rng: random.Random, dates, batch_size: int, buckets: int):
    """`buckets` batches from buckets * batch_size fresh examples sorted by source length,
    in random order: sources run from 6 to 37 characters, and a batch padded to its longest
    source would be mostly padding (the encoder's cost) without this."""
    pool = sorted((data.sample(rng, dates) for _ in range(buckets * batch_size)),
                  key=lambda ex: len(ex[0]))
    batches = [pool[i * batch_size:(i + 1) * batch_size] for i in range(buckets)]
    rng.shuffle(batches)
    return batches


def make_batch(examples, vocab: CharVocab):
    """-> src [B, S] (padded with 0), src_len [B], dec_in [B, T], labels [B, T] (-100 = pad)."""
    srcs = [vocab.encode(s) for s, _, _ in examples]
    tgts = [vocab.encode(t) for _, t, _ in examples]
    S = max(map(len, srcs))
    T = max(map(len, tgts)) + 1
    src = torch.zeros(len(examples), S, dtype=torch.long)
    dec_in = torch.zeros(len(examples), T, dtype=torch.long)
    labels = torch.full((len(examples), T), -100, dtype=torch.long)
    for b, (s, t) in enumerate(zip(srcs, tgts)):
        src[b, :len(s)] = torch.tensor(s)
        dec_in[b, :len(t) + 1] = torch.tensor([vocab.bos] + t)
        labels[b, :len(t) + 1] = torch.tensor(t + [vocab.eos])
    src_len = torch.tensor([len(s) for s in srcs])
    return src, src_len, dec_in, labels


def progress(args, step: int, elapsed: float) -> float:
    """Fraction of the budget used: steps or seconds, whichever runs out first."""
    done = step / args.max_iters
    if args.max_minutes > 0:
        done = max(done, elapsed / (60 * args.max_minutes))
    return done


def learning_rate(args, step: int, done: float) -> float:
    """Linear warmup, then cosine decay to min_lr over the rest of the budget."""
    if step < args.warmup_iters:
        return args.lr * (step + 1) / args.warmup_iters
    warm = args.warmup_iters / args.max_iters
    frac = (done - warm) / max(1e-9, 1 - warm)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * min(1.0, frac)))


def evaluate(cfg, w, vocab, examples, batch_size=250):
    """Greedy float32 decoding of every example -> list of predicted strings."""
    w32 = {k: v.detach().float() for k, v in w.items()}
    preds = []
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        src, src_len, _, _ = make_batch(chunk, vocab)
        out = s2s.greedy_decode(cfg, w32, src, src_len, vocab.bos, vocab.eos, MAX_NEW)
        preds.extend(vocab.decode(ids) for ids in out)
    return preds


def verify_export(out_dir: str) -> None:
    """Reloads OUT's config.json, char_vocab.json and model.safetensors from disk, decodes
    every heldout.jsonl source again (greedy, float32) and asserts the same predictions;
    records in metrics.json the smallest top-1 minus top-2 logit gap over all greedy
    steps (how far the argmax is from a tie, i.e. how much float rounding a
    reimplementation may differ by and still decode the same text)."""
    cfg, w = s2s.load_model(out_dir, torch.float32)
    with open(os.path.join(out_dir, "char_vocab.json"), encoding="utf-8") as f:
        vocab = CharVocab(json.load(f)["chars"])
    with open(os.path.join(out_dir, "heldout.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    examples = [(r["source"], r["target"], r["format"]) for r in rows]
    preds = evaluate(cfg, w, vocab, examples)
    mismatches = [r for r, p in zip(rows, preds) if p != r["prediction"]]
    assert not mismatches, f"the exported model decodes differently: {mismatches[:3]}"
    assert all(r["correct"] == (r["prediction"] == r["target"]) for r in rows)
    # Teacher-forced on [<s>] + prediction: the logits of every greedy step at once.
    margins = []
    for i in range(0, len(examples), 250):
        chunk = [(s, p, f) for (s, _, f), p in zip(examples[i:i + 250], preds[i:i + 250])]
        src, src_len, dec_in, labels = make_batch(chunk, vocab)
        with torch.no_grad():
            logits = s2s.forward(cfg, w, src, src_len, dec_in).logits      # [B, T, V]
        top2 = logits.topk(2, dim=-1).values
        gap = (top2[..., 0] - top2[..., 1]).masked_fill(labels < 0, float("inf"))
        margins.extend(gap.min(dim=1).values.tolist())
    path = os.path.join(out_dir, "metrics.json")
    with open(path, encoding="utf-8") as f:
        metrics = json.load(f)
    metrics["verified_from_export"] = ("model.safetensors reloaded, every heldout.jsonl "
                                       "prediction reproduced")
    metrics["greedy_min_logit_margin"] = round(min(margins), 4)
    metrics["greedy_logit_margins_below_1"] = sum(m < 1.0 for m in margins)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(metrics, indent=2) + "\n")
    print(f"verified {len(rows)} predictions from the export; smallest top-1 - top-2 logit "
          f"gap {min(margins):.3f}", flush=True)


def write_model_card(out_dir: str) -> None:
    """models/<name>/README.md from metrics.json, so its figures are the run's own."""
    with open(os.path.join(out_dir, "metrics.json"), encoding="utf-8") as f:
        m = json.load(f)
    cfg, hp = m["model"], m["hyperparameters"]
    example = datetime.date(1999, 3, 4)
    formats = "\n".join(f"| `{name}` | `{data.render(example, name, False)}` |"
                         for name in data.FORMATS)
    by_format = "\n".join(f"| `{name}` | {100 * acc:.2f} % |"
                           for name, acc in m["exact_match_accuracy_by_format"].items())
    curve = ", ".join(f"{step}: {loss:.4f}" for step, loss in m["train_loss_curve"]
                      if step % 500 == 0 or step == m["train_loss_curve"][-1][0])
    size = os.path.getsize(os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "heldout.jsonl"), encoding="utf-8") as f:
        wrong = [json.loads(line) for line in f if '"correct": false' in line]
    errors = "\n".join(f"  * `{r['source']}` → `{r['prediction']}` (should be `{r['target']}`)"
                       for r in wrong) or "  none"
    card = f"""# dates-seq2seq: written dates to ISO 8601

A character-level encoder–decoder (the format of `model/config.h` and `model/weights.h`) that rewrites a date
written in one of 17 common ways as `YYYY-MM-DD`:

    the fourth of March, 1999   ->  1999-03-04
    Thu 4 Mar 99                ->  1999-03-04
    3/4/99                      ->  1999-03-04

**Exact-match accuracy: {100 * m['exact_match_accuracy']:.2f} %** ({m['exact_match_correct']} of
{m['heldout_examples']} held-out examples; greedy decoding in float32 PyTorch, the whole output
string must equal the ISO date). On a same-size sample of *training* dates (fresh
renderings): {100 * m['train_dates_sample_accuracy']:.2f} %.

Trained by `tools/train_seq2seq.py` in {m['train_seconds'] / 60:.1f} minutes ({m['iterations']} steps,
{m['wall_seconds'] / 60:.1f} minutes with the evaluation and export) on {m['hardware']['threads']} cores of an
{m['hardware']['cpu']} (a machine shared with other jobs compiling, so the time is noisy).

## Task and data rules (tools/dates_dataset.py)

* Dates from 1930-01-01 to 2029-12-31, always valid: February 29 only in leap years
  (divisible by 4, except centuries not divisible by 400; 2000 is one).
* Two-digit years: 30–99 are 1930–1999, 00–29 are 2000–2029.
* Slashes are American, month/day/year: `3/4/99` is March 4. Dashes with a month
  abbreviation are day-month-year; dots and bare digit strings are year-month-day.
* Weekday names, when written, are the date's true weekday.
* Formats with words also appear all in lower case (25 % of their examples).
* Training draws fresh random (date, format) examples every step from the training dates
  (seed {hp['seed']}); there is no fixed training set.

| format | 1999-03-04 written as |
|---|---|
{formats}

## Held-out split

By **date**: a seeded shuffle (`SPLIT_SEED` in tools/dates_dataset.py) sets aside
{m['split']['heldout_dates']} of the {m['split']['train_dates'] + m['split']['heldout_dates']} days (10 %); training never sees them in any format.
The held-out set is {m['heldout_examples']} distinct sources drawn from those days (seed 7), every
format represented. A split by (date, format) pair would let the model see the same day in
a sibling format and recall it; splitting by day asks it to read digits and words it has
seen in combinations it has not.

Per format (held-out):

| format | exact match |
|---|---|
{by_format}

`heldout.jsonl` has one JSON object per line:
`{{"source": "...", "target": "YYYY-MM-DD", "prediction": "...", "format": "...", "correct": true}}`.
`prediction` is PyTorch's greedy output: the decoder starts from `<s>` and appends the
argmax token until `</s>` or {MAX_NEW} tokens; the text is the generated characters without the
control tokens. The C++ server, given `source` and greedy decoding (temperature 0) with
up to {MAX_NEW} tokens, is expected to produce the same `prediction` for every line, hence the
same accuracy. The smallest gap between the top two logits over every greedy step of the
held-out set is {m.get('greedy_min_logit_margin', 'n/a')} (examples with a step whose gap is below 1:
{m.get('greedy_logit_margins_below_1', 'n/a')}), far above float32 rounding, so a faithful reimplementation decodes the same text.

## Model

| | |
|---|---|
| architecture | GPT-2 blocks, pre-LN, encoder–decoder (`model/decoder.h`): {cfg['encoder_layers']} encoder layers (bidirectional self-attention), {cfg['n_layer']} decoder layers (causal self-attention, cross-attention, MLP) |
| width / heads / MLP | n_embd {cfg['n_embd']}, {cfg['n_head']} heads of {cfg['n_embd'] // cfg['n_head']}, n_inner {cfg['n_inner']}, gelu_new, LayerNorm eps 1e-5 |
| positions | sinusoidal (no learned table), n_positions {cfg['n_positions']} (longest source {data.max_source_length()} characters, target 12 tokens) |
| vocabulary | {cfg['vocab_size']}: {cfg['vocab_size'] - 2} characters + `<s>` (id {cfg['bos_token_id']}, decoder start) + `</s>` (id {cfg['eos_token_id']}); `char_vocab.json` |
| head | tied to `wte` |
| parameters | {m['params']:,} ({size / 1e6:.1f} MB, F32 safetensors) |

Sources are encoded with no special tokens; the decoder reads `<s>` + answer and is
trained to predict answer + `</s>` (cross-entropy, mean over those 11 positions).

## Training

AdamW (β 0.9 / 0.98, weight decay {hp['weight_decay']} on matrices and `wte`), batch {hp['batch_size']},
learning rate {hp['lr']} after {hp['warmup_iters']} warm-up steps, cosine decay to {hp['min_lr']} over the budget
({hp['max_iters']} steps or {hp['max_minutes']} minutes, whichever ends first: this run stopped
at {m['iterations']} steps), gradient clipping {hp['grad_clip']}, matrices N(0, {hp['init_std']}) (residual
projections / sqrt(2 × layers)), `wte` N(0, {hp['wte_std']}). Batches are sorted by source
length in pools of {hp['buckets']}. Matrix multiplies in bfloat16 autocast; weights, optimizer,
LayerNorm, softmax and loss in float32; evaluation and export in float32.

Training loss (nats per target token, mean over the last {hp['log_every']} steps): {curve}.

Retrain (writes this directory; about {m['wall_seconds'] / 60:.0f} minutes here):

    {m['command']}

The step count depends on the machine's speed (the minutes budget), so a rerun gives a
similar, not a byte-identical, model; `--max_minutes 0 --max_iters N` fixes the schedule
and the number of steps whatever the speed.

## Limitations

* Only the 17 formats above, English month and weekday names, and years 1930–2029. Other
  spellings ("Sept.", "4.3.1999", "1999/03/04", "MARCH"), other languages and dates
  outside the range were never seen in training; the model still answers with some
  date, which should not be trusted.
* Day-first slashed dates (European `4/3/1999`) are read month-first by design.
* It does not validate: an impossible input such as "February 30, 1999" still gets an
  answer, and a weekday that contradicts the date is not reported (training only ever
  showed true weekdays).
* Its held-out errors:
{errors}
"""
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(card)


def main(argv=None):
    args = parse_args(argv)
    if args.card_only:
        write_model_card(args.out)
        return
    if args.verify_only:
        torch.set_num_threads(args.threads)
        verify_export(args.out)
        write_model_card(args.out)
        return
    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab = CharVocab(data.alphabet())
    config = model_config(args, vocab)
    cfg = s2s.parse_config(config)
    w = init_weights(cfg, args.init_std, args.wte_std, torch.Generator().manual_seed(args.seed))
    n_params = sum(t.numel() for t in w.values())
    decay = [t for n, t in w.items() if t.dim() == 2]             # matrices and wte
    no_decay = [t for n, t in w.items() if t.dim() < 2]           # biases, LayerNorm
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    train_dates, heldout_dates = data.split_dates()
    rng = random.Random(args.seed)
    assert data.max_source_length() <= args.n_positions
    print(f"{n_params} parameters, vocab {vocab.size}, {len(train_dates)} training dates",
          flush=True)

    log, window, queue = [], [], []
    t_train = time.time()
    steps = args.probe or args.max_iters
    for step in range(steps):
        done = progress(args, step, time.time() - t_train)
        if done >= 1.0 and not args.probe:
            break
        lr = learning_rate(args, step, done)
        for group in opt.param_groups:
            group["lr"] = lr
        if not queue:
            queue = length_buckets(rng, train_dates, args.batch_size, args.buckets)
        src, src_len, dec_in, labels = make_batch(queue.pop(), vocab)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = s2s.forward(cfg, w, src, src_len, dec_in)
        loss = F.cross_entropy(out.logits.float().reshape(-1, vocab.size), labels.reshape(-1),
                               ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), args.grad_clip)
        opt.step()
        window.append(loss.item())
        if (step + 1) % args.log_every == 0:
            mean = sum(window) / len(window)
            log.append({"step": step + 1, "train_loss": round(mean, 5), "lr": round(lr, 6),
                        "seconds": round(time.time() - t_train, 1)})
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

    # Held-out and a same-size sample of training dates (fresh formats), float32 greedy.
    t_eval = time.time()
    heldout = data.unique_examples(random.Random(HELDOUT_SEED), heldout_dates, HELDOUT_N)
    preds = evaluate(cfg, w, vocab, heldout)
    correct = [p == t for p, (_, t, _) in zip(preds, heldout)]
    accuracy = sum(correct) / len(correct)
    train_sample = data.unique_examples(random.Random(HELDOUT_SEED + 1), train_dates, HELDOUT_N)
    train_preds = evaluate(cfg, w, vocab, train_sample)
    train_accuracy = sum(p == t for p, (_, t, _) in zip(train_preds, train_sample)) / HELDOUT_N
    per_format: dict[str, list[int]] = {}
    for ok, (_, _, fmt) in zip(correct, heldout):
        per_format.setdefault(fmt.replace(" (lower case)", ""), [0, 0])
        per_format[fmt.replace(" (lower case)", "")][0] += ok
        per_format[fmt.replace(" (lower case)", "")][1] += 1
    eval_seconds = time.time() - t_eval
    print(f"held-out exact-match accuracy {accuracy:.4f} ({sum(correct)}/{len(correct)}), "
          f"training-date sample {train_accuracy:.4f}", flush=True)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(config, indent=2) + "\n")
    with open(os.path.join(args.out, "char_vocab.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(vocab.to_json(), indent=2, ensure_ascii=False) + "\n")
    s2s.save_weights(cfg, w, os.path.join(args.out, "model.safetensors"), torch.float32,
                     metadata={"format": "pt", "generator": "tools/train_seq2seq.py"})
    with open(os.path.join(args.out, "heldout.jsonl"), "w", encoding="utf-8") as f:
        for (src, tgt, fmt), pred, ok in zip(heldout, preds, correct):
            f.write(json.dumps({"source": src, "target": tgt, "prediction": pred,
                                "format": fmt, "correct": ok}, ensure_ascii=False) + "\n")
    command = "/usr/bin/python3 tools/train_seq2seq.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    metrics = {
        "exact_match_accuracy": round(accuracy, 6),
        "exact_match_correct": sum(correct),
        "heldout_examples": len(correct),
        "exact_match_accuracy_by_format": {k: round(v[0] / v[1], 4) for k, v in sorted(per_format.items())},
        "train_dates_sample_accuracy": round(train_accuracy, 6),
        "decoding": f"greedy, float32, from <s> until </s> or {MAX_NEW} tokens",
        "params": n_params,
        "iterations": iterations,
        "examples_seen": iterations * args.batch_size,
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
        "split": {"train_dates": len(train_dates), "heldout_dates": len(heldout_dates),
                  "rule": "disjoint by date (tools/dates_dataset.py SPLIT_SEED)"},
        "model": config,
        "hyperparameters": {k: v for k, v in vars(args).items()
                            if k not in ("out", "probe", "card_only", "verify_only")},
        "command": command,
    }
    with open(os.path.join(args.out, "metrics.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(metrics, indent=2) + "\n")
    verify_export(args.out)
    write_model_card(args.out)
    print(f"wrote {args.out} in {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
