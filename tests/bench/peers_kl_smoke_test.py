#!/usr/bin/env python3
"""Smoke test of bench/peers/kl.py --quick: KL divergence from the F32 model, both engines.

    peers_kl_smoke_test.py KL_SCRIPT TEXTGEN_KL

Needs a llama.cpp build directory in $TEXTGEN_LLAMA_CPP_BUILD holding bin/llama-bench,
bin/llama-quantize and bin/llama-perplexity (bench/README.md, "Peers: llama.cpp"); skipped
(exit 77) without one, as CI is. With it: the tiny golden GPT-2's F32 file is the base
(written by textgen_kl in llama.cpp's format and read by llama-perplexity), and its Q8_0,
Q4_0, Q4_K_M, Q5_K_M and Q6_K files are scored by both engines. Checked, never a timing:

- every row is there; llama.cpp's cells are figures, textgen's are figures or "—" with a
  note saying why (quantized types it cannot read yet);
- F32 against its own base: textgen's mean KLD is the base's 16-bit rounding (|KLD| < 1e-4,
  same top p 100 %), and llama.cpp's with exact attention too: one base serves both engines;
- Q8_0: a positive KLD from both engines, and no note that they scored different positions.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def fail(msg: str, output: str = "") -> None:
    print(f"FAIL: {msg}\n--- output ---\n{output}", file=sys.stderr)
    sys.exit(1)


def value(cell: str) -> float | None:
    return None if cell == "—" else float(cell.split("±")[0])


def main() -> None:
    script, textgen_kl = sys.argv[1], sys.argv[2]
    llama = os.environ.get("TEXTGEN_LLAMA_CPP_BUILD")
    if not llama:
        print("SKIP: $TEXTGEN_LLAMA_CPP_BUILD is not set (a llama.cpp build directory; see "
              "bench/README.md, 'Peers: llama.cpp')")
        sys.exit(SKIP)
    for tool in ("llama-bench", "llama-quantize", "llama-perplexity"):
        if not os.access(os.path.join(llama, "bin", tool), os.X_OK):
            print(f"SKIP: $TEXTGEN_LLAMA_CPP_BUILD={llama} has no bin/{tool} (build it there: "
                  f"ninja -C {llama} {tool})")
            sys.exit(SKIP)
    with tempfile.TemporaryDirectory(prefix="peers-kl-smoke-") as work:
        cmd = ["/usr/bin/python3", script, "--quick", "--llama_cpp", llama,
               "--textgen_kl", textgen_kl, "--work", work]
        print("+", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=900)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        fail(f"exit status {p.returncode}", out)
    print(p.stdout)
    rows = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 9 and cells[0] not in ("file",):
            rows[cells[0]] = cells
    expected = ["F32", "Q8_0", "Q8_0 (textgen int8)", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"]
    if list(rows) != expected:
        fail(f"rows {list(rows)}, expected {expected}", out)
    for label, cells in rows.items():
        kld = [value(c) for c in cells[2:5]]
        top = [value(c.rstrip(" %")) for c in cells[5:8]]
        if kld[1] is None or kld[2] is None or top[1] is None or top[2] is None:
            fail(f"{label}: no llama.cpp figure", out)
        if kld[0] is None and f"cannot read gpt2_learned-{label.lower()}.gguf" not in p.stdout:
            fail(f"{label}: textgen has no figure and no note says why", out)
    f32 = rows["F32"]
    if abs(value(f32[2])) >= 1e-4 or value(f32[5].rstrip(" %")) != 100.0:
        fail("F32: textgen against its own base is not ~0 KLD, 100 % same top", out)
    if abs(value(f32[4])) >= 1e-4:
        fail("F32: llama.cpp with exact attention is not ~0 KLD against textgen's base", out)
    q8 = rows["Q8_0"]
    if not (value(q8[2]) > 0 and value(q8[3]) > 0):
        fail("Q8_0: the KLDs are not positive", out)
    if "did not score the same positions" in p.stdout:
        fail("the engines scored different positions", out)
    print(f"PASS: {len(rows)} rows")


if __name__ == "__main__":
    main()
