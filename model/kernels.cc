#include "model/kernels.h"

#include <algorithm>
#include <cmath>

namespace textgen::kernels {
namespace {

// Folds the lanes pairwise: (0+8, 1+9, ...), then (0+4, ...), ...: one fixed
// order.
inline float FoldLanes(float* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// Dot products of R rows of x with one weight vector, sharing the weight loads.
// For each row the operations are exactly those of Dot(), so tiling never
// changes a result.
template <int R>
inline void DotRows(const float* x, int x_stride, const float* w, int n,
                    float* out) {
  float acc[R][kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int r = 0; r < R; ++r) {
      const float* xr = x + r * x_stride + i;
      for (int l = 0; l < kLanes; ++l) acc[r][l] += xr[l] * w[i + l];
    }
  }
  for (int r = 0; r < R; ++r) {
    const float* xr = x + r * x_stride;
    for (int l = 0; i + l < n; ++l) acc[r][l] += xr[i + l] * w[i + l];
    out[r] = FoldLanes(acc[r]);
  }
}

}  // namespace

float Dot(const float* a, const float* b, int n) {
  float out;
  DotRows<1>(a, 0, b, n, &out);
  return out;
}

float Sum(const float* a, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l];
  return FoldLanes(acc);
}

void MatMul(const float* x, int rows, int depth, int x_stride, const float* w,
            int w_stride, int cols, float* y, int y_stride, bool accumulate) {
  // Row blocks small enough to stay in cache while every weight vector streams
  // past them; within a block, four rows share each weight load.
  constexpr int kRowBlock = 64;
  constexpr int kTile = 4;
  for (int r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int r_end = std::min(rows, r0 + kRowBlock);
    for (int j = 0; j < cols; ++j) {
      const float* wj = w + static_cast<long>(j) * w_stride;
      int r = r0;
      float out[kTile];
      for (; r + kTile <= r_end; r += kTile) {
        DotRows<kTile>(x + static_cast<long>(r) * x_stride, x_stride, wj, depth,
                       out);
        for (int t = 0; t < kTile; ++t) {
          float& dst = y[static_cast<long>(r + t) * y_stride + j];
          dst = accumulate ? dst + out[t] : out[t];
        }
      }
      for (; r < r_end; ++r) {
        DotRows<1>(x + static_cast<long>(r) * x_stride, x_stride, wj, depth,
                   out);
        float& dst = y[static_cast<long>(r) * y_stride + j];
        dst = accumulate ? dst + out[0] : out[0];
      }
    }
  }
}

void Axpy(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

void Softmax(float* x, int n) {
  const float max = *std::max_element(x, x + n);  // max is exact in any order.
  for (int i = 0; i < n; ++i) x[i] = std::exp(x[i] - max);
  const float inv_sum = 1.0f / Sum(x, n);
  for (int i = 0; i < n; ++i) x[i] *= inv_sum;
}

void GeluTanh(float* x, int n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v *
           (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void SiluMultiply(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i)
    gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace textgen::kernels
