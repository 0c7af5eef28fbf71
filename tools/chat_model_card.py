"""models/chat-instruct/README.md, the instruct model's card, written from the run's own
metrics.json and heldout.jsonl (tools/train_chat.py calls it; --card_only rewrites it).
"""

from __future__ import annotations

import json
import os

import chat_dataset as data
from chat_tokenizer import N_REGULAR
from chatml import render


def write_model_card(out_dir: str) -> None:
    """models/<name>/README.md from metrics.json, so its figures are the run's own."""
    with open(os.path.join(out_dir, "metrics.json"), encoding="utf-8") as f:
        m = json.load(f)
    cfg, hp = m["model"], m["hyperparameters"]
    tasks = "\n".join(f"| `{t}` | {100 * a:.2f} % ({m['exact_match_by_task_counts'][t][0]} / "
                      f"{m['exact_match_by_task_counts'][t][1]}) | "
                      f"{m['split'][t]['heldout']} of {m['split'][t]['train'] + m['split'][t]['heldout']} |"
                      for t, a in m["exact_match_by_task"].items())
    phrasings = "\n".join(f"| `{t}` | " + "<br>".join(f"`{p}`" for p in data.PHRASINGS[t]) + " |"
                          for t in data.TASKS)
    systems = "\n".join(f"  * `{s}`" for s in data.SYSTEM_PROMPTS)
    curve = ", ".join(f"{step}: {loss:.4f}" for step, loss in m["train_loss_curve"]
                      if step % 200 == 0 or step == m["train_loss_curve"][-1][0])
    size = os.path.getsize(os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "heldout.jsonl"), encoding="utf-8") as f:
        wrong = [json.loads(line) for line in f if '"correct": false' in line]
    errors = "\n".join(f"  * `{r['messages'][-1]['content']}` → `{r['prediction']}` "
                       f"(should be `{r['answer']}`)" for r in wrong[:20]) or "  none"
    if len(wrong) > 20:
        errors += f"\n  * ... {len(wrong) - 20} more in heldout.jsonl (`\"correct\": false`)"
    example = render([{"role": "user", "content": "How many days are in February 2024?"},
                      {"role": "assistant", "content": "29"}], False)
    card = f"""# chat-instruct: a small ChatML model for calendar questions

A Llama-shaped decoder (RMSNorm, RoPE, SwiGLU, tied head; `model_type` `llama`) with its
own byte-level BPE `tokenizer.json` and a ChatML chat template, trained from scratch by
`tools/train_chat.py` so that chat works out of the box, with no download:

    user:       How many days are in February 2024?        assistant: 29
    user:       Is 2023 a leap year?          assistant: No
    user:       Write March 4, 2021 as YYYY-MM-DD.         assistant: 2021-03-04

It knows nothing else: any other question still gets a short answer of one of these
kinds, which should not be trusted.

**Held-out exact-match accuracy: {100 * m['exact_match_accuracy']:.2f} %** ({m['exact_match_correct']} of
{m['heldout_examples']} conversations whose problems training never saw; greedy decoding in float32
PyTorch of the prompt the chat template renders, until `<|im_end|>`; the answer text must
equal the expected one exactly).

Trained by `tools/train_chat.py` in {m['train_seconds'] / 60:.1f} minutes ({m['iterations']} steps of
{hp['batch_size']} conversations, {m['wall_seconds'] / 60:.1f} minutes with the tokenizer, evaluation and export) on
{m['hardware']['threads']} cores of an `{m['hardware']['cpu']}` (`lscpu`; a machine shared with other jobs, so
the time is noisy).

| held-out task | exact match | held-out problems |
|---|---|---|
{tasks}

## Files

| file | content |
|---|---|
| `config.json` | Hugging Face `LlamaForCausalLM` keys |
| `model.safetensors` | F32 weights, HF Llama names, tied head (no `lm_head.weight`) ({size:,} bytes) |
| `tokenizer.json` | Hugging Face `tokenizers` serialization: byte-level BPE in Qwen2's layout |
| `tokenizer_config.json` | `chat_template`, `eos_token` `<|im_end|>`, `pad_token` `<|endoftext|>`, no BOS (`bos_token` null, `add_bos_token` false), as Qwen2's |
| `chat_template.jinja` | the same template in its own file (transformers ≥ 4.43 reads it there too) |
| `generation_config.json` | `eos_token_id` [{m['special_tokens']['<|im_end|>']}, {m['special_tokens']['<|endoftext|>']}] (`<|im_end|>`, `<|endoftext|>`): either ends a generation |
| `heldout.jsonl` | the held-out conversations, one JSON object per line (below) |
| `metrics.json` | the run's figures, hyperparameters, hardware, command |

## Chat template (ChatML)

Qwen2.5's shape without the tool branches: the system message first (`{data.DEFAULT_SYSTEM}`
when the conversation has none), then every message as
`<|im_start|>ROLE\\nCONTENT<|im_end|>\\n`, and with `add_generation_prompt` the opening
`<|im_start|>assistant\\n`. A one-turn conversation renders as

```
{example}```

The training text is rendered by jinja2 with transformers' settings
(`ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`), so it is exactly
the prompt a server renders from the same messages.

## Tokenizer

Byte-level BPE with Qwen2's normalizer (NFC), pre-tokenizer (its regex, which splits
digits one by one, then ByteLevel) and decoder (ByteLevel). Vocabulary {cfg['vocab_size']}: ids 0–255 are
the 256 byte symbols (id = byte value), {m['tokenizer']['merges']} merges learnt on {hp['bpe_corpus']:,}
rendered training conversations fill ids 256–{N_REGULAR - 1}, then the special tokens
`<|endoftext|>` {m['special_tokens']['<|endoftext|>']}, `<|im_start|>` {m['special_tokens']['<|im_start|>']}, `<|im_end|>` {m['special_tokens']['<|im_end|>']}.
A rendered one-turn conversation is about {m['tokenizer']['mean_tokens_per_conversation']:.0f} tokens.
Hugging Face's own library (`tokenizers` {m['tokenizer'].get('hf_tokenizers_version', '?')}, npm) encodes
{m['tokenizer'].get('hf_checked_texts', 0)} rendered training and held-out texts to the same ids as the script:
{m['tokenizer'].get('hf_agrees', 'not checked')}.

## Data (tools/chat_dataset.py)

| task | phrasings |
|---|---|
{phrasings}

* Years 1901–2099 (the leap rule is then "divisible by 4"). Two-digit addition and
  subtraction were tried and left out (tools/chat_dataset.py says why). `iso_date` writes the date as `March 4, 2021`, `4 March 2021` or
  `3/4/2021` (month/day/year).
* System prompts (training draws the first 55 % of the time; the held-out set leaves the
  system message out in a quarter of its conversations, so the template's default stands
  in, and picks one of these uniformly otherwise):
{systems}
* A quarter of the training conversations have an earlier question and answer (batches
  of similar lengths); every assistant message is trained on (its tokens and the `<|im_end|>` closing it), nothing else
  is (system and user text, the template's markup).
* Fresh conversations every step (seed {hp['seed']}); there is no fixed training set.

**Held-out split by problem**: a seeded shuffle sets aside 10 % of each task's problems —
years (for `days_in_month` and `leap_year` together) and dates — and training
never asks about them in any phrasing. The held-out questions are distinct.

`heldout.jsonl`, one object per line: `task`, `messages` (the conversation without the
answer), `answer`, `prompt` (the template's rendering with `add_generation_prompt`: the
exact text to send as a raw prompt), `prompt_ids` (its ids), `prediction` and
`prediction_ids` (PyTorch's greedy answer, without the closing `<|im_end|>`), `correct`.
The C++ decoder, given `prompt` and greedy decoding until `<|im_end|>`, is expected to
produce `prediction` for every line (`tests/model/chat_model_test.cc`). The smallest gap
between the top two logits over every greedy step of the held-out set is
{m.get('greedy_min_logit_margin', 'n/a')} (conversations with a step below 1: {m.get('greedy_logit_margins_below_1', 'n/a')}).
`tools/reference_model.py` (float64) agrees with the training forward on {m.get('reference_model_sequences', 0)} exported
held-out sequences to {m.get('reference_model_max_logit_diff', 'n/a')} in the logits.

## Model

| | |
|---|---|
| architecture | Llama: {cfg['num_hidden_layers']} layers, pre-RMSNorm (eps {cfg['rms_norm_eps']}), SwiGLU MLP, tied head |
| width / heads / MLP | hidden {cfg['hidden_size']}, {cfg['num_attention_heads']} heads of {cfg['head_dim']} ({cfg['num_key_value_heads']} key/value heads), intermediate {cfg['intermediate_size']} |
| positions | RoPE (HF rotate_half), θ {cfg['rope_theta']:g}, context {cfg['max_position_embeddings']} tokens |
| vocabulary | {cfg['vocab_size']} |
| parameters | {m['params']:,} ({size / 1e6:.1f} MB, F32 safetensors) |

## Training

AdamW (β 0.9 / 0.98, weight decay {hp['weight_decay']} on matrices), batch {hp['batch_size']} conversations,
learning rate {hp['lr']} after {hp['warmup_iters']} warm-up steps, cosine decay to {hp['min_lr']} over the budget
({hp['max_iters']} steps or {hp['max_minutes']} minutes, whichever ends first: this run made
{m['iterations']} steps), gradient clipping {hp['grad_clip']}, matrices N(0, {hp['init_std']}) (o_proj and down_proj
/ sqrt(2 × layers)). Matrix multiplies in bfloat16 autocast; weights, optimizer, norms,
softmax and loss in float32; evaluation and export in float32. The loss is the mean
cross-entropy over the assistant tokens of the batch.

Training loss (nats per assistant token, mean over the last {hp['log_every']} steps): {curve}.

Retrain (writes this directory; about {m['wall_seconds'] / 60:.0f} minutes here):

    {m['command']}

The step count depends on the machine's speed (the minutes budget), so a rerun gives a
similar, not a byte-identical, model; `--max_minutes 0 --max_iters N` fixes the schedule.

## Limitations

* Only the three kinds of questions above, in phrasings close to the ones listed, with
  years 1901–2099. Arithmetic, other date formats or free conversation were never seen.
* It does not refuse: an unknown question still gets an answer in one of the three shapes.
* Its held-out errors:
{errors}
"""
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write(card)
