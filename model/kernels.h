// The decoder's arithmetic kernels, written so that results are
// *batch-invariant*: every output value is produced by the same sequence of
// floating-point operations whatever else is in the batch, wherever its row
// sits in memory, and however many tokens share the step.
//
// Why: a general GEMM (Eigen's, BLAS's) picks its blocking, its vector/scalar
// split and even its kernel (GEMM vs GEMV) from the matrix sizes and pointer
// alignment, so the same token's logits drift by a few ulps between a full
// pass, a KV-cached decode step and a batched step. Drift of that kind is
// invisible in one step but can flip a greedy argmax between "alone" and
// "batched". Here, instead:
//   - MatMul (the projections and the LM head) sums each output over k in
//     increasing order, one multiply-add per step, vectorized across output
//     columns: lanes never interact; splitting it by panels (threads) or by
//     k-chunks (accumulators stored and reloaded exactly) changes nothing;
//   - AttentionScores likewise sums over the head dimension in order,
//     vectorized across keys; WeightedSum over keys in order, vectorized
//     across the head dimension;
//   - Dot and Sum accumulate element i into lane i % kLanes
//     in index order and fold the lanes in one fixed tree;
//   - exp in Softmax and SiluMultiply is the scalar libm call for every
//     element; GeluTanh runs every element, tail included, through one vector
//     routine;
//   - multiplies and adds are never fused implicitly (kernels.cc is built with
//     -ffp-contract=off), so vector lanes and scalar tails compute identical
//     values. MatMul and AttentionScores fuse explicitly (MulAdd, where the
//     target has FMA): they have no scalar tail, so every path that computes
//     one of their outputs fuses the same way.
// KV-cached decoding therefore equals full recomputation bit for bit, and a
// sequence's logits do not depend on its batch; tests/parity_test.cc holds the
// decoder to that.
#ifndef TEXTGEN_MODEL_KERNELS_H_
#define TEXTGEN_MODEL_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace textgen::kernels {

// Lanes of every reduction. Fixed: changing it changes results (not
// correctness).
inline constexpr int kLanes = 16;

// Σ a[i] · b[i], i < n.
float Dot(const float* a, const float* b, int n);

// Σ a[i], i < n.
float Sum(const float* a, int n);

// How PackedWeights stores its values. kBF16 keeps the upper 16 bits of each
// float (rounded to nearest even when packed); the kernel widens them back
// exactly (a shift by 16) and accumulates in float, so a kBF16 product equals
// the kF32 product of the bf16-rounded weights bit for bit, at half the bytes
// streamed from memory.
enum class WeightType { kF32, kBF16 };

// "f32" or "bf16".
const char* WeightTypeName(WeightType type);

// A weight matrix W [depth, cols] (the [in, out] layout of GPT-2's Conv1D)
// repacked for MatMul: cut into panels of kPanel consecutive columns, each
// stored k-major, so the kernel streams through memory in order. The last panel
// is zero-padded to kPanel columns.
class PackedWeights {
 public:
  static constexpr int kPanel = 64;

  PackedWeights() = default;
  // `w` is row-major [depth, cols] with row stride `w_stride`.
  PackedWeights(const float* w, int depth, int cols, int w_stride,
                WeightType type = WeightType::kF32);
  // Packs the transpose of `v`, row-major [cols, depth]: W[k, j] = v[j, k]. For
  // an embedding table used as the LM head (logits = x · tableᵀ) and for
  // nn.Linear weights, stored [out, in].
  static PackedWeights FromTransposed(const float* v, int cols, int depth,
                                      WeightType type = WeightType::kF32);

  WeightType type() const { return type_; }
  int depth() const { return depth_; }
  int cols() const { return cols_; }
  int panels() const { return (cols_ + kPanel - 1) / kPanel; }
  // Panel p: depth × kPanel values, row k holding columns p·kPanel .. p·kPanel
  // + kPanel - 1; f32 or bf16 bits as type() says.
  const float* panel_f32(int p) const {
    return f32_.data() + static_cast<size_t>(p) * depth_ * kPanel;
  }
  const uint16_t* panel_bf16(int p) const {
    return bf16_.data() + static_cast<size_t>(p) * depth_ * kPanel;
  }
  // W[k, j], for tests and debugging.
  float at(int k, int j) const;
  // out[k] = W[k, j], k < depth: one column (a token's row of a tied
  // embedding table stored as the packed LM head).
  void Column(int j, float* out) const;
  size_t MemoryBytes() const {
    return f32_.size() * sizeof(float) + bf16_.size() * sizeof(uint16_t);
  }

 private:
  template <typename Get>
  void Pack(int depth, int cols, WeightType type, Get get);

  WeightType type_ = WeightType::kF32;
  int depth_ = 0;
  int cols_ = 0;
  std::vector<float> f32_;      // kF32
  std::vector<uint16_t> bf16_;  // kBF16
};

// Rounds to the nearest bf16 (ties to even), as PackedWeights does; NaN stays
// NaN.
uint16_t FloatToBf16(float f);
inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

// y[r, j] (+)= Σ_k x[r, k] · W[k, j]   for r < rows, j < w.cols().  y = x · W
//   x: rows × w.depth(), row-major with row stride x_stride.
//   y: rows × w.cols(), row-major with row stride y_stride. accumulate: add the
//   product to y.
// Each y[r, j] is the sum over k in increasing order, one multiply-add per step
// (fused where the target has FMA: this kernel is the only one that computes
// these values, so every path contracts alike), whatever rows is and whichever
// panels are computed together.
// Register-tiled like a GEMM micro-kernel, vectorized across columns.
void MatMul(const float* x, int rows, int x_stride, const PackedWeights& w,
            float* y, int y_stride, bool accumulate);
// The same for the columns of panels [panel_begin, panel_end) only: threads
// split a product by panels and each gets exactly MatMul's values.
void MatMulPanels(const float* x, int rows, int x_stride,
                  const PackedWeights& w, int panel_begin, int panel_end,
                  float* y, int y_stride, bool accumulate);

// Attention scores of one head: y[t, j] = Σ_d q[t, d] · k_j[d] in increasing
// d, one multiply-add per step, for t < rows and the keys row t can see, j <
// first_position + t + 1 (causal); y[t, j] past that is left unspecified.
//   q: rows × depth, row stride q_stride. k: `keys` vectors of `depth` floats,
//   k_j at k + j · k_stride (a head's columns of a row-major KV cache).
// Vectorized across keys (16 at a time, transposed into `scratch`, which holds
// kAttentionScratch(depth) floats), so small head dimensions cost no lane
// folding; the value for (t, j) does not depend on rows, keys or position.
void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const float* k, int k_stride, int keys, int first_position,
                     float* y, int y_stride, float* scratch);
inline int AttentionScratchFloats(int depth) { return depth * 16; }

// out[d] = Σ_j p[j] · v_j[d] for d < depth, summed over j < n in increasing
// order (one multiply and one add per step), v_j at v + j · v_stride. The
// weighted sum of values, accumulated in registers across the head dimension.
void WeightedSum(const float* p, int n, const float* v, int v_stride, int depth,
                 float* out);

// In place: x[i] = exp(x[i] - max) / Σ exp(x[j] - max), i < n.
void Softmax(float* x, int n);

// In place: GELU, tanh form (GPT-2's "gelu_new").
void GeluTanh(float* x, int n);

// In place: gate[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^-g).
void SiluMultiply(float* gate, const float* up, int n);

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_H_
