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

namespace {

// One vector of output columns. GCC's vector extension compiles to the widest
// registers the target has (AVX-512, AVX2 or SSE), always with the same
// per-lane arithmetic.
constexpr int kVec = 16;
typedef float Vec __attribute__((vector_size(kVec * sizeof(float))));

inline Vec Load(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, Vec v) { __builtin_memcpy(p, &v, sizeof(v)); }

constexpr int kPanelVecs = PackedWeights::kPanel / kVec;

// Widens 16 bf16 values to floats: exact (the low 16 bits become zero).
typedef uint16_t Vec16 __attribute__((vector_size(kVec * sizeof(uint16_t))));
typedef uint32_t VecU32 __attribute__((vector_size(kVec * sizeof(uint32_t))));
inline Vec LoadWeights(const float* p) { return Load(p); }
inline Vec LoadWeights(const uint16_t* p) {
  Vec16 h;
  __builtin_memcpy(&h, p, sizeof(h));
  const VecU32 bits = __builtin_convertvector(h, VecU32) << 16;
  Vec v;
  __builtin_memcpy(&v, &bits, sizeof(v));
  return v;
}

// How far ahead (in k steps) the one-row kernel prefetches its panel: decode
// streams every weight from memory once per step, and a single sequential
// stream per panel leaves the hardware prefetcher short of full bandwidth.
constexpr int kPrefetchSteps = 16;

// Rows [0, R) × one panel of x · W, accumulated in registers over the whole
// depth in increasing k. Writes the first `valid` columns of the panel.
template <int R, typename W>
inline void PanelTile(const float* x, int depth, int x_stride, const W* panel,
                      float* y, int y_stride, int valid, bool accumulate) {
  Vec acc[R][kPanelVecs] = {};
  constexpr int kLineElems = 64 / sizeof(W);
  for (int k = 0; k < depth; ++k) {
    const W* wk = panel + static_cast<long>(k) * PackedWeights::kPanel;
    if (R == 1) {
      // Prefetching past the panel's end is harmless (a hint, never a fault).
      for (int e = 0; e < PackedWeights::kPanel; e += kLineElems) {
        __builtin_prefetch(wk + kPrefetchSteps * PackedWeights::kPanel + e);
      }
    }
    Vec b[kPanelVecs];
    for (int c = 0; c < kPanelVecs; ++c) b[c] = LoadWeights(wk + c * kVec);
    for (int r = 0; r < R; ++r) {
      const float a = x[static_cast<long>(r) * x_stride + k];
      for (int c = 0; c < kPanelVecs; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* out = y + static_cast<long>(r) * y_stride;
    if (valid == PackedWeights::kPanel) {
      for (int c = 0; c < kPanelVecs; ++c) {
        Store(out + c * kVec,
              accumulate ? Load(out + c * kVec) + acc[r][c] : acc[r][c]);
      }
    } else {
      float sums[PackedWeights::kPanel];
      __builtin_memcpy(sums, acc[r], sizeof(sums));
      for (int j = 0; j < valid; ++j)
        out[j] = accumulate ? out[j] + sums[j] : sums[j];
    }
  }
}

template <typename W>
void MatMulPanelsOf(const float* x, int rows, int x_stride, const W* data,
                    int depth, int cols, int panel_begin, int panel_end,
                    float* y, int y_stride, bool accumulate) {
  // Panel by panel, so each panel of W stays in cache while every row passes
  // over it; four rows share each load from the panel.
  constexpr int kRows = 4;
  const size_t panel_size = static_cast<size_t>(depth) * PackedWeights::kPanel;
  for (int p = panel_begin; p < panel_end; ++p) {
    const W* panel = data + p * panel_size;
    const int j0 = p * PackedWeights::kPanel;
    const int valid = std::min(PackedWeights::kPanel, cols - j0);
    int r = 0;
    for (; r + kRows <= rows; r += kRows) {
      PanelTile<kRows>(x + static_cast<long>(r) * x_stride, depth, x_stride,
                       panel, y + static_cast<long>(r) * y_stride + j0,
                       y_stride, valid, accumulate);
    }
    for (; r < rows; ++r) {
      PanelTile<1>(x + static_cast<long>(r) * x_stride, depth, x_stride, panel,
                   y + static_cast<long>(r) * y_stride + j0, y_stride, valid,
                   accumulate);
    }
  }
}

}  // namespace

const char* WeightTypeName(WeightType type) {
  return type == WeightType::kBF16 ? "bf16" : "f32";
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // Quiet NaN.
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

template <typename Get>
void PackedWeights::Pack(int depth, int cols, WeightType type, Get get) {
  type_ = type;
  depth_ = depth;
  cols_ = cols;
  const size_t size = static_cast<size_t>(panels()) * depth * kPanel;
  if (type == WeightType::kF32) {
    f32_.assign(size, 0.0f);
  } else {
    bf16_.assign(size, 0);
  }
  for (int p = 0; p < panels(); ++p) {
    const int j0 = p * kPanel;
    const int valid = std::min(kPanel, cols - j0);
    const size_t base = static_cast<size_t>(p) * depth * kPanel;
    for (int k = 0; k < depth; ++k) {
      for (int jj = 0; jj < valid; ++jj) {
        const float v = get(k, j0 + jj);
        const size_t i = base + static_cast<size_t>(k) * kPanel + jj;
        if (type == WeightType::kF32) {
          f32_[i] = v;
        } else {
          bf16_[i] = FloatToBf16(v);
        }
      }
    }
  }
}

PackedWeights::PackedWeights(const float* w, int depth, int cols, int w_stride,
                             WeightType type) {
  Pack(depth, cols, type,
       [&](int k, int j) { return w[static_cast<long>(k) * w_stride + j]; });
}

PackedWeights PackedWeights::FromTransposed(const float* v, int cols, int depth,
                                            WeightType type) {
  PackedWeights packed;
  packed.Pack(depth, cols, type, [&](int k, int j) {
    return v[static_cast<long>(j) * depth + k];
  });
  return packed;
}

float PackedWeights::at(int k, int j) const {
  const size_t i = static_cast<size_t>(j / kPanel) * depth_ * kPanel +
                   static_cast<size_t>(k) * kPanel + j % kPanel;
  return type_ == WeightType::kF32 ? f32_[i] : Bf16ToFloat(bf16_[i]);
}

void PackedWeights::Column(int j, float* out) const {
  const size_t base =
      static_cast<size_t>(j / kPanel) * depth_ * kPanel + j % kPanel;
  if (type_ == WeightType::kF32) {
    for (int k = 0; k < depth_; ++k)
      out[k] = f32_[base + static_cast<size_t>(k) * kPanel];
  } else {
    for (int k = 0; k < depth_; ++k)
      out[k] = Bf16ToFloat(bf16_[base + static_cast<size_t>(k) * kPanel]);
  }
}

void MatMulPanels(const float* x, int rows, int x_stride,
                  const PackedWeights& w, int panel_begin, int panel_end,
                  float* y, int y_stride, bool accumulate) {
  if (w.type() == WeightType::kF32) {
    MatMulPanelsOf(x, rows, x_stride, w.panel_f32(0), w.depth(), w.cols(),
                   panel_begin, panel_end, y, y_stride, accumulate);
  } else {
    MatMulPanelsOf(x, rows, x_stride, w.panel_bf16(0), w.depth(), w.cols(),
                   panel_begin, panel_end, y, y_stride, accumulate);
  }
}

void MatMul(const float* x, int rows, int x_stride, const PackedWeights& w,
            float* y, int y_stride, bool accumulate) {
  MatMulPanels(x, rows, x_stride, w, 0, w.panels(), y, y_stride, accumulate);
}

void MatMulTransposed(const float* x, int rows, int depth, int x_stride,
                      const float* v, int v_stride, int cols, float* y,
                      int y_stride) {
  // Row blocks small enough to stay in cache while every vector streams past
  // them; within a block, four rows share each load of v_j.
  constexpr int kRowBlock = 64;
  constexpr int kTile = 4;
  for (int r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int r_end = std::min(rows, r0 + kRowBlock);
    for (int j = 0; j < cols; ++j) {
      const float* vj = v + static_cast<long>(j) * v_stride;
      int r = r0;
      float out[kTile];
      for (; r + kTile <= r_end; r += kTile) {
        DotRows<kTile>(x + static_cast<long>(r) * x_stride, x_stride, vj, depth,
                       out);
        for (int t = 0; t < kTile; ++t)
          y[static_cast<long>(r + t) * y_stride + j] = out[t];
      }
      for (; r < r_end; ++r) {
        DotRows<1>(x + static_cast<long>(r) * x_stride, x_stride, vj, depth,
                   out);
        y[static_cast<long>(r) * y_stride + j] = out[0];
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
