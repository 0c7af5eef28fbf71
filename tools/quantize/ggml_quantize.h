// ggml's reference quantizers, ported: float rows to the block types of
// model/kernels/ggml_blocks.h, byte for byte what llama.cpp's
// ggml_quantize_chunk(type, src, dst, 0, rows, row_values, imatrix = NULL)
// writes (and so what llama-quantize writes without an importance matrix):
//   Q4_0 Q4_1 Q5_0 Q5_1 Q8_0   quantize_row_*_ref: one scale (and min) per
//                              32 values from the block's max / min;
//   Q2_K Q3_K Q4_K Q5_K Q6_K   quantize_row_*_ref: per-sub-block scales
//                              fitted by make_qkx2_quants / make_q3_quants /
//                              make_qx_quants, then quantized themselves;
//   IQ4_NL IQ4_XS              quantize_iq4_nl / quantize_iq4_xs (7 trial
//                              scales each side of the first guess).
//
// Bit-exactness with llama.cpp rests on doing the same float operations in
// the same order: every expression is ggml's, operand for operand, and these
// files are compiled with -ffp-contract=off, as ggml-quants.c effectively is
// (llama.cpp's CMake builds ggml-base for baseline x86-64, which has no fused
// multiply-add to contract into). tests/tools/ggml_quantize_test.cc holds
// every type to bytes llama.cpp wrote (tests/model/kernels/testdata/).
//
// Only the quantization tool and tests link this library; the server reads
// quantized files and never writes them.
#ifndef TEXTGEN_TOOLS_QUANTIZE_GGML_QUANTIZE_H_
#define TEXTGEN_TOOLS_QUANTIZE_GGML_QUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model/kernels/ggml_blocks.h"

namespace textgen::quantize {

// Quantizes `rows` rows of `row_values` floats each (contiguous) into `dst`,
// rows * RowBytes(type, row_values) bytes. row_values must be a multiple of
// the type's block values; the floats should be finite (ggml gives
// meaningless blocks otherwise). Rows are independent: quantizing them one
// at a time, or in any split among threads, gives the same bytes.
void QuantizeRows(kernels::BlockType type, const float* src, int64_t rows,
                  int64_t row_values, uint8_t* dst);

// Bytes of one row of `row_values` values of `type`.
size_t RowBytes(kernels::BlockType type, int64_t row_values);

using kernels::FloatToHalf;

// float -> bfloat16, round to nearest even, NaN made quiet: ggml's
// ggml_compute_fp32_to_bf16.
uint16_t FloatToBf16(float f);

// ggml's nearest_int: round to nearest (ties to even) by adding 1.5 * 2^23
// and reading the mantissa; valid for |x| <= 4194303, and deterministic
// (however meaningless) beyond.
inline int NearestInt(float x) {
  const float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace textgen::quantize

#endif  // TEXTGEN_TOOLS_QUANTIZE_GGML_QUANTIZE_H_
