// The kernels of one CPU family, as a table of functions: the family files
// (model/kernels/family.cc and the family_*.cc it lists) are compiled once per
// family with that family's instruction-set flags, each copy in its own
// namespace and each filling one table; model/kernels/kernels.cc calls through
// the table that model/kernels/dispatch.h selected. Internal to the kernels:
// the decoder calls the functions of model/kernels/kernels.h.
//
// Every entry has the contract of the model/kernels/kernels.h function of the
// same name; the matrix products take the packed panels as raw pointers (see
// PackedWeights for their layouts).
#ifndef TEXTGEN_MODEL_KERNELS_TABLE_H_
#define TEXTGEN_MODEL_KERNELS_TABLE_H_

#include <cstdint>

#include "model/kernels/ggml_blocks.h"

namespace textgen::kernels {

// The activations of a kInt8 product, quantized row by row in blocks of
// PackedWeights::kInt8Block along the depth (Q8_0's numerics, see kernels.h):
// row r's block b holds q[(r · blocks + b) · 32 + i], its scale
// scale[r · blocks + b] and the sum of its 32 quants sum[r · blocks + b].
struct QuantizedRows {
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const int32_t* sum = nullptr;
  int rows = 0;
  int blocks = 0;
};

// One panel of a kBlocks matrix as the family kernel reads it
// (model/kernels/block_panels.h has the byte layout): its codes and stored
// scales. Weight (k, j) = a · code_value(code) [+ or - b], with the factors
// of sub-block s = k / sub_block a = d · scale and b = m · min (m where the
// type has no mins), each a product of exact conversions: ggml's value,
// exactly (ggml_blocks.h).
struct BlockPanelView {
  const uint8_t* codes = nullptr;
  const uint16_t* d = nullptr;    // fp16 bits, [blocks][kPanel].
  const uint16_t* m = nullptr;    // The same, or null (BlockBias::kNone).
  const int8_t* scale = nullptr;  // [subs][kPanel], or null (all 1).
  const uint8_t* min = nullptr;   // [subs][kPanel], or null (all 1).
  int subs_per_block = 1;
  int code_bits = 4;  // As stored: 4 (also for 2- and 3-bit codes), 5, 6, 8.
  int code_offset = 0;
  int sub_block = 32;
  BlockBias bias = BlockBias::kNone;
  bool iq4_table = false;
};

// Where step r < 32 of a group keeps the high bits of its code in a panel's
// high lanes (model/kernels/block_panels.h). With r = 8o + 2i + p (octet o,
// pair i, parity p): 5-bit codes keep their fifth bit at bit 8i + 2o + p of
// the one high lane; 6-bit codes their 2-bit high part at bits 8i + 2(2(o %
// 2) + p) of lane o / 2. So the high bits of an octet's even (or odd) steps
// sit at one offset in each byte: one shift and one mask put them beside the
// low nibbles of those steps' bytes (the int8 kernels' byte lanes).
constexpr int HighLane(int code_bits, int r) {
  return code_bits == 6 ? r / 16 : 0;
}
constexpr int HighShift(int code_bits, int r) {
  const int o = r / 8, i = (r % 8) / 2, p = r % 2;
  return code_bits == 5 ? 8 * i + 2 * o + p : 8 * i + 2 * (2 * (o % 2) + p);
}

// The activations of a kBlocks product with int8 activations
// (PackedWeights::int8_activations): the rows quantized as for kInt8, plus,
// per row and group of 32 steps (a block of `x`), the quants rearranged for
// the panels' nibble lanes and the sums of the group's two halves:
//   pairs[(r · blocks + b) · 8 + 2o + p], octet o < 4 of the group, p = 0 the
//     quants of steps 8o, 8o + 2, 8o + 4, 8o + 6, p = 1 of steps 8o + 1, 8o +
//     3, 8o + 5, 8o + 7, one little-endian byte each;
//   half_sums[(r · blocks + b) · 2 + h] = Σ of the quants of steps 16h ..
//     16h + 15 (for the types whose sub-blocks are 16 steps).
struct BlockActivations {
  QuantizedRows x;
  const int32_t* pairs = nullptr;
  const int32_t* half_sums = nullptr;
};

// Rows that share each load of a panel in the f32, bf16 and w8a32 products;
// above it, bf16 and w8a32 panels are widened to f32 once per panel (into the
// caller's `widened`, room for depth × PackedWeights::kPanel floats).
inline constexpr int kTileRows = 4;

struct KernelTable {
  const char* name;
  float (*dot)(const float* a, const float* b, int n);
  float (*sum)(const float* a, int n);
  void (*matmul_f32)(const float* x, int rows, int x_stride,
                     const float* panels, int depth, int cols, int panel_begin,
                     int panel_end, float* y, int y_stride, bool accumulate);
  void (*matmul_bf16)(const float* x, int rows, int x_stride,
                      const uint16_t* panels, int depth, int cols,
                      int panel_begin, int panel_end, float* widened, float* y,
                      int y_stride, bool accumulate);
  // Fills q (rows · blocks · kInt8Block), scale and sum (rows · blocks) as
  // QuantizedRows describes them, from x (rows × depth, row stride x_stride).
  void (*quantize_rows)(const float* x, int rows, int x_stride, int depth,
                        int8_t* q, float* scale, int32_t* sum);
  void (*matmul_int8)(const QuantizedRows& x, const uint8_t* quants,
                      const float* scales, int cols, int panel_begin,
                      int panel_end, float* y, int y_stride, bool accumulate);
  void (*matmul_w8a32)(const float* x, int rows, int x_stride,
                       const uint8_t* quants, const float* scales, int depth,
                       int cols, int panel_begin, int panel_end, float* widened,
                       float* y, int y_stride, bool accumulate);
  // One panel (`valid` columns) of a kBlocks product; `widened` as for bf16.
  void (*matmul_block_panel)(const float* x, int rows, int x_stride,
                             const BlockPanelView& panel, int depth, int valid,
                             float* widened, float* y, int y_stride,
                             bool accumulate);
  // The same with int8 activations (BlockActivations; not IQ4's types).
  void (*matmul_block_panel_int8)(const BlockActivations& x,
                                  const BlockPanelView& panel, int depth,
                                  int valid, float* y, int y_stride,
                                  bool accumulate);
  void (*attention_scores)(const float* q, int rows, int depth, int q_stride,
                           const float* k, int k_stride, int keys,
                           int first_position, float* y, int y_stride,
                           float* scratch, bool request_next);
  // WeightedSumRows's (WeightedSum is its one-row case).
  void (*weighted_sum)(const float* p, int p_stride, int rows, int n,
                       const float* v, int v_stride, int depth, float* out,
                       int out_stride, bool accumulate, bool request_next);
  void (*attention_scores_bf16)(const float* q, int rows, int depth,
                                int q_stride, const uint16_t* k, int k_stride,
                                int keys, int first_position, float* y,
                                int y_stride, float* scratch,
                                bool request_next);
  void (*weighted_sum_bf16)(const float* p, int p_stride, int rows, int n,
                            const uint16_t* v, int v_stride, int depth,
                            float* out, int out_stride, bool accumulate,
                            bool request_next);
  void (*softmax)(float* x, int n, float scale, float* entropy);
  float (*entropy)(const float* p, int n);
  double (*sum_exp)(const float* x, int n, float shift);
  int (*arg_max)(const float* x, int n);
  void (*row_stats)(const float* p, int n, float* max, float* index_dot);
  void (*gelu_tanh)(float* x, int n);
  void (*silu_multiply)(float* gate, const float* up, int n);
  void (*round_to_bf16)(const float* x, int n, uint16_t* out);
};

// One per family, defined in its copy of model/kernels/family.cc.
namespace generic {
extern const KernelTable kTable;
}
namespace avx2 {
extern const KernelTable kTable;
}
namespace avx512 {
extern const KernelTable kTable;
}

// The table model/kernels/dispatch.h selected (the best this CPU runs until
// UseKernelFamily says otherwise).
const KernelTable& ActiveKernelTable();

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_TABLE_H_
