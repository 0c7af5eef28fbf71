#!/bin/sh
# Writes the quantized GGUF files gguf_quantized_test reads: the random-weight
# models of tools/make_quantize_test_models.py (LLaMA with d_model 320, GPT-2
# with 384 — both fall back to legacy types where rows are not multiples of
# 256 — and a 12-layer Qwen2 with 256) quantized by textgen_quantize, which is
# byte-identical to llama-quantize (tests/tools/quantize_test.py).
#   make_quantized_gguf_files.sh PYTHON SOURCE_DIR TEXTGEN_QUANTIZE OUT_DIR
set -eu
python=$1 source=$2 quantize=$3 out=$4
mkdir -p "$out"
"$python" "$source/tools/make_quantize_test_models.py" "$out"
for model in llama2 gpt2; do
  for type in Q4_K_M Q5_K_M Q3_K_M Q2_K Q6_K Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL IQ4_XS; do
    "$quantize" --quiet "$out/${model}_f32.gguf" "$out/${model}_${type}.gguf" "$type"
  done
done
"$quantize" --quiet "$out/qwen2_f32.gguf" "$out/qwen2_Q4_K_M.gguf" Q4_K_M
