// One CPU family's products of packed weights (model/kernels/kernels.h's
// PackedWeights): f32, bf16 and Q8_0 panels times f32 rows (MatMulF32,
// MatMulBf16, MatMulW8A32, through family_panels.h's MatMulPanelsOf), and
// Q8_0 × Q8_0 (QuantizeRows, MatMulInt8). Compiled once per family
// (model/kernels/family.cc).
#include "model/kernels/family_functions.h"
#include "model/kernels/family_panels.h"
#include "model/kernels/family_vectors.h"

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {
namespace {

// The panel views MatMulPanelsOf reads besides F32Panel (family_panels.h).
// bf16 weights, widened to floats as they are read (LoadBf16: exact).
struct Bf16Panel {
  static constexpr int kStepBytes = PackedWeights::kPanel * sizeof(uint16_t);
  const uint16_t* p;
  Vec At(int k, int c) const {
    return LoadBf16(p + static_cast<long>(k) * PackedWeights::kPanel +
                    c * kVec);
  }
  const char* Step(long k) const {
    return reinterpret_cast<const char*>(p) + k * kStepBytes;
  }
};

// Q8_0 weights (kInt8's quads, family_panels.h) dequantized on the fly:
// At(k, c) is the float d · q, exactly PackedWeights::at's value, so a kW8A32
// product is the kF32 product of the dequantized weights bit for bit. The byte
// q + 128 of step k sits in byte k % 4 of its column's 32-bit lane of quad
// k % 32 / 4; 2^23 + (q + 128) is built as float bits and 2^23 + 128 taken off
// (exact).
constexpr int kQuadBytes = 4 * PackedWeights::kPanel;  // One quad of a panel.
constexpr int kBlockBytes = PackedWeights::kInt8Block * PackedWeights::kPanel;
struct Int8Panel {
  static constexpr int kStepBytes = PackedWeights::kPanel;
  const uint8_t* q;
  const float* scales;  // Block-major, PackedWeights::kPanel per block.
  Vec At(int k, int c) const {
    const unsigned uk = static_cast<unsigned>(k);
    const unsigned b = uk / PackedWeights::kInt8Block;
    VecU32 lanes;
    __builtin_memcpy(&lanes,
                     q + b * kBlockBytes +
                         (uk % PackedWeights::kInt8Block) / 4 * kQuadBytes +
                         c * 4 * kVec,
                     sizeof(lanes));
    const VecU32 bits = ((lanes >> (8 * (uk % 4))) & 0xffu) | 0x4b000000u;
    Vec v;
    __builtin_memcpy(&v, &bits, sizeof(v));
    return (v - 8388736.0f) *
           Load(scales + b * PackedWeights::kPanel + c * kVec);
  }
  const char* Step(long k) const {
    return reinterpret_cast<const char*>(q) + k * kStepBytes;
  }
};

// ---- kInt8: Q8_0 weights × Q8_0 activations ----
//
// The quads' layout and their integer dot products are family_panels.h's;
// the float part is one fixed sequence for every family, block by block in
// increasing b:
//   acc = acc + float(Σ w·x) · (x_scale · w_scale)
// (three roundings, never fused: -ffp-contract=off, and no FMA intrinsic
// here). So every family gives the same kInt8 values, whatever the batch.

// Q8_0 of activations (QuantizedRows), and of weights at load, 16 lanes at a
// time: d = max|v| / 127, q = lround(v · (1 / d)), half away from zero, as
// llama.cpp's quantize_row_q8_0. lround is formed as trunc(x) plus the sign
// where |x - trunc(x)| >= 0.5 (x - trunc(x) is exact for |x| < 2^23), so every
// family quantizes alike and no libm call runs per element.
typedef int8_t VecI8 __attribute__((vector_size(kVec * sizeof(int8_t))));
constexpr int kBlockVecs = PackedWeights::kInt8Block / kVec;

inline VecI RoundHalfAway(Vec x) {
  VecI t = __builtin_convertvector(x, VecI);  // Toward zero.
  const Vec frac = x - __builtin_convertvector(t, Vec);
  t -= frac >= 0.5f;  // A true lane compares as -1.
  t += frac <= -0.5f;
  return t;
}

// The largest lane and the sum of the lanes, halving the vector each step
// (max and integer sums are exact in any order).
typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
typedef float Vec4 __attribute__((vector_size(4 * sizeof(float))));
typedef int32_t VecI8x32 __attribute__((vector_size(8 * sizeof(int32_t))));
typedef int32_t VecI4x32 __attribute__((vector_size(4 * sizeof(int32_t))));
template <typename Half, typename Whole>
inline void Halves(const Whole& v, Half* lo, Half* hi) {
  __builtin_memcpy(lo, &v, sizeof(Half));
  __builtin_memcpy(hi, reinterpret_cast<const char*>(&v) + sizeof(Half),
                   sizeof(Half));
}
inline float MaxLane(Vec v) {
  Vec8 a, b;
  Halves(v, &a, &b);
  a = a > b ? a : b;
  Vec4 c, d;
  Halves(a, &c, &d);
  c = c > d ? c : d;
  const float m01 = c[0] > c[1] ? c[0] : c[1];
  const float m23 = c[2] > c[3] ? c[2] : c[3];
  return m01 > m23 ? m01 : m23;
}
inline int32_t SumLanes(VecI v) {
  VecI8x32 a, b;
  Halves(v, &a, &b);
  a += b;
  VecI4x32 c, d;
  Halves(a, &c, &d);
  c += d;
  return (c[0] + c[1]) + (c[2] + c[3]);
}

}  // namespace

void QuantizeRows(const float* x, int rows, int x_stride, int depth, int8_t* q,
                  float* scale, int32_t* sum) {
  constexpr int kBlock = PackedWeights::kInt8Block;
  const int blocks = (depth + kBlock - 1) / kBlock;
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<long>(r) * x_stride;
    for (int b = 0; b < blocks; ++b) {
      const long i = static_cast<long>(r) * blocks + b;
      // The block's values, zero past the depth.
      Vec v[kBlockVecs];
      const int n = Min(kBlock, depth - b * kBlock);
      if (n == kBlock) {
        for (int c = 0; c < kBlockVecs; ++c)
          v[c] = Load(row + b * kBlock + c * kVec);
      } else {
        float padded[kBlock] = {};
        for (int k = 0; k < n; ++k) padded[k] = row[b * kBlock + k];
        for (int c = 0; c < kBlockVecs; ++c) v[c] = Load(padded + c * kVec);
      }
      Vec amax = {};
      for (int c = 0; c < kBlockVecs; ++c) {
        const Vec abs = v[c] < 0 ? -v[c] : v[c];
        amax = abs > amax ? abs : amax;
      }
      const float d = MaxLane(amax) / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      VecI total = {};
      for (int c = 0; c < kBlockVecs; ++c) {
        const VecI qi = RoundHalfAway(v[c] * id);
        total += qi;
        const VecI8 bytes = __builtin_convertvector(qi, VecI8);
        __builtin_memcpy(q + i * kBlock + c * kVec, &bytes, sizeof(bytes));
      }
      scale[i] = d;
      sum[i] = SumLanes(total);
    }
  }
}

