#!/usr/bin/env python3
"""tools/textgen_kl on the tiny golden GPT-2 (tests/golden/gpt2_learned), token ids fed.

    textgen_kl_test.py TEXTGEN_KL GOLDEN_DIR

- A model against itself: mean KLD within the 16-bit rounding of the base (|KLD| < 1e-4),
  same top p 100 %, PPL(Q) the base pass's PPL.
- bf16 weights against the f32 base: a KLD above that rounding, and the very same output
  whether the base is computed in the run or saved with --save_base and read back with
  --base_logits (the file is the base, tokens included).
- The saved file is llama.cpp's layout: "_logits_", n_ctx, n_vocab, n_chunk, the tokens.
- Bad arguments fail with a message, exit status 1.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import tempfile


def fail(msg: str, output: str = "") -> None:
    print(f"FAIL: {msg}\n--- output ---\n{output}", file=sys.stderr)
    sys.exit(1)


def run(tool: str, *args: str, ok: bool = True) -> str:
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=300)
    if ok and p.returncode != 0:
        fail(f"{' '.join(args)}: exit status {p.returncode}", p.stdout + p.stderr)
    if not ok and p.returncode != 1:
        fail(f"{' '.join(args)}: exit status {p.returncode}, expected 1", p.stdout + p.stderr)
    return p.stdout if ok else p.stderr


def stat(out: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}\s*:\s*(-?[\d.]+)", out, re.M)
    if not m:
        fail(f"no '{name}' line", out)
    return float(m.group(1))


def main() -> None:
    tool, golden = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="textgen-kl-") as tmp:
        tokens = os.path.join(tmp, "tokens.txt")
        ids = [(i * 31 + 7) % 97 for i in range(3 * 64 + 5)]  # 3 chunks of 64, 5 over
        with open(tokens, "w") as f:
            f.write(",".join(map(str, ids[:100])) + "\n" + " ".join(map(str, ids[100:])))
        common = ["--tokens=" + tokens, "--ctx=64"]

        same = run(tool, "--base_model=" + golden, "--test_model=" + golden, *common)
        if abs(stat(same, "Mean    KLD")) >= 1e-4:
            fail("a model against itself", same)
        if stat(same, "Same top p") != 100.0:
            fail("a model against itself: same top p is not 100 %", same)
        final = re.search(r"^Final estimate: PPL = ([\d.]+) \+/- [\d.]+$", same, re.M)
        if not final:
            fail("no base PPL line", same)
        # The same model's NLLs; PPL(base) differs where a target is more than 16 nats
        # below the top, which the base's rows clip (as llama.cpp's do).
        if abs(stat(same, "Mean PPL(Q)") / float(final.group(1)) - 1) > 1e-6:
            fail("a model against itself: PPL(Q) is not the base pass's PPL", same)

        base = os.path.join(tmp, "base.kld")
        in_run = run(tool, "--base_model=" + golden, "--test_model=" + golden + ":bf16",
                     "--save_base=" + base, *common)
        kld = stat(in_run, "Mean    KLD")
        if not 1e-4 < kld < 0.1:
            fail(f"bf16 against f32: KLD {kld}", in_run)
        from_file = run(tool, "--base_logits=" + base, "--test_model=" + golden + ":bf16")
        stats = in_run[in_run.index("======"):]
        if from_file.strip() != stats.strip():
            fail("the saved base gives other figures", in_run + "\n---\n" + from_file)
        with open(base, "rb") as f:
            head = f.read(20 + 4 * 192)
        n_ctx, n_vocab, n_chunk = struct.unpack("<3i", head[8:20])
        if head[:8] != b"_logits_" or (n_ctx, n_vocab, n_chunk) != (64, 97, 3):
            fail(f"header {head[:8]!r} {n_ctx} {n_vocab} {n_chunk}")
        if list(struct.unpack("<192i", head[20:])) != ids[:192]:
            fail("the file's tokens are not the input's first 3 chunks")
        expected = 20 + 4 * 192 + 2 * 3 * (64 - 1 - 32) * (98 + 4)
        if os.path.getsize(base) != expected:
            fail(f"size {os.path.getsize(base)}, expected {expected}")

        err = run(tool, "--test_model=" + golden, *common, ok=False)
        if "--base_model or --base_logits" not in err:
            fail("no base: the message", err)
        err = run(tool, "--base_model=" + golden, "--test_model=" + golden,
                  "--tokens=" + tokens, "--ctx=1000", ok=False)
        if "--ctx=1000" not in err:
            fail("a chunk longer than the context: the message", err)
    print(f"PASS: bf16 KLD {kld:.6f}; saved base reproduces the run")


if __name__ == "__main__":
    main()
