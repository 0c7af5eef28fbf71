#!/usr/bin/env python3
"""A Hugging Face tokenizer.json (byte-level BPE) as GGUF tokenizer keys, the way llama.cpp's
convert_hf_to_gguf.py writes them (Model._set_vocab_gpt2 / get_vocab_base, gguf-py's
SpecialVocab), without transformers:

  tokenizer.ggml.model      "gpt2"
  tokenizer.ggml.pre        llama.cpp's name for the pre-tokenizer (PRE_TOKENIZERS below)
  tokenizer.ggml.tokens     by id: the model's vocabulary, then the added tokens; ids that
                            neither has, up to the model's vocab_size, are "[PAD<id>]"
  tokenizer.ggml.token_type NORMAL; added tokens CONTROL if special or if they look special
                            ("<|...|>", "<｜...｜>", "<pad>", "<mask>", ...), else USER_DEFINED;
                            "[PAD<id>]" UNUSED
  tokenizer.ggml.merges     "A B" (merges stored as pairs are joined the same way)
  bos/eos/unk/padding_token_id   tokenizer_config.json's bos_token, eos_token, ... (the
                            added token with that content), else config.json's *_token_id
  add_bos_token / add_eos_token  tokenizer_config.json's, else what a TemplateProcessing
                            post-processor puts first / last; absent if neither says
  tokenizer.chat_template   tokenizer_config.json's chat_template (a string)

llama.cpp's converter names the pre-tokenizer by hashing the ids the tokenizer gives a check
text (get_vocab_base_pre). Without transformers this module recognises the tokenizer.json
pipeline itself instead, for the families textgen serves; any other pipeline is refused with
the list of known ones.
"""

from __future__ import annotations

import json
import os

from gguf_writer import GgufType, GgufWriter

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT4O_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
               r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# (normalizer, pre-tokenizer steps, ignore_merges) -> tokenizer.ggml.pre, as llama.cpp's
# converter names the families: GPT-2 "gpt-2" (llama.cpp refuses textgen's older "gpt2"),
# Llama 3 / 3.1 / 3.2 "llama-bpe", Qwen2 / 2.5 / 3 "qwen2", SmolLM / SmolLM2 "smollm" (the
# same pipeline as StarCoder's and Refact's, which llama.cpp reads the same way), GPT-4o
# "gpt-4o". A step is (type, regex or None, behavior, invert, use_regex / individual).
PRE_TOKENIZERS = [
    ((None, (("ByteLevel", None, None, None, True),), False), "gpt-2"),
    ((None, (("Split", LLAMA3_REGEX, "Isolated", False, None),
             ("ByteLevel", None, None, None, False)), True), "llama-bpe"),
    # Llama 3's vocabulary without ignore_merges (Smaug-Llama-3).
    ((None, (("Split", LLAMA3_REGEX, "Isolated", False, None),
             ("ByteLevel", None, None, None, False)), False), "smaug-bpe"),
    (("NFC", (("Split", QWEN2_REGEX, "Isolated", False, None),
              ("ByteLevel", None, None, None, False)), False), "qwen2"),
    ((None, (("Digits", None, None, None, True),
             ("ByteLevel", None, None, None, True)), False), "smollm"),
    ((None, (("Split", GPT4O_REGEX, "Removed", True, None),
             ("ByteLevel", None, None, None, False)), False), "gpt-4o"),
]


def _step(p: dict) -> tuple:
    kind = p.get("type")
    if kind == "ByteLevel":
        if p.get("add_prefix_space"):
            return ("ByteLevel+prefix",)
        return ("ByteLevel", None, None, None, p.get("use_regex", True))
    if kind == "Split":
        pattern = p.get("pattern", {})
        return ("Split", pattern.get("Regex", pattern.get("String")), p.get("behavior"),
                bool(p.get("invert")), None)
    if kind == "Digits":
        return ("Digits", None, None, None, bool(p.get("individual_digits")))
    return (kind,)


