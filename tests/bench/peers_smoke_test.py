#!/usr/bin/env python3
"""Smoke test of bench/peers/peers.py --quick: textgen and llama.cpp both run the same GGUF.

    peers_smoke_test.py PEERS_SCRIPT TEXTGEN_MODEL_BENCH

Needs a built llama.cpp: $TEXTGEN_LLAMA_CPP_BUILD, a build directory holding bin/llama-bench
(bench/README.md, "Peers: llama.cpp", says how to make one from a fetched snapshot). Without
it the test is skipped (exit 77): llama.cpp is never vendored or downloaded, so CI has none.
With it: the tiny golden GPT-2 is written as GGUF F32/F16/BF16/Q8_0, both engines time it at
1 and 2 threads, and the table must hold every row with positive figures and each ratio equal
to textgen / llama.cpp. Then, if the build has bin/llama-quantize, the same with the F32 file
quantized to Q4_0 and Q4_K_M (--types f32,q4_0,q4_k_m): every row there, llama.cpp's figures
positive, textgen's positive or "—" where the row says textgen cannot load the file yet, and
each decode bound share equal to decode / bound. Never a timing.
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


def main() -> None:
    script, model_bench = sys.argv[1], sys.argv[2]
    llama = os.environ.get("TEXTGEN_LLAMA_CPP_BUILD")
    if not llama:
        print("SKIP: $TEXTGEN_LLAMA_CPP_BUILD is not set (a llama.cpp build directory with "
              "bin/llama-bench; see bench/README.md, 'Peers: llama.cpp')")
        sys.exit(SKIP)
    if not os.access(os.path.join(llama, "bin", "llama-bench"), os.X_OK):
        fail(f"$TEXTGEN_LLAMA_CPP_BUILD={llama} has no bin/llama-bench")
    p = run_quick(script, llama, model_bench, [])
    out = p.stdout + p.stderr
    if p.returncode != 0:
        fail(f"exit status {p.returncode}", out)
    print(p.stdout)
    if not re.search(r"^- CPU: .+; \d{4}-\d\d-\d\d", p.stdout, re.M):
        fail("no CPU model and date", out)
    # llama.cpp's best settings: every figure's winner named, round by round.
    won = re.findall(r"^- (\S+) (prefill|decode), ([12]) thread\(s\): OMP_WAIT_POLICY=(\S+), "
                     r"-mmp [01]$", p.stdout, re.M)
    if len(won) < 4:
        fail("llama.cpp's winning settings are not listed per figure", out)
    rows = [line for line in p.stdout.splitlines() if re.match(r"\| [12] \|", line)]
    labels = ["F32", "BF16 vs F16", "BF16 vs BF16", "INT8 vs Q8_0", "W8A32 vs Q8_0",
              "**best of each**"]
    expected = [(t, label) for t in ("1", "2") for label in labels]
    got = [tuple(c.strip() for c in row.strip("|").split("|")[:2]) for row in rows]
    if got != expected:
        fail(f"rows {got}, expected {expected}", out)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")[2:]]
        for ours, theirs, ratio in (cells[0:3], cells[3:6]):
            o, t, r = float(ours), float(theirs), float(ratio.rstrip("×"))
            if not (o > 0 and t > 0):
                fail(f"non-positive figure in {row}", out)
            if abs(r - o / t) > 0.006 + 0.001 * r:
                fail(f"ratio {r} is not {o} / {t} in {row}", out)
    if not os.access(os.path.join(llama, "bin", "llama-quantize"), os.X_OK):
        print(f"PASS: {len(rows)} rows (no bin/llama-quantize: quantized pairs not run)")
        return
    p = run_quick(script, llama, model_bench, ["--types", "f32,q4_0,q4_k_m"])
    out = p.stdout + p.stderr
    if p.returncode != 0:
        fail(f"quantized pairs: exit status {p.returncode}", out)
    print(p.stdout)
    quantized = [line for line in p.stdout.splitlines() if re.match(r"\| [12] \|", line)]
    got = [tuple(c.strip() for c in row.strip("|").split("|")[:2]) for row in quantized]
    labels = [(t, label) for t in ("1", "2")
              for label in ("F32", "Q4_0", "Q4_0, int8 activations", "Q4_K_M",
                            "Q4_K_M, int8 activations")]
    if [(t, label.split(" (")[0]) for t, label in got if "best" not in label] != labels:
        fail(f"quantized pairs: rows {got}", out)
    for row in quantized:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if "best" in cells[1]:
            continue
        refused = "(textgen: cannot load)" in cells[1]
        for ours, theirs in ((cells[2], cells[3]), (cells[5], cells[6])):
            if float(theirs) <= 0:
                fail(f"non-positive llama.cpp figure in {row}", out)
            if (ours == "—") != refused or (not refused and float(ours) <= 0):
                fail(f"textgen's cell {ours!r} in {row}", out)
        bound, share = float(cells[8]), cells[10]
        if abs(float(share.rstrip(" %")) - 100 * float(cells[6]) / bound) > 1:
            fail(f"llama.cpp's share of the bound is not decode / bound in {row}", out)
    print(f"PASS: {len(rows)} rows; quantized pairs: {len(quantized)} rows")


def run_quick(script: str, llama: str, model_bench: str,
              extra: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="peers-smoke-") as work:
        cmd = ["/usr/bin/python3", script, "--quick", "--llama_cpp", llama,
               "--textgen_bench", model_bench, "--work", work, *extra]
        print("+", " ".join(cmd), flush=True)
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=600)


if __name__ == "__main__":
    main()
