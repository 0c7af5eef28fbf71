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
//   - every reduction (dot product, sum) accumulates element i into lane i %
//   kLanes, in index
//     order, and folds the lanes in one fixed tree;
//   - transcendental functions (exp, tanh) are the scalar libm calls for every
//   element.
// The compiler vectorizes the lane loops without reassociating anything, so the
// code is both fast and exactly reproducible: KV-cached decoding equals full
// recomputation bit for bit, and a sequence's logits do not depend on its
// batch.
#ifndef TEXTGEN_MODEL_KERNELS_H_
#define TEXTGEN_MODEL_KERNELS_H_

namespace textgen::kernels {

// Lanes of every reduction. Fixed: changing it changes results (not
// correctness).
inline constexpr int kLanes = 16;

// Σ a[i] · b[i], i < n.
float Dot(const float* a, const float* b, int n);

// Σ a[i], i < n.
float Sum(const float* a, int n);

// y[r, j] (+)= Σ_k x[r, k] · w_j[k]  for r < rows, j < cols.
//   x:  rows × depth, row-major with row stride x_stride.
//   w:  cols vectors of `depth` floats, vector j at w + j * w_stride. With
//   w_stride = depth
//       that is a column-major [depth, cols] matrix (PyTorch's nn.Linear weight
//       [out, in]); it is also how attention reads keys out of a row-major
//       cache.
//   y:  rows × cols, row-major with row stride y_stride. accumulate: add to y,
//   don't set.
// Each y[r, j] is exactly Dot(x row r, w_j, depth), whatever rows and cols are.
void MatMul(const float* x, int rows, int depth, int x_stride, const float* w,
            int w_stride, int cols, float* y, int y_stride, bool accumulate);

// y[j] += a · x[j], j < n.
void Axpy(float a, const float* x, float* y, int n);

// In place: x[i] = exp(x[i] - max) / Σ exp(x[j] - max), i < n.
void Softmax(float* x, int n);

// In place: GELU, tanh form (GPT-2's "gelu_new").
void GeluTanh(float* x, int n);

// In place: gate[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^-g).
void SiluMultiply(float* gate, const float* up, int n);

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_H_