def pre_tokenizer_name(tokenizer: dict) -> str:
    normalizer = (tokenizer.get("normalizer") or {}).get("type")
    pre = tokenizer.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    key = (normalizer, tuple(_step(p) for p in steps),
           bool(tokenizer["model"].get("ignore_merges", False)))
    for known, name in PRE_TOKENIZERS:
        if key == known:
            return name
    raise SystemExit(f"tokenizer.json pipeline not recognised (normalizer {normalizer}, "
                     f"pre_tokenizer {json.dumps(pre)[:300]}); known: "
                     + ", ".join(name for _, name in PRE_TOKENIZERS))


def _looks_special(text: str) -> bool:
    # convert_hf_to_gguf.py's does_token_look_special.
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
            or (text.startswith("<unused") and text.endswith(">")))


def _token_content(entry) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("content"), str):
        return entry["content"]
    return None


def add_hf_tokenizer(w: GgufWriter, directory: str, vocab_size: int | None = None,
                     config: dict | None = None) -> None:
    """Adds the tokenizer keys of DIRECTORY/tokenizer.json (+ tokenizer_config.json)."""
    with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    tokenizer_config = {}
    path = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            tokenizer_config = json.load(f)
    model = tokenizer["model"]
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise SystemExit(f"{directory}: only byte-level BPE tokenizer.json files are written "
                         "(SentencePiece-style vocabularies need their tokenizer.model scores)")
    pre = pre_tokenizer_name(tokenizer)

    by_id: dict[int, tuple[str, int]] = {i: (t, NORMAL) for t, i in model["vocab"].items()}
    added = tokenizer.get("added_tokens", [])
    for a in added:
        content = a["content"]
        special = a.get("special") or _looks_special(content)
        by_id[a["id"]] = (content, CONTROL if special else USER_DEFINED)
    size = max(vocab_size or 0, max(by_id) + 1)
    tokens, types = [], []
    for i in range(size):
        text, kind = by_id.get(i, (f"[PAD{i}]", UNUSED))
        tokens.append(text)
        types.append(kind)

    merges = model.get("merges", [])
    if merges and not isinstance(merges[0], str):
        merges = [" ".join("".join(chr(ord(c) + 256) if c == " " else c for c in part)
                           for part in pair) for pair in merges]

    w.add("tokenizer.ggml.model", "gpt2")
    w.add("tokenizer.ggml.pre", pre)
    w.add("tokenizer.ggml.tokens", tokens, GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.token_type", types, GgufType.ARRAY, GgufType.INT32)
    w.add("tokenizer.ggml.merges", merges, GgufType.ARRAY, GgufType.STRING)

    # Special tokens and whether they are added, as gguf-py's SpecialVocab reads them.
    ids, add = {}, {}
    for processor in _processors(tokenizer.get("post_processor")):
        single = processor.get("single", []) if processor.get("type") == "TemplateProcessing" \
            else []
        if len(single) > 1:
            first = single[0].get("SpecialToken", {}).get("id")
            last = single[-1].get("SpecialToken", {}).get("id")
            if first:
                add["bos"] = first == _token_content(tokenizer_config.get("bos_token"))
            if last:
                add["eos"] = last == _token_content(tokenizer_config.get("eos_token"))
    for typ in ("bos", "eos", "unk", "pad"):
        if isinstance(tokenizer_config.get(f"add_{typ}_token"), bool):
            add[typ] = tokenizer_config[f"add_{typ}_token"]
        content = _token_content(tokenizer_config.get(f"{typ}_token"))
        match = next((a["id"] for a in added if a["content"] == content), None)
        if match is None and isinstance((config or {}).get(f"{typ}_token_id"), int):
            match = config[f"{typ}_token_id"]
        if match is not None and match < size:
            ids[typ] = match
    key = {"bos": "bos", "eos": "eos", "unk": "unknown", "pad": "padding"}
    for typ, tid in ids.items():
        w.add(f"tokenizer.ggml.{key[typ]}_token_id", tid, GgufType.UINT32)
    for typ in ("bos", "eos"):
        if typ in add:
            w.add(f"tokenizer.ggml.add_{typ}_token", add[typ], GgufType.BOOL)
    template = tokenizer_config.get("chat_template")
    if isinstance(template, str):
        w.add("tokenizer.chat_template", template)


def _processors(post_processor: dict | None) -> list[dict]:
    if not post_processor:
        return []
    return post_processor.get("processors", [post_processor])
