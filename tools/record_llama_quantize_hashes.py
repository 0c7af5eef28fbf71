#!/usr/bin/env python3
"""Records what llama.cpp's llama-quantize writes for the quantization test models.

    /usr/bin/python3 tools/record_llama_quantize_hashes.py --llama_build DIR \
        [--llama_version TEXT] [--out tests/tools/testdata/quantize_hashes.json]

DIR is a llama.cpp build directory with bin/llama-quantize (development time only; never
vendored). The models are tools/make_quantize_test_models.py's; each case below is
quantized by llama-quantize (one thread; the bytes do not depend on it) and the SHA-256 of
every input and output is written to the JSON file, which tests/tools/quantize_test.py
holds build/tools/textgen_quantize to, byte for byte, without llama.cpp.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_quantize_test_models  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(SOURCE_DIR, "tests", "tools", "testdata", "quantize_hashes.json")

# Every file type on the F32 models; the F16 / BF16 inputs on the types whose handling of
# the stored type differs (kept, widened, narrowed).
ALL_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
             "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "F16", "BF16",
             "F32"]
HALF_TYPES = ["Q4_0", "Q4_K_M", "Q5_K_M", "Q8_0", "F16", "BF16", "F32"]


def cases() -> list[dict]:
    out = []
    for model in ("llama2_f32", "gpt2_f32", "qwen2_f32"):
        out += [{"model": model, "type": t, "pure": False} for t in ALL_TYPES]
    for model in ("llama2_f16", "llama2_bf16"):
        out += [{"model": model, "type": t, "pure": False} for t in HALF_TYPES]
    # --pure: every matrix Q4_K (qwen2's rows are all multiples of 256), and an alias.
    out.append({"model": "qwen2_f32", "type": "Q4_K_M", "pure": True})
    out.append({"model": "llama2_f32", "type": "Q4_K", "pure": False})
    return out


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def llama_quantize(binary: str, src: str, dst: str, case: dict) -> None:
    cmd = [binary] + (["--pure"] if case["pure"] else []) + [src, dst, case["type"], "1"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama_build", required=True)
    parser.add_argument("--llama_version", default="unknown",
                        help="recorded as is, e.g. the llama.cpp commit")
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    binary = os.path.join(args.llama_build, "bin", "llama-quantize")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"no {binary}")
    with tempfile.TemporaryDirectory(prefix="quantize-hashes-") as work:
        make_quantize_test_models.main([work])
        inputs = {m: sha256(os.path.join(work, f"{m}.gguf"))
                  for m in make_quantize_test_models.MODELS}
        recorded = []
        for case in cases():
            dst = os.path.join(work, "out.gguf")
            llama_quantize(binary, os.path.join(work, f"{case['model']}.gguf"), dst, case)
            recorded.append(dict(case, sha256=sha256(dst), bytes=os.path.getsize(dst)))
            os.remove(dst)
            print(f"{case['model']} {case['type']}{' --pure' if case['pure'] else ''}: "
                  f"{recorded[-1]['sha256'][:16]}", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"made_by": "tools/record_llama_quantize_hashes.py",
                   "llama_cpp": args.llama_version, "inputs": inputs, "cases": recorded},
                  f, indent=1)
        f.write("\n")
    print(f"wrote {len(recorded)} cases to {args.out}")


if __name__ == "__main__":
    main()
