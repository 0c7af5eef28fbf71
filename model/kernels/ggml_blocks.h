// ggml's block-quantized tensor types, as GGUF files store them (ggml's
// ggml-common.h for the layouts, ggml-quants.c's dequantize_row_* for the
// values): the legacy 32-value blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the
// 256-value "K-quants" Q2_K .. Q6_K, and the non-linear IQ4_NL / IQ4_XS.
//
// Every one of them is, per block, the same shape of arithmetic:
//
//   value[i] = (d · scale[s]) · code_value(code[i])  [± m · min[s]]
//
// with s = i / sub_block the sub-block of value i, d (and m) the block's
// fp16 scales widened to float, scale[s] and min[s] small integers, and
// code_value a type's map from a stored code (at most 8 bits) to a small
// integer: code - offset, or IQ4's table. UnpackBlock takes a block apart
// into exactly these numbers; Dequantize computes the formula in ggml's order
// of operations, so its floats equal ggml's dequantize_row_* bit for bit
// (tests/model/kernels/ggml_blocks_test.cc holds it to golden vectors made by
// llama.cpp's own code). The kernels (model/kernels/kernels.h) repack the same
// unpacked numbers into their layout, so they compute these values too.
#ifndef TEXTGEN_MODEL_KERNELS_GGML_BLOCKS_H_
#define TEXTGEN_MODEL_KERNELS_GGML_BLOCKS_H_

#include <cstdint>

namespace textgen::kernels {

// ggml's type numbers (enum ggml_type).
enum class BlockType : uint32_t {
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
};

// How a block's minimum term enters the value.
enum class BlockBias {
  kNone,      // value = (d · scale) · v
  kPlusM,     // value = (d · scale) · v + m          (Q4_1, Q5_1)
  kMinusMin,  // value = (d · scale) · v - (m · min)  (Q2_K, Q4_K, Q5_K)
};

struct BlockLayout {
  BlockType type;
  const char* name;  // "Q4_K", as ggml names it.
  int values;        // Values per block: 32 or 256.
  int bytes;         // Bytes per block.
  int sub_block;     // Values sharing one scale[s] (and min[s]): 16 or 32.
  int code_bits;     // Bits of a code: 2 .. 8.
  BlockBias bias;
  // code_value(c) = c - code_offset, or, for IQ4, kIq4Values[c].
  int code_offset;
  bool iq4_table;
};

// IQ4_NL's and IQ4_XS's 16 code values (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The layout of ggml type `ggml_type`, or null if it is not one of the types
// above (F32, F16, BF16 are not block types; the IQ1/IQ2/IQ3, TQ and MXFP4
// types are not read).
const BlockLayout* FindBlockLayout(uint32_t ggml_type);
const BlockLayout& LayoutOf(BlockType type);

// A block taken apart (see the formula above). Sub-blocks: values /
// sub_block of them (at most 16); codes: `values` of them (at most 256).
struct UnpackedBlock {
  float d = 0;  // The block's scale, from fp16.
  float m = 0;  // Q4_1/Q5_1's m or the K-quants' dmin, from fp16; else 0.
  int8_t scale[16] = {};
  uint8_t min[16] = {};
  uint8_t code[256] = {};
};

// Takes apart one block of `type` at `block` (LayoutOf(type).bytes bytes).
void UnpackBlock(BlockType type, const uint8_t* block, UnpackedBlock* out);

// value = code_value(c) for `layout`.
inline int CodeValue(const BlockLayout& layout, int code) {
  return layout.iq4_table ? kIq4Values[code] : code - layout.code_offset;
}

// out[0 .. n) = the values of the n / LayoutOf(type).values blocks at
// `blocks`, as ggml's dequantize_row_* gives them. n must be a multiple of
// the block's values.
void Dequantize(BlockType type, const uint8_t* blocks, int64_t n, float* out);

// Whether every scale of the n / values blocks at `blocks` is finite (then
// every value is): an fp16 infinity or NaN there would poison the model.
bool BlockScalesFinite(BlockType type, const uint8_t* blocks, int64_t n);

// An fp16 bit pattern widened to float (exactly; ggml's GGML_FP16_TO_FP32).
float HalfToFloat(uint16_t h);

// float -> IEEE fp16, round to nearest even, as ggml's GGML_FP32_TO_FP16
// without F16C (the same bits as F16C's conversion): overflow gives
// infinity, NaN gives 0x7E00 with the sign.
uint16_t FloatToHalf(float f);

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_GGML_BLOCKS_H_
