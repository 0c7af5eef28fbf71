"""The instruct model's tokenizer (tools/train_chat.py): byte-level BPE laid out as Qwen2's
tokenizer.json (NFC, Qwen2's Split regex with digits one by one, ByteLevel), 256 byte
symbols, merges learnt on training text up to N_REGULAR entries, then the special tokens.
The encoder is plain Python (the text is ASCII, so \\p{L} / \\p{N} are [A-Za-z] / [0-9]);
hf_encode runs Hugging Face's own library (the npm package `tokenizers`) to check it.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_REGULAR = 445       # byte symbols + learnt merges; the special tokens follow (vocab 448)

# Qwen2's pre-tokenizer regex, and the same for ASCII text in Python's re.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
ASCII_PATTERN = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
                           r"| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (ByteLevel)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = bytes_to_unicode()


def pre_tokenize(text: str) -> list[str]:
    """Split (Qwen2 regex, Isolated) then ByteLevel: byte-level symbol strings."""
    assert text.isascii(), "the ASCII regex stands for Qwen2's only on ASCII text"
    pieces = ASCII_PATTERN.findall(text)
    assert "".join(pieces) == text
    return ["".join(BYTE_CHARS[b] for b in p.encode("utf-8")) for p in pieces]


def learn_merges(texts: list[str], n_regular: int) -> list[tuple[str, str]]:
    """Byte-level BPE training: repeatedly merge the most frequent adjacent pair (ties: the
    smallest pair) until the vocabulary has n_regular entries."""
    counts: dict[tuple[str, ...], int] = {}
    for text in texts:
        for segment in SPECIAL_SPLIT.split(text):
            if segment in SPECIAL_TOKENS or not segment:
                continue
            for word in pre_tokenize(segment):
                key = tuple(word)
                counts[key] = counts.get(key, 0) + 1
    vocab = set(BYTE_CHARS.values())
    merges = []
    words = dict(counts)
    while len(vocab) < n_regular:
        pairs: dict[tuple[str, str], int] = {}
        for word, c in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] = pairs.get(pair, 0) + c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab.add(best[0] + best[1])
        words = {merge_word(w, best): c for w, c in words.items()}
    return merges


def merge_word(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


class Tokenizer:
    def __init__(self, merges: list[tuple[str, str]]):
        self.merges = [tuple(m) for m in merges]
        self.rank = {m: i for i, m in enumerate(self.merges)}
        self.vocab = {BYTE_CHARS[b]: b for b in range(256)}
        for a, b in self.merges:
            self.vocab.setdefault(a + b, len(self.vocab))
        assert len(self.vocab) <= N_REGULAR
        self.special = {t: N_REGULAR + i for i, t in enumerate(SPECIAL_TOKENS)}
        self.size = N_REGULAR + len(SPECIAL_TOKENS)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.special.items()})
        self.byte_of = {c: b for b, c in BYTE_CHARS.items()}
        self.cache: dict[str, list[int]] = {}
        self.im_start, self.im_end = self.special["<|im_start|>"], self.special["<|im_end|>"]
        self.endoftext = self.special["<|endoftext|>"]

    def bpe(self, word: str) -> list[int]:
        if word not in self.cache:
            symbols = tuple(word)
            while len(symbols) > 1:
                ranked = [(self.rank.get(p, math.inf), p) for p in zip(symbols, symbols[1:])]
                r, best = min(ranked)
                if r == math.inf:
                    break
                symbols = merge_word(symbols, best)
            self.cache[word] = [self.vocab[s] for s in symbols]
        return self.cache[word]

    def encode(self, text: str) -> list[int]:
        ids = []
        for segment in SPECIAL_SPLIT.split(text):
            if segment in self.special:
                ids.append(self.special[segment])
            elif segment:
                for word in pre_tokenize(segment):
                    ids += self.bpe(word)
        return ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        out, raw = [], bytearray()
        for i in ids:
            token = self.id_to_token[i]
            if i >= N_REGULAR:
                out.append(raw.decode("utf-8", "replace"))
                raw = bytearray()
                if not skip_special:
                    out.append(token)
            else:
                raw += bytes(self.byte_of[c] for c in token)
        out.append(raw.decode("utf-8", "replace"))
        return "".join(out)

    def to_json(self) -> dict:
        """tokenizer.json, Qwen2's layout."""
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                      "use_regex": False}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True}
                             for t, i in self.special.items()],
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated",
                 "invert": False},
                dict(byte_level)]},
            "post_processor": dict(byte_level),
            "decoder": dict(byte_level),
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": dict(sorted(self.vocab.items(), key=lambda kv: kv[1])),
                      "merges": [f"{a} {b}" for a, b in self.merges]},
        }


def hf_encode(package: str, tokenizer_json: str, texts: list[str]) -> list[list[int]] | None:
    """Encodes `texts` with Hugging Face's tokenizers (npm, Rust); None if unavailable."""
    if not os.path.isdir(package):
        return None
    script = """
const { Tokenizer } = require(process.argv[1]);
const texts = JSON.parse(require('fs').readFileSync(0, 'utf8'));
(async () => {
  const tok = Tokenizer.fromFile(process.argv[2]);
  const out = [];
  for (const t of texts) out.push(Array.from((await tok.encode(t, null, {addSpecialTokens: false})).getIds()));
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""
    try:
        r = subprocess.run(["node", "-e", script, package, tokenizer_json],
                           input=json.dumps(texts), capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"Hugging Face tokenizers check not run: {e}", flush=True)
        return None
    return json.loads(r.stdout)
