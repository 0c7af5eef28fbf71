// How a kBlocks PackedWeights lays out one panel of ggml block-quantized
// weights (model/kernels/ggml_blocks.h), and the products over such panels.
// Internal to the kernels: the model calls model/kernels/kernels.h.
//
// A panel holds kPanel = 64 columns of one block type, each column one row of
// the file's blocks, over the whole depth. Its bytes, in order:
//   codes   depth / 32 groups of 32 steps of k. A group: 4 octets of 8 steps,
//           each 64 little-endian 32-bit lanes (one per column) of 8 4-bit
//           codes, step k in bits 4 · (k % 8); then, for 5-bit codes, one row
//           of 64 lanes of 32 fifth bits, for 6-bit codes two rows of 64
//           lanes of 16 2-bit high parts (steps 0..15, 16..31), each step's
//           at HighShift (table.h): an octet's even steps' high bits share
//           one offset in every byte. 8-bit codes (Q8_0): 8 quads
//           of 4 steps, 64 lanes of 4 bytes (step k in byte k % 4). 2- and
//           3-bit codes (Q2_K, Q3_K) are stored as 4-bit ones.
//   d       per block along k, per column: the block's scale, fp16 bits;
//   m       the same for the block's m or dmin (types with a BlockBias);
//   scale   per sub-block, per column: int8 (K-quants and IQ4_XS only);
//   min     per sub-block, per column: uint8 (BlockBias::kMinusMin only).
// Codes first, so a decode step streams them in order; the scales are read
// once per panel, before its product, into the per-sub-block factors a and b
// the kernel multiplies by (model/kernels/table.h, BlockPanelView).
//
// Memory per weight: the code's bits (4 for 2- and 3-bit codes) plus the
// scales: Q4_K 4.63 bits (the file: 4.5), Q6_K 6.56 (6.56), Q5_K 5.63 (5.5),
// Q4_0 4.5 (4.5), Q8_0 8.5 (8.5); Q3_K 4.56 (3.44), Q2_K 5.13 (2.63).
#ifndef TEXTGEN_MODEL_KERNELS_BLOCK_PANELS_H_
#define TEXTGEN_MODEL_KERNELS_BLOCK_PANELS_H_

#include <cstddef>

#include "model/kernels/ggml_blocks.h"
#include "model/kernels/kernels.h"
#include "model/kernels/table.h"

namespace textgen::kernels {

struct BlockPanelLayout {
  const BlockLayout* type = nullptr;
  int depth = 0;
  int code_bits = 4;  // As stored: 4, 5, 6 or 8.
  size_t group_bytes = 0;
  // Offsets of the sections in the panel; m, scale and min only where the
  // type has them.
  size_t d = 0, m = 0, scale = 0, min = 0;
  bool has_m = false, has_scale = false, has_min = false;
  size_t bytes = 0;  // The whole panel.
};

// The layout of a panel of `type` over `depth` (a multiple of its block
// values).
BlockPanelLayout MakeBlockPanelLayout(BlockType type, int depth);

// W[k, j] of panel `panel` laid out as `layout`, column jj < kPanel: the
// value ggml's dequantize_row_* gives, bit for bit.
float BlockPanelWeight(const BlockPanelLayout& layout, const uint8_t* panel,
                       int k, int jj);

// MatMulPanels for kBlocks weights (`widened` as kernels.cc gives it).
void MatMulBlockPanels(const float* x, int rows, int x_stride,
                       const PackedWeights& w, int panel_begin, int panel_end,
                       float* widened, float* y, int y_stride, bool accumulate);

// The same with int8 activations (w.int8_activations()), `x` quantized by
// the family's quantize_rows over w.depth().
void MatMulBlockPanelsInt8(const QuantizedRows& x, const PackedWeights& w,
                           int panel_begin, int panel_end, float* y,
                           int y_stride, bool accumulate);

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_BLOCK_PANELS_H_
