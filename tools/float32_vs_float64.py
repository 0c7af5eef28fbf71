#!/usr/bin/env python3
"""How far float32 arithmetic itself lands from the float64 reference on a golden checkpoint.

Runs tools/reference_model.py's forward twice on the checkpoint and ids of a golden directory
(tools/make_golden.py): in float64, as the goldens are made, and in float32, as PyTorch
would run the model. The gap between the two is the float32 rounding any float32
implementation accumulates; a parity bound below it cannot be met by float32 code (see the
deep-shape bound in tests/model/parity_test.cc).

Usage:
    /usr/bin/python3 tools/float32_vs_float64.py GOLDEN_DIR
e.g. the SmolLM2-135M-shaped checkpoint that `ctest -R make_smollm2_135m_checkpoint` writes
into build/tests/generated_golden/smollm2_135m.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model as ref  # noqa: E402
from safetensors_io import load_file  # noqa: E402


def main() -> None:
    directory = sys.argv[1]
    torch.set_num_threads(1)
    cfg, weights = ref.load_model(directory)
    ids = load_file(os.path.join(directory, "golden.safetensors"))["input_ids"]
    logits64, _ = ref.forward(cfg, weights, ids)
    ref.DTYPE = torch.float32  # forward() converts the weights to ref.DTYPE.
    logits32, _ = ref.forward(cfg, weights, ids)
    gap = float((logits32.double() - logits64).abs().max())
    print(f"{directory}: float32 vs float64 logits, max |difference| {gap:.3g} "
          f"(logits {float(logits64.min()):.1f} .. {float(logits64.max()):.1f})")


if __name__ == "__main__":
    main()
