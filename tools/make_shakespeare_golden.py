#!/usr/bin/env python3
"""Writes the golden greedy continuation of the shipped character model.

PyTorch (tools/reference_model.py, float64, on the weights as stored) continues a prompt
greedily, one character at a time, recomputing the whole prefix each step; the C++ test
(tests/model/shipped_model_test.cc) must produce the same characters with its KV cache.
Also records, per step, the gap between the best and second-best logit: the smallest gap
says how close the continuation came to a tie that float32 rounding could break.

    /usr/bin/python3 tools/make_shakespeare_golden.py            # models/shakespeare-char
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import reference_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "shakespeare-char"))
    parser.add_argument("--prompt", default="ROMEO:")
    parser.add_argument("--n", type=int, default=200, help="characters to generate")
    parser.add_argument("--out",
                        default=os.path.join(ROOT, "tests", "golden", "shakespeare_char_greedy.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    cfg, weights = reference_model.load_model(args.model)
    with open(os.path.join(args.model, "char_vocab.json"), encoding="utf-8") as f:
        chars = json.load(f)["chars"]
    stoi = {c: i for i, c in enumerate(chars)}
    ids = [stoi[c] for c in args.prompt]
    if len(ids) + args.n > cfg["n_positions"]:
        sys.exit(f"prompt + {args.n} characters exceed the context {cfg['n_positions']}")

    generated, gaps = [], []
    for _ in range(args.n):
        logits, _ = reference_model.forward(cfg, weights, torch.tensor(ids))
        top2 = torch.topk(logits[-1], 2).values
        gaps.append(float(top2[0] - top2[1]))
        next_id = int(torch.argmax(logits[-1]))
        ids.append(next_id)
        generated.append(next_id)

    golden = {
        "generator": "tools/make_shakespeare_golden.py (reference_model.py, float64)",
        "torch": torch.__version__,
        "prompt": args.prompt,
        "generated_ids": generated,
        "continuation": "".join(chars[i] for i in generated),
        "min_top2_logit_gap": min(gaps),
    }
    out = args.out
    with open(out, "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {out}: {args.prompt!r} + {golden['continuation']!r}")
    print(f"smallest gap between the two best logits: {golden['min_top2_logit_gap']:.4g}")


if __name__ == "__main__":
    main()