namespace {

// Rows [0, R) × C vectors of columns (from vector c0) of one panel, over every
// block: out[r][c] holds the float sums (see above). With `next` (the next
// panel's quants), this is pass `pass` of `passes` over the panel, and quad i
// of the panel (i = 8 b + q) requests the next panel's quad i when i % passes
// == pass: a hint, spread evenly over the panel's compute, so that a batch
// working on this panel has the next one arriving meanwhile (a burst of
// requests would stall on the core's few line-fill buffers instead). Only
// kRequestNext instantiations carry that code: in a prefill's many tiles, its
// bookkeeping alone cost ~5 % of MatMulInt8.
template <int R, int C, bool kRequestNext = false>
inline void Int8Tile(const QuantizedRows& x, int r0, const uint8_t* quants,
                     const float* scales, int c0, const uint8_t* next, int pass,
                     int passes, Vec (&out)[R][C]) {
  Vec acc[R][C] = {};
  const int blocks = x.blocks;
  // The next quad (b · 8 + q) whose twin this pass requests: pass, pass +
  // passes, ... (a running index, not a division per quad).
  int next_quad = kRequestNext && next != nullptr ? pass : INT_MAX;
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* wb = quants + static_cast<long>(b) * kBlockBytes;
    VecI dots[R][C] = {};
    for (int q = 0; q < PackedWeights::kInt8Block / 4; ++q) {
      if (kRequestNext &&
          b * (PackedWeights::kInt8Block / 4) + q == next_quad) {
        const uint8_t* line = next + (wb - quants) + q * kQuadBytes;
        for (int l = 0; l < kQuadBytes; l += 64) {
          __builtin_prefetch(line + l, 0, 2);
        }
        next_quad += passes;
      }
      int32_t x4[R];
      for (int r = 0; r < R; ++r) {
        x4[r] = LoadQuad(x.q +
                         (static_cast<long>(r0 + r) * blocks + b) *
                             PackedWeights::kInt8Block +
                         4 * q);
      }
      for (int c = 0; c < C; ++c) {
        const uint8_t* wq = wb + q * kQuadBytes + (c0 + c) * 4 * kVec;
        if (R == 1) {
          // Decode streams every weight once per step: as the f32 kernel,
          // request the lines ahead, 4 blocks (8 KB) into L1 and
          // kPrefetchFarBytes into L2 (hints; harmless past the end).
          __builtin_prefetch(wq + 4 * kBlockBytes);
          __builtin_prefetch(wq + kPrefetchFarBytes, 0, 2);
        }
        const QuadWeights w = LoadQuadWeights(wq);
        for (int r = 0; r < R; ++r) dots[r][c] = DotQuad(dots[r][c], w, x4[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const long rb = static_cast<long>(r0 + r) * blocks + b;
      const float x_scale = x.scale[rb];
      VecI correction = {};
      if (kOffsetWeights) correction += 128 * x.sum[rb];
      for (int c = 0; c < C; ++c) {
        const Vec w_scale =
            Load(scales + static_cast<long>(b) * PackedWeights::kPanel +
                 (c0 + c) * kVec);
        const Vec dot = __builtin_convertvector(dots[r][c] - correction, Vec);
        acc[r][c] = acc[r][c] + dot * (x_scale * w_scale);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) out[r][c] = acc[r][c];
  }
}

}  // namespace

void MatMulInt8(const QuantizedRows& x, const uint8_t* quants,
                const float* scales, int cols, int panel_begin, int panel_end,
                float* y, int y_stride, bool accumulate) {
  const long panel_bytes = static_cast<long>(x.blocks) * kBlockBytes;
  const long panel_scales = static_cast<long>(x.blocks) * PackedWeights::kPanel;
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint8_t* pq = quants + p * panel_bytes;
    const float* ps = scales + p * panel_scales;
    const int j0 = p * PackedWeights::kPanel;
    const int valid = Min(PackedWeights::kPanel, cols - j0);
    int r = 0;
    // Four rows share each load of the panel, half a panel at a time (so the
    // sums stay in registers); a row's values are the same either way.
    // In a batch of decode steps (up to kRequestRows rows) every pass (tile
    // of rows, half of the panel) requests its share of the next panel (see
    // Int8Tile); a prefill's tiles spend long enough on each panel without.
    constexpr int kRequestRows = 32;
    const uint8_t* next = p + 1 < panel_end ? pq + panel_bytes : nullptr;
    const int passes = x.rows / 4 * (kPanelVecs / 2);
    for (; r + 4 <= x.rows; r += 4) {
      for (int c0 = 0; c0 < kPanelVecs; c0 += 2) {
        Vec sums[4][2];
        const int pass = r / 4 * (kPanelVecs / 2) + c0 / 2;
        if (x.rows <= kRequestRows) {
          Int8Tile<4, 2, true>(x, r, pq, ps, c0, next, pass, passes, sums);
        } else {
          Int8Tile<4, 2>(x, r, pq, ps, c0, nullptr, 0, 1, sums);
        }
        for (int i = 0; i < 4; ++i) {
          StoreSums<2>(sums[i], c0, valid,
                       y + static_cast<long>(r + i) * y_stride + j0,
                       accumulate);
        }
      }
    }
    for (; r < x.rows; ++r) {
      Vec sums[1][kPanelVecs];
      Int8Tile<1, kPanelVecs>(x, r, pq, ps, 0, nullptr, 0, 1, sums);
      StoreSums<kPanelVecs>(sums[0], 0, valid,
                            y + static_cast<long>(r) * y_stride + j0,
                            accumulate);
    }
  }
}

// The f32, bf16 and int8 × f32 panels, through the one template.
void MatMulF32(const float* x, int rows, int x_stride, const float* panels,
               int depth, int cols, int panel_begin, int panel_end, float* y,
               int y_stride, bool accumulate) {
  const long panel_size = static_cast<long>(depth) * PackedWeights::kPanel;
  MatMulPanelsOf(
      x, rows, x_stride,
      [=](int p) { return F32Panel{panels + p * panel_size}; }, depth, cols,
      panel_begin, panel_end, nullptr, y, y_stride, accumulate);
}
void MatMulBf16(const float* x, int rows, int x_stride, const uint16_t* panels,
                int depth, int cols, int panel_begin, int panel_end,
                float* widened, float* y, int y_stride, bool accumulate) {
  const long panel_size = static_cast<long>(depth) * PackedWeights::kPanel;
  MatMulPanelsOf(
      x, rows, x_stride,
      [=](int p) { return Bf16Panel{panels + p * panel_size}; }, depth, cols,
      panel_begin, panel_end, widened, y, y_stride, accumulate);
}
void MatMulW8A32(const float* x, int rows, int x_stride, const uint8_t* quants,
                 const float* scales, int depth, int cols, int panel_begin,
                 int panel_end, float* widened, float* y, int y_stride,
                 bool accumulate) {
  const long blocks =
      (depth + PackedWeights::kInt8Block - 1) / PackedWeights::kInt8Block;
  MatMulPanelsOf(
      x, rows, x_stride,
      [=](int p) {
        return Int8Panel{quants + p * blocks * kBlockBytes,
                         scales + p * blocks * PackedWeights::kPanel};
      },
      depth, cols, panel_begin, panel_end, widened, y, y_stride, accumulate);
}

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY
