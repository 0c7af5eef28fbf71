#!/usr/bin/env python3
"""A vocabulary-only GGUF from a Hugging Face byte-level BPE tokenizer.json, for llama.cpp.

    /usr/bin/python3 bench/peers/tokenizer_gguf.py TOKENIZER_DIR OUT.gguf [--pre qwen2]

llama.cpp reads vocabularies from GGUF only; bench/peers/grammar_peer.cc loads this file with
llama_model_params::vocab_only to run llama.cpp's grammar sampler over the same vocabulary as
textgen's constraint bench. The keys are the ones llama.cpp's convert_hf_to_gguf.py writes for a
GPT-2-style BPE model (its get_vocab_base and gguf.SpecialVocab), written here with
tools/gguf_writer.py so no transformers or gguf-py is needed:

  general.architecture      "qwen3" by default (vocab_only loading reads nothing else of it)
  tokenizer.ggml.model      "gpt2" (byte-level BPE)
  tokenizer.ggml.pre        the pre-tokenizer's name in llama.cpp (Qwen2 and Qwen3: "qwen2")
  tokenizer.ggml.tokens     every id's token text, 0 .. max id (no padding to the model's
                            embedding rows: the sampler sees exactly the tokenizer's vocabulary)
  tokenizer.ggml.token_type NORMAL (1) for the BPE vocabulary; added tokens CONTROL (3) when
                            "special", USER_DEFINED (4) otherwise, as convert_hf_to_gguf.py does
  tokenizer.ggml.merges     "left right" strings in rank order
  tokenizer.ggml.{eos,padding,bos}_token_id, add_bos_token from tokenizer_config.json

Only what the conversion needs is checked: every id has exactly one token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from gguf_writer import GgufType, GgufWriter  # noqa: E402

NORMAL, CONTROL, USER_DEFINED = 1, 3, 4


def token_id(tokens: dict[str, int], entry) -> int | None:
    """A tokenizer_config.json token entry (a string or {"content": ...}) as an id."""
    if isinstance(entry, dict):
        entry = entry.get("content")
    return tokens.get(entry) if isinstance(entry, str) else None


def build(tokenizer_dir: str, pre: str, arch: str) -> GgufWriter:
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    model = tok["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"not a BPE tokenizer: {model.get('type')}")
    by_id: dict[int, tuple[str, int]] = {i: (t, NORMAL) for t, i in model["vocab"].items()}
    for added in tok.get("added_tokens", []):
        by_id[added["id"]] = (added["content"], CONTROL if added["special"] else USER_DEFINED)
    n = max(by_id) + 1
    if len(by_id) != n:
        raise ValueError(f"ids are not 0..{n - 1} without gaps ({len(by_id)} tokens)")
    texts = [by_id[i][0] for i in range(n)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    config = {}
    config_path = os.path.join(tokenizer_dir, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    ids = {t: i for i, t in enumerate(texts)}

    w = GgufWriter()
    w.add("general.architecture", arch)
    w.add("tokenizer.ggml.model", "gpt2")
    w.add("tokenizer.ggml.pre", pre)
    w.add("tokenizer.ggml.tokens", texts, GgufType.ARRAY, GgufType.STRING)
    w.add("tokenizer.ggml.token_type", [by_id[i][1] for i in range(n)], GgufType.ARRAY,
          GgufType.INT32)
    w.add("tokenizer.ggml.merges", merges, GgufType.ARRAY, GgufType.STRING)
    for key, name in (("eos", "eos_token"), ("padding", "pad_token"), ("bos", "bos_token")):
        i = token_id(ids, config.get(name))
        if i is not None:
            w.add(f"tokenizer.ggml.{key}_token_id", i, GgufType.UINT32)
    w.add("tokenizer.ggml.add_bos_token", bool(config.get("add_bos_token", False)))
    return w


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out")
    ap.add_argument("--pre", default="qwen2", help="llama.cpp's pre-tokenizer name")
    ap.add_argument("--arch", default="qwen3")
    args = ap.parse_args(argv)
    build(args.tokenizer_dir, args.pre, args.arch).write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
