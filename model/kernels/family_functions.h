// The functions of one CPU family's kernel table (model/kernels/table.h), as
// the family files define them: each in its concept's file, all in the
// family's namespace, so that model/kernels/family.cc can list them in kTable.
// Internal to the family files (family*.cc). Every function has the contract
// of the model/kernels/kernels.h function of the same name; the products take
// the packed panels as raw pointers (table.h).
//
// These are the only names the family files give external linkage, and there
// is one per family: TEXTGEN_KERNEL_FAMILY names the namespace, so the
// generic, avx2 and avx512 copies are distinct symbols and no caller can be
// linked to another family's code. Their helpers stay in unnamed namespaces
// (model/kernels/family_vectors.h says why).
#ifndef TEXTGEN_MODEL_KERNELS_FAMILY_FUNCTIONS_H_
#define TEXTGEN_MODEL_KERNELS_FAMILY_FUNCTIONS_H_

#include <cstdint>

#include "model/kernels/table.h"

#ifndef TEXTGEN_KERNEL_FAMILY
#error "TEXTGEN_KERNEL_FAMILY (generic, avx2 or avx512) must be defined"
#endif

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {

// model/kernels/family_matmul.cc: packed f32, bf16 and Q8_0 panels.
void MatMulF32(const float* x, int rows, int x_stride, const float* panels,
               int depth, int cols, int panel_begin, int panel_end, float* y,
               int y_stride, bool accumulate);
void MatMulBf16(const float* x, int rows, int x_stride, const uint16_t* panels,
                int depth, int cols, int panel_begin, int panel_end,
                float* widened, float* y, int y_stride, bool accumulate);
void QuantizeRows(const float* x, int rows, int x_stride, int depth, int8_t* q,
                  float* scale, int32_t* sum);
void MatMulInt8(const QuantizedRows& x, const uint8_t* quants,
                const float* scales, int cols, int panel_begin, int panel_end,
                float* y, int y_stride, bool accumulate);
void MatMulW8A32(const float* x, int rows, int x_stride, const uint8_t* quants,
                 const float* scales, int depth, int cols, int panel_begin,
                 int panel_end, float* widened, float* y, int y_stride,
                 bool accumulate);

// model/kernels/family_block_panels.cc: ggml's block types.
void MatMulBlockPanel(const float* x, int rows, int x_stride,
                      const BlockPanelView& v, int depth, int valid,
                      float* widened, float* y, int y_stride, bool accumulate);
void MatMulBlockPanelInt8(const BlockActivations& a, const BlockPanelView& v,
                          int depth, int valid, float* y, int y_stride,
                          bool accumulate);

// model/kernels/family_attention.cc: scores and weighted sums over a KV
// cache's f32 or bf16 rows.
void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const float* k, int k_stride, int keys, int first_position,
                     float* y, int y_stride, float* scratch, bool request_next);
void AttentionScoresBf16(const float* q, int rows, int depth, int q_stride,
                         const uint16_t* k, int k_stride, int keys,
                         int first_position, float* y, int y_stride,
                         float* scratch, bool request_next);
void WeightedSum(const float* p, int p_stride, int rows, int n, const float* v,
                 int v_stride, int depth, float* out, int out_stride,
                 bool accumulate, bool request_next);
void WeightedSumBf16(const float* p, int p_stride, int rows, int n,
                     const uint16_t* v, int v_stride, int depth, float* out,
                     int out_stride, bool accumulate, bool request_next);

// model/kernels/family_elementwise.cc: reductions and element-wise functions.
float Dot(const float* a, const float* b, int n);
float Sum(const float* a, int n);
void Softmax(float* x, int n, float scale, float* entropy);
float Entropy(const float* p, int n);
double SumExp(const float* x, int n, float shift);
int ArgMax(const float* x, int n);
void RowStats(const float* p, int n, float* max, float* index_dot);
void GeluTanh(float* x, int n);
void SiluMultiply(float* gate, const float* up, int n);
void RoundToBf16(const float* x, int n, uint16_t* out);

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY

#endif  // TEXTGEN_MODEL_KERNELS_FAMILY_FUNCTIONS_H_
