#!/usr/bin/env python3
"""textgen_quantize writes, byte for byte, the files llama.cpp's llama-quantize writes.

    quantize_test.py TEXTGEN_QUANTIZE [HASHES_JSON]

The random-weight models of tools/make_quantize_test_models.py (LLaMA with d_model 320 and
GQA, GPT-2 with fused QKV and position embeddings, a 12-layer tied Qwen2; F32, and F16 / BF16
inputs) are written to a temporary directory and checked against the SHA-256s recorded in
tests/tools/testdata/quantize_hashes.json; each case there (every file type: Q4_0 .. Q8_0,
the K-quant mixes Q2_K .. Q6_K, IQ4_NL/XS, F16, BF16, F32; --pure; an alias) is quantized by
textgen_quantize and its SHA-256 must equal the one llama-quantize's output had
(tools/record_llama_quantize_hashes.py). Needs no llama.cpp.

When $TEXTGEN_LLAMA_CPP_BUILD has bin/llama-quantize, every case is also run through it now
and the two files compared byte for byte. A difference is reported as the first key, tensor
info or tensor whose bytes differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))
import make_quantize_test_models  # noqa: E402

DEFAULT_HASHES = os.path.join(SOURCE_DIR, "tests", "tools", "testdata", "quantize_hashes.json")
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 20: "IQ4_NL",
              23: "IQ4_XS", 30: "BF16"}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_gguf(path: str) -> dict:
    """Keys (raw bytes each), tensor infos and tensor bytes of a GGUF file, for reports."""
    with open(path, "rb") as f:
        raw = f.read()
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", raw, 8)

    def string(p: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("<Q", raw, p)
        return raw[p + 8:p + 8 + n].decode("utf-8", "replace"), p + 8 + n

    def skip(p: int, t: int) -> int:
        if t == 8:
            return string(p)[1]
        if t == 9:
            et, count = struct.unpack_from("<IQ", raw, p)
            p += 12
            for _ in range(count):
                p = skip(p, et)
            return p
        return p + SCALAR[t]

    keys, alignment = [], 32
    for _ in range(n_kv):
        start = pos
        key, pos = string(pos)
        (t,) = struct.unpack_from("<I", raw, pos)
        end = skip(pos + 4, t)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", raw, pos + 4)
        keys.append((key, raw[start:end]))
        pos = end
    infos = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (n_dims,) = struct.unpack_from("<I", raw, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", raw, pos + 4)
        ggml_type, offset = struct.unpack_from("<IQ", raw, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        infos.append((name, dims, ggml_type, offset))
    data = (pos + alignment - 1) // alignment * alignment
    ends = [o for _, _, _, o in infos[1:]] + [len(raw) - data]
    tensors = {name: raw[data + o:data + e] for (name, _, _, o), e in zip(infos, ends)}
    return {"keys": keys, "infos": infos, "tensors": tensors, "size": len(raw)}


def first_difference(ours: str, theirs: str) -> str:
    a, b = read_gguf(ours), read_gguf(theirs)
    for i, (ka, kb) in enumerate(zip(a["keys"], b["keys"])):
        if ka[0] != kb[0]:
            return f"metadata entry {i}: textgen {ka[0]!r}, llama.cpp {kb[0]!r}"
        if ka[1] != kb[1]:
            return f"metadata entry {i} {ka[0]!r}: the values differ"
    if len(a["keys"]) != len(b["keys"]):
        return f"{len(a['keys'])} metadata keys, llama.cpp {len(b['keys'])}"
    for ia, ib in zip(a["infos"], b["infos"]):
        if ia != ib:
            return (f"tensor info: textgen {ia}, llama.cpp {ib} (name, dims, ggml type, "
                    "offset)")
    for name, _, ggml_type, _ in b["infos"]:
        ta, tb = a["tensors"].get(name, b""), b["tensors"][name]
        if ta != tb:
            at = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
            return (f"tensor {name} ({GGML_TYPES.get(ggml_type, ggml_type)}): first "
                    f"differing byte {at}")
    return f"sizes {a['size']} and {b['size']}"


def run(cmd: list[str]) -> None:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
        sys.exit(1)


def main() -> None:
    textgen = sys.argv[1]
    hashes_path = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_HASHES
    with open(hashes_path) as f:
        recorded = json.load(f)
    llama_build = os.environ.get("TEXTGEN_LLAMA_CPP_BUILD", "")
    llama = os.path.join(llama_build, "bin", "llama-quantize") if llama_build else ""
    live = bool(llama) and os.access(llama, os.X_OK)
    if not live:
        print("[quantize] live comparison skipped: no $TEXTGEN_LLAMA_CPP_BUILD/bin/llama-quantize")
    failures = []
    same_recorded = same_live = 0
    with tempfile.TemporaryDirectory(prefix="quantize-test-") as work:
        make_quantize_test_models.main([work])
        for model, digest in recorded["inputs"].items():
            if sha256(os.path.join(work, f"{model}.gguf")) != digest:
                print(f"FAIL: input {model}.gguf is not the one the hashes were recorded from: "
                      "tools/make_quantize_test_models.py changed; rerun "
                      "tools/record_llama_quantize_hashes.py with a llama.cpp build")
                sys.exit(1)
        for case in recorded["cases"]:
            label = f"{case['model']} {case['type']}{' --pure' if case['pure'] else ''}"
            src = os.path.join(work, f"{case['model']}.gguf")
            ours = os.path.join(work, "textgen.gguf")
            flags = ["--pure"] if case["pure"] else []
            run([textgen, "--quiet", "--threads=2"] + flags + [src, ours, case["type"]])
            digest = sha256(ours)
            if digest == case["sha256"]:
                same_recorded += 1
            else:
                failures.append(f"{label}: SHA-256 {digest[:16]}, llama-quantize's recorded "
                                f"{case['sha256'][:16]}")
            if live:
                theirs = os.path.join(work, "llama.gguf")
                run([llama] + flags + [src, theirs, case["type"], "2"])
                with open(ours, "rb") as a, open(theirs, "rb") as b:
                    identical = a.read() == b.read()
                same_live += identical
                if not identical:
                    failures.append(f"{label}: differs from live llama-quantize: "
                                    f"{first_difference(ours, theirs)}")
                elif sha256(theirs) != case["sha256"]:
                    print(f"[quantize] note: {label}: this llama.cpp build writes other bytes "
                          f"than the recorded one ({recorded['llama_cpp']})")
                os.remove(theirs)
            os.remove(ours)
    n = len(recorded["cases"])
    print(f"[quantize] {same_recorded}/{n} files byte-identical to llama-quantize's recorded "
          f"output ({recorded['llama_cpp']})")
    if live:
        print(f"[quantize] {same_live}/{n} files byte-identical to llama-quantize run now "
              f"({llama})")
    for failure in failures:
        print(f"FAIL: {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
