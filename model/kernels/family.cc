// The kernels of one CPU family (model/kernels/table.h). This file is compiled
// once per family, each time with that family's -march and with
// TEXTGEN_KERNEL_FAMILY naming the namespace it fills, so the same source
// becomes the generic (x86-64-v2), avx2 (x86-64-v3: AVX2 + FMA) and avx512
// (x86-64-v4 + VNNI) kernels; the preprocessor's view of the target
// (__AVX512F__, __FMA__, __AVX512VNNI__, __AVX2__) picks the instructions.
//
// Code compiled for a wider target must never run on a CPU without it: an
// inline function of a header (a std:: template, say) that the compiler emits
// out of line here could be chosen by the linker for callers elsewhere. So
// this file uses no std:: templates and no header code beyond the intrinsics
// and libm's expf; everything else it defines is in an unnamed namespace or
// the family's own.
//
// The arithmetic contract (the order of every sum, where multiplies and adds
// fuse) is model/kernels/kernels.h's; this file is built with
// -ffp-contract=off.
#include <math.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "model/kernels/ggml_blocks.h"
#include "model/kernels/kernels.h"
#include "model/kernels/table.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#ifndef TEXTGEN_KERNEL_FAMILY
#error "TEXTGEN_KERNEL_FAMILY (generic, avx2 or avx512) must be defined"
#endif

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {
namespace {

inline int Min(int a, int b) { return a < b ? a : b; }
inline int Max(int a, int b) { return a > b ? a : b; }

// Folds the lanes pairwise: (0+8, 1+9, ...), then (0+4, ...), ...: one fixed
// order.
inline float FoldLanes(float* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

float Dot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  return FoldLanes(acc);
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

// acc + a · b, fused into one rounding where the target has FMA. Used only by
// kernels without a scalar tail (see kernels.h), so a given output is always
// computed the same way within a build.
inline Vec MulAdd(float a, Vec b, Vec acc) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc);
#elif defined(__FMA__)
  __m256 b2[2], acc2[2];
  __builtin_memcpy(b2, &b, sizeof(b));
  __builtin_memcpy(acc2, &acc, sizeof(acc));
  const __m256 a8 = _mm256_set1_ps(a);
  acc2[0] = _mm256_fmadd_ps(a8, b2[0], acc2[0]);
  acc2[1] = _mm256_fmadd_ps(a8, b2[1], acc2[1]);
  __builtin_memcpy(&acc, acc2, sizeof(acc));
  return acc;
#else
  return acc + a * b;
#endif
}

// The weights of one panel as the f32 tiles read them: At(k, c) is step k's
// vector c (columns 16c .. 16c + 15 of the panel) as floats, and Step(k) the
// address where step k's bytes begin (for prefetching; a panel's steps are
// consecutive, kStepBytes each, or on average for kInt8's blocks).
struct F32Panel {
  static constexpr int kStepBytes = PackedWeights::kPanel * sizeof(float);
  const float* p;
  Vec At(int k, int c) const {
    return Load(p + static_cast<long>(k) * PackedWeights::kPanel + c * kVec);
  }
  const char* Step(long k) const {
    return reinterpret_cast<const char*>(p) + k * kStepBytes;
  }
};

// bf16 widened to floats: exact (the low 16 bits become zero).
typedef uint16_t Vec16 __attribute__((vector_size(kVec * sizeof(uint16_t))));
typedef uint32_t VecU32 __attribute__((vector_size(kVec * sizeof(uint32_t))));
inline Vec LoadBf16(const uint16_t* p) {
  Vec16 h;
  __builtin_memcpy(&h, p, sizeof(h));
  const VecU32 bits = __builtin_convertvector(h, VecU32) << 16;
  Vec v;
  __builtin_memcpy(&v, &bits, sizeof(v));
  return v;
}
inline float Bf16Value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

// Keys and values as a KV cache holds them, f32 or bf16 bits, read as floats
// (the attention kernels are templates over the element).
inline Vec LoadElements(const float* p) { return Load(p); }
inline Vec LoadElements(const uint16_t* p) { return LoadBf16(p); }
inline float ElementValue(float f) { return f; }
inline float ElementValue(uint16_t h) { return Bf16Value(h); }

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

// Q8_0 weights (the kInt8 layout below) dequantized on the fly: At(k, c) is
// the float d · q, exactly PackedWeights::at's value, so a kW8A32 product is
// the kF32 product of the dequantized weights bit for bit. The byte q + 128
// of step k sits in byte k % 4 of its column's 32-bit lane of quad k % 32 / 4;
// 2^23 + (q + 128) is built as float bits and 2^23 + 128 taken off (exact).
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

// Step k of a panel product for R rows: acc[r] += x[r][k] * the panel's row
// k. The one body PanelTile and PanelSteps share, so their sums are formed in
// the same order and agree bit for bit.
template <int R, typename Panel>
inline void PanelStep(const float* x, int x_stride, const Panel& panel, int k,
                      Vec (&acc)[R][kPanelVecs]) {
  Vec b[kPanelVecs];
  for (int c = 0; c < kPanelVecs; ++c) b[c] = panel.At(k, c);
  for (int r = 0; r < R; ++r) {
    const float a = x[static_cast<long>(r) * x_stride + k];
    for (int c = 0; c < kPanelVecs; ++c) acc[r][c] = MulAdd(a, b[c], acc[r][c]);
  }
}

// Rows [0, R) × one panel of x · W, accumulated in registers over the whole
// depth in increasing k. Writes the first `valid` columns of the panel.
template <int R, typename Panel>
inline void PanelTile(const float* x, int depth, int x_stride,
                      const Panel& panel, float* y, int y_stride, int valid,
                      bool accumulate) {
  Vec acc[R][kPanelVecs] = {};
  for (int k = 0; k < depth; ++k) {
    if (R == 1) {
      // kPrefetchNearBytes and kPrefetchFarBytes ahead
      // (model/kernels/kernels.h); past the panel's end is harmless (a hint,
      // never a fault).
      const char* ahead = panel.Step(k) + kPrefetchNearBytes;
      const char* far = panel.Step(k) + kPrefetchFarBytes;
      for (int e = 0; e < Panel::kStepBytes; e += 64) {
        __builtin_prefetch(ahead + e);
        __builtin_prefetch(far + e, 0, 2);
      }
    }
    PanelStep<R>(x, x_stride, panel, k, acc);
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

// Steps [k0, k1) of PanelTile for R rows, continuing from and returning to
// `acc` in memory: storing a float accumulator and loading it back is exact, so
// a product computed in k-chunks has PanelTile's values bit for bit.
// Meanwhile, one cache line per step from [*prefetch, prefetch_end) is
// requested into L2: the group's next chunk streams in from memory while this
// one is computed from L1.
template <int R, typename Panel>
inline void PanelSteps(const float* x, int x_stride, const Panel& panel, int k0,
                       int k1, Vec (*partial)[kPanelVecs],
                       const char** prefetch, const char* prefetch_end) {
  Vec acc[R][kPanelVecs];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < kPanelVecs; ++c) acc[r][c] = partial[r][c];
  }
  for (int k = k0; k < k1; ++k) {
    if (*prefetch < prefetch_end) {
      __builtin_prefetch(*prefetch, 0, 2);
      *prefetch += 64;
    }
    PanelStep<R>(x, x_stride, panel, k, acc);
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < kPanelVecs; ++c) partial[r][c] = acc[r][c];
  }
}

// Rows [0, rows) × one panel (view `panel`, any Panel type), rows > kTileRows:
// groups of kGroup rows walk the panel together in chunks of kChunk steps (a
// chunk of panel is 32 KB of f32, in L1), so the panel streams from memory
// once per group rather than once per tile. While a chunk is computed the
// next one is requested, and after the last one the first kChunk steps at
// `next` (the next panel's, or null). With `next_end`, `panel` is already in
// cache (a widened panel) and the whole of [next, next_end), the next panel
// as stored, is requested instead, spread over this panel's compute.
constexpr int kGroup = 16, kChunk = 128;
template <typename Panel>
void PanelGroups(const float* x, int rows, int x_stride, const Panel& panel,
                 int depth, const char* next, const char* next_end, float* y,
                 int y_stride, int valid, bool accumulate) {
  const char* stream = next;  // With next_end: where the requests have got to.
  for (int g = 0; g < rows; g += kGroup) {
    const int group_rows = Min(kGroup, rows - g);
    Vec partial[kGroup][kPanelVecs] = {};
    for (int k0 = 0; k0 < depth; k0 += kChunk) {
      const int k1 = Min(depth, k0 + kChunk);
      const char* prefetch = stream;
      const char* prefetch_end = next_end;
      if (next_end == nullptr) {
        prefetch = k1 < depth ? panel.Step(k1) : next;
        const int next_steps = k1 < depth        ? Min(kChunk, depth - k1)
                               : next != nullptr ? Min(kChunk, depth)
                                                 : 0;
        prefetch_end =
            prefetch + static_cast<long>(next_steps) * Panel::kStepBytes;
      }
      int r = 0;
      for (; r + kTileRows <= group_rows; r += kTileRows) {
        PanelSteps<kTileRows>(x + static_cast<long>(g + r) * x_stride, x_stride,
                              panel, k0, k1, &partial[r], &prefetch,
                              prefetch_end);
      }
      for (; r < group_rows; ++r) {
        PanelSteps<1>(x + static_cast<long>(g + r) * x_stride, x_stride, panel,
                      k0, k1, &partial[r], &prefetch, prefetch_end);
      }
      if (next_end != nullptr) stream = prefetch;
    }
    for (int r = 0; r < group_rows; ++r) {
      float* out = y + static_cast<long>(g + r) * y_stride;
      if (valid == PackedWeights::kPanel) {
        for (int c = 0; c < kPanelVecs; ++c) {
          Store(out + c * kVec, accumulate
                                    ? Load(out + c * kVec) + partial[r][c]
                                    : partial[r][c]);
        }
      } else {
        float sums[PackedWeights::kPanel];
        __builtin_memcpy(sums, partial[r], sizeof(sums));
        for (int j = 0; j < valid; ++j)
          out[j] = accumulate ? out[j] + sums[j] : sums[j];
      }
    }
  }
}

// PanelAt(p) is panel p's view (F32Panel, Bf16Panel or Int8Panel). Panel by
// panel, so each panel of W stays in cache while every row passes over it;
// kTileRows rows share each load from the panel. With more rows than one tile
// and `widened` (room for depth × kPanel floats), a bf16 or int8 panel is
// first widened there to the floats At gives and the rows read those: the
// same values, converted once per panel instead of once per tile.
template <typename PanelAt>
void MatMulPanelsOf(const float* x, int rows, int x_stride, PanelAt panel_at,
                    int depth, int cols, int panel_begin, int panel_end,
                    float* widened, float* y, int y_stride, bool accumulate) {
  using Panel = decltype(panel_at(0));
  for (int p = panel_begin; p < panel_end; ++p) {
    const Panel panel = panel_at(p);
    // The next panel of this range as stored, for the groups' requests.
    const char* next = p + 1 < panel_end ? panel_at(p + 1).Step(0) : nullptr;
    const int j0 = p * PackedWeights::kPanel;
    const int valid = Min(PackedWeights::kPanel, cols - j0);
    if (rows <= kTileRows) {
      // Decode: one pass, prefetching (PanelTile<1>) when there is one row.
      if (rows == kTileRows) {
        PanelTile<kTileRows>(x, depth, x_stride, panel, y + j0, y_stride, valid,
                             accumulate);
      } else {
        for (int r = 0; r < rows; ++r) {
          PanelTile<1>(x + static_cast<long>(r) * x_stride, depth, x_stride,
                       panel, y + static_cast<long>(r) * y_stride + j0,
                       y_stride, valid, accumulate);
        }
      }
    } else if (widened != nullptr) {
      for (int k = 0; k < depth; ++k) {
        for (int c = 0; c < kPanelVecs; ++c) {
          Store(
              widened + static_cast<long>(k) * PackedWeights::kPanel + c * kVec,
              panel.At(k, c));
        }
      }
      // The widened floats are in cache; the next panel as stored streams
      // in from memory meanwhile, so that its widening does not wait on it.
      const char* next_end =
          next != nullptr ? panel_at(p + 1).Step(depth) : nullptr;
      PanelGroups(x, rows, x_stride, F32Panel{widened}, depth, next, next_end,
                  y + j0, y_stride, valid, accumulate);
    } else {
      PanelGroups(x, rows, x_stride, panel, depth, next, nullptr, y + j0,
                  y_stride, valid, accumulate);
    }
  }
}

// ---- kInt8: Q8_0 weights × Q8_0 activations ----
//
// A panel's block b (PackedWeights::kInt8Block = 32 steps of k) is 8 quads of
// 4 steps; quad q holds, for each of the panel's 64 columns, the 4 weights of
// steps 4q .. 4q + 3 as bytes w + 128 (offset binary, so that VNNI's
// unsigned × signed product takes them as they are). A lane of 4 bytes is one
// column: a 64-byte vector is 16 columns × 4 steps.
//
// The integer dot product of a column and a row's block is exact however it is
// formed (each family forms it its own way); the float part is one fixed
// sequence for every family, block by block in increasing b:
//   acc = acc + float(Σ w·x) · (x_scale · w_scale)
// (three roundings, never fused: -ffp-contract=off, and no FMA intrinsic
// here). So every family gives the same kInt8 values, whatever the batch.
typedef int32_t VecI __attribute__((vector_size(kVec * sizeof(int32_t))));

inline int32_t LoadQuad(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
// Σ over the quad of (w + 128) · x, 16 columns: one vpdpbusd. The offset is
// taken off once per block (OffsetCorrection).
constexpr bool kOffsetWeights = true;
typedef __m512i QuadWeights;
inline QuadWeights LoadQuadWeights(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}
inline VecI DotQuad(VecI acc, QuadWeights w, int32_t x4) {
  __m512i a;
  __builtin_memcpy(&a, &acc, sizeof(a));
  a = _mm512_dpbusd_epi32(a, w, _mm512_set1_epi32(x4));
  __builtin_memcpy(&acc, &a, sizeof(a));
  return acc;
}
#elif defined(__AVX2__)
// llama.cpp's AVX2 form: |w| (unsigned) × x·sign(w) (signed) in vpmaddubsw,
// whose pairs (at most 2 · 127 · 127) cannot saturate, then vpmaddwd by ones
// adds the pairs into one 32-bit sum of 4 products per column.
constexpr bool kOffsetWeights = false;
struct QuadWeights {
  __m256i abs[2], w[2];
};
inline QuadWeights LoadQuadWeights(const uint8_t* p) {
  QuadWeights q;
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int h = 0; h < 2; ++h) {
    // w + 128 xor 0x80 is w in two's complement.
    q.w[h] = _mm256_xor_si256(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h)),
        offset);
    q.abs[h] = _mm256_abs_epi8(q.w[h]);
  }
  return q;
}
inline VecI DotQuad(VecI acc, const QuadWeights& w, int32_t x4) {
  const __m256i x = _mm256_set1_epi32(x4);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a[2];
  __builtin_memcpy(a, &acc, sizeof(a));
  for (int h = 0; h < 2; ++h) {
    const __m256i pairs =
        _mm256_maddubs_epi16(w.abs[h], _mm256_sign_epi8(x, w.w[h]));
    a[h] = _mm256_add_epi32(a[h], _mm256_madd_epi16(pairs, ones));
  }
  __builtin_memcpy(&acc, a, sizeof(a));
  return acc;
}
#else
// Portable: the products one by one (the compiler vectorizes what the target
// allows).
constexpr bool kOffsetWeights = false;
typedef const uint8_t* QuadWeights;
inline QuadWeights LoadQuadWeights(const uint8_t* p) { return p; }
inline VecI DotQuad(VecI acc, QuadWeights w, int32_t x4) {
  int8_t x[4];
  __builtin_memcpy(x, &x4, sizeof(x));
  for (int l = 0; l < kVec; ++l) {
    int32_t s = 0;
    for (int e = 0; e < 4; ++e) s += (int32_t{w[4 * l + e]} - 128) * x[e];
    acc[l] += s;
  }
  return acc;
}
#endif

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

// Stores C vectors of sums into columns [c0 · 16, ...) of a row's panel,
// `valid` columns of the panel being real.
template <int C>
inline void StoreSums(const Vec (&sums)[C], int c0, int valid, float* out,
                      bool accumulate) {
  for (int c = 0; c < C; ++c) {
    const int j0 = (c0 + c) * kVec;
    float* o = out + j0;
    if (j0 + kVec <= valid) {
      Store(o, accumulate ? Load(o) + sums[c] : sums[c]);
    } else {
      float s[kVec];
      __builtin_memcpy(s, &sums[c], sizeof(s));
      for (int j = 0; j0 + j < valid; ++j)
        o[j] = accumulate ? o[j] + s[j] : s[j];
    }
  }
}

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

// ---- kBlocks: ggml's block types, dequantized on the fly ----
//
// A panel's codes come in groups of 32 steps of k (model/kernels/
// block_panels.h): 4 octets of 8 steps, each 64 columns × a 32-bit lane of 8
// nibbles (step k in bits 4 · (k % 8)); 5-bit codes add a lane of 32 fifth
// bits per column, 6-bit codes two lanes of 16 2-bit pairs; 8-bit codes are
// 8 quads of 4 bytes per lane. At(k, c) is the weight exactly as ggml's
// dequantize_row_* computes it (ggml_blocks.h): a · v, then ± b, each rounded
// on its own, so a kBlocks product is the kF32 product of the dequantized
// weights bit for bit, in every family.
// 16 fp16 bit patterns widened to floats, exactly.
inline Vec HalvesToFloats(const uint16_t* p) {
#if defined(__AVX512F__)
  // The full-mask form: GCC 12's unmasked one takes an undefined source that
  // -Wuninitialized reports where it is inlined.
  const __m512 f = _mm512_maskz_cvtph_ps(
      0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  Vec v;
  __builtin_memcpy(&v, &f, sizeof(v));
  return v;
#elif defined(__F16C__)
  const __m256 f[2] = {
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
      _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  Vec v;
  __builtin_memcpy(&v, f, sizeof(v));
  return v;
#else
  Vec v;
  for (int i = 0; i < kVec; ++i) v[i] = HalfToFloat(p[i]);
  return v;
#endif
}

typedef int8_t VecI8 __attribute__((vector_size(kVec)));
typedef uint8_t VecU8 __attribute__((vector_size(kVec)));
template <typename Small, typename SmallVec>
inline Vec SmallIntsToFloats(const Small* p) {
#if defined(__AVX512F__)
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m512i ints = static_cast<Small>(-1) < 0 ? _mm512_cvtepi8_epi32(bytes)
                                                  : _mm512_cvtepu8_epi32(bytes);
  const __m512 f = _mm512_cvtepi32_ps(ints);
  Vec v;
  __builtin_memcpy(&v, &f, sizeof(v));
  return v;
#else
  SmallVec v;
  __builtin_memcpy(&v, p, sizeof(v));
  return __builtin_convertvector(v, Vec);
#endif
}

constexpr unsigned kLaneRowBytes = 4 * PackedWeights::kPanel;  // 64 lanes.
template <int kBits, BlockBias kBias_, bool kTable, int kSub>
struct BlockPanel {
  static constexpr int kCodeBits = kBits;
  static constexpr BlockBias kBias = kBias_;
  static constexpr int kSubBlock = kSub;
  static constexpr bool kTableCodes = kTable;
  static constexpr unsigned kGroupBytes = kBits == 8   ? 8 * kLaneRowBytes
                                          : kBits == 4 ? 4 * kLaneRowBytes
                                          : kBits == 5 ? 5 * kLaneRowBytes
                                                       : 6 * kLaneRowBytes;
  static constexpr int kStepBytes = kGroupBytes / 32;
  const uint8_t* codes;
  const BlockPanelView* view;  // The stored scales.
  float offset;                // 2^23 + code_offset.
  Vec table;                   // IQ4's code values.
  static VecU32 Lanes(const uint8_t* p) {
    VecU32 v;
    __builtin_memcpy(&v, p, sizeof(v));
    return v;
  }
  // Step r < 32 of a group's code lanes: `low` the group's 4 octet rows (8
  // quad rows for 8-bit codes), `high` its 1 or 2 rows of high bits.
  static VecU32 Code(const VecU32* low, const VecU32* high, unsigned r) {
    if (kBits == 8) return (low[r / 4] >> (8 * (r % 4))) & 0xffu;
    VecU32 code = (low[r / 8] >> (4 * (r % 8))) & 0xfu;
    if (kBits == 5) code |= ((high[0] >> r) & 1u) << 4;
    if (kBits == 6) code |= ((high[r / 16] >> (2 * (r % 16))) & 3u) << 4;
    return code;
  }
  // The weights of one code vector: a · v, then ± b.
  Vec Weight(VecU32 code, Vec a_s, Vec b_s) const {
    Vec v;
    if (kTable) {
#if defined(__AVX512F__)
      const __m512 t =
          _mm512_permutexvar_ps(reinterpret_cast<const __m512i&>(code),
                                reinterpret_cast<const __m512&>(table));
      __builtin_memcpy(&v, &t, sizeof(v));
#else
      // IQ4's 16-entry table (GCC's __builtin_shuffle is not clang's).
      for (int i = 0; i < kVec; ++i) v[i] = table[code[i] & 15u];
#endif
    } else {
      const VecU32 bits = code | 0x4b000000u;  // 2^23 + code, exactly.
      __builtin_memcpy(&v, &bits, sizeof(v));
      v = v - offset;
    }
    Vec w = a_s * v;
    if (kBias == BlockBias::kPlusM) w = w + b_s;
    if (kBias == BlockBias::kMinusMin) w = w - b_s;
    return w;
  }
  static constexpr int kLowRows = kBits == 8 ? 8 : 4;
  static constexpr int kHighRows = kBits == 5 ? 1 : kBits == 6 ? 2 : 0;
  void LoadGroup(unsigned g, int c, VecU32* low, VecU32* high) const {
    const uint8_t* group = codes + g * kGroupBytes + c * 4 * kVec;
    for (int i = 0; i < kLowRows; ++i)
      low[i] = Lanes(group + i * kLaneRowBytes);
    for (int i = 0; i < kHighRows; ++i) {
      high[i] = Lanes(group + (4 + i) * kLaneRowBytes);
    }
  }
  // Sub-block k / kSub's factors for columns 16c .. 16c + 15: a = d · scale,
  // b = m · min (d alone, m alone, where the type has no scales or mins),
  // products of exact conversions, as ggml forms them.
  Vec FactorA(unsigned k, int c) const {
    return Factor<int8_t, VecI8>(view->d, view->scale, k, c);
  }
  Vec FactorB(unsigned k, int c) const {
    if (kBias == BlockBias::kNone) return Vec{};
    return Factor<uint8_t, VecU8>(view->m, view->min, k, c);
  }
  // The block's fp16 `halves` times the sub-block's `small` integers (if
  // any), for step k's sub-block.
  template <typename Small, typename SmallVec>
  Vec Factor(const uint16_t* halves, const Small* small, unsigned k,
             int c) const {
    const unsigned s = k / kSub;
    const unsigned block = s / view->subs_per_block;
    constexpr int kP = PackedWeights::kPanel;
    Vec f = HalvesToFloats(halves + block * kP + c * kVec);
    if (small != nullptr) {
      f = f * SmallIntsToFloats<Small, SmallVec>(small + s * kP + c * kVec);
    }
    return f;
  }
  Vec At(int k, int c) const {
    const unsigned uk = static_cast<unsigned>(k);
    VecU32 low[kLowRows], high[kHighRows > 0 ? kHighRows : 1];
    LoadGroup(uk / 32, c, low, high);
    return Weight(Code(low, high, uk % 32), FactorA(uk, c), FactorB(uk, c));
  }
  // Group g's 32 steps for R rows of x (x points at the group's first step)
  // into acc, the sums of columns 16c .. 16c + 15: PanelStep's order, one
  // multiply-add per step in increasing k, with the same weights as At.
  template <int R>
  void Group(unsigned g, int c, const float* x, int x_stride,
             Vec (&acc)[R]) const {
    VecU32 low[kLowRows], high[kHighRows > 0 ? kHighRows : 1];
    LoadGroup(g, c, low, high);
    const Vec a0 = FactorA(g * 32, c), b0 = FactorB(g * 32, c);
    const Vec a1 = FactorA(g * 32 + 16, c), b1 = FactorB(g * 32 + 16, c);
    // An octet of 8 steps at a time: constant shifts inside it, and few
    // enough live vectors that nothing is spilled.
#pragma GCC unroll 1
    for (unsigned o = 0; o < 4; ++o) {
      const Vec a = o < 2 ? a0 : a1, b = o < 2 ? b0 : b1;
      // The octet's lanes, its high bits shifted down once (Code's bits).
      const VecU32 l0 = kBits == 8 ? low[2 * o] : low[o];
      const VecU32 l1 = kBits == 8 ? low[2 * o + 1] : low[o];
      const VecU32 h = kBits == 5   ? high[0] >> (8 * o)
                       : kBits == 6 ? high[o / 2] >> (16 * (o % 2))
                                    : VecU32{};
#pragma GCC unroll 8
      for (unsigned i = 0; i < 8; ++i) {
        const unsigned r = o * 8 + i;
        VecU32 code;
        if (kBits == 8) {
          code = ((i < 4 ? l0 : l1) >> (8 * (i % 4))) & 0xffu;
        } else {
          code = (l0 >> (4 * i)) & 0xfu;
          if (kBits == 5) code |= ((h >> i) & 1u) << 4;
          if (kBits == 6) code |= ((h >> (2 * i)) & 3u) << 4;
        }
        const Vec w = Weight(code, a, b);
        for (int row = 0; row < R; ++row) {
          acc[row] =
              MulAdd(x[static_cast<long>(row) * x_stride + r], w, acc[row]);
        }
      }
    }
  }
  // The whole panel as f32 steps (F32Panel's layout): At's values, a group
  // of 32 steps at a time.
  void Widen(int depth, float* out) const {
    for (int g = 0; g < depth / 32; ++g) {
      for (int c = 0; c < kPanelVecs; ++c) {
        VecU32 low[kLowRows], high[kHighRows > 0 ? kHighRows : 1];
        LoadGroup(g, c, low, high);
        const Vec a0 = FactorA(g * 32, c), b0 = FactorB(g * 32, c);
        const Vec a1 = FactorA(g * 32 + 16, c), b1 = FactorB(g * 32 + 16, c);
        float* step = out + (32L * g) * PackedWeights::kPanel + c * kVec;
#pragma GCC unroll 32
        for (unsigned r = 0; r < 32; ++r) {
          Store(step + r * PackedWeights::kPanel,
                Weight(Code(low, high, r), r < 16 ? a0 : a1, r < 16 ? b0 : b1));
        }
      }
    }
  }
  const char* Step(long k) const {
    return reinterpret_cast<const char*>(codes) + k * kStepBytes;
  }
};

// Rows [0, R) × one block panel, R ≤ kTileRows (decoding): PanelTile's
// values, a group of 32 steps at a time so that each group's code lanes and
// factors are loaded once; prefetching as PanelTile<1> does.
template <int R, typename Panel>
void BlockTile(const float* x, int depth, int x_stride, const Panel& panel,
               float* y, int y_stride, int valid, bool accumulate) {
  Vec acc[R][kPanelVecs] = {};
  for (int g = 0; g < depth / 32; ++g) {
    const char* step = panel.Step(32L * g);
    for (unsigned e = 0; e < Panel::kGroupBytes; e += 64) {
      __builtin_prefetch(step + kPrefetchNearBytes + e);
      __builtin_prefetch(step + kPrefetchFarBytes + e, 0, 2);
    }
    for (int c = 0; c < kPanelVecs; ++c) {
      Vec column[R];
      for (int r = 0; r < R; ++r) column[r] = acc[r][c];
      panel.template Group<R>(g, c, x + 32L * g, x_stride, column);
      for (int r = 0; r < R; ++r) acc[r][c] = column[r];
    }
  }
  for (int r = 0; r < R; ++r) {
    float sums[PackedWeights::kPanel];
    __builtin_memcpy(sums, acc[r], sizeof(sums));
    float* out = y + static_cast<long>(r) * y_stride;
    for (int j = 0; j < valid; ++j) {
      out[j] = accumulate ? out[j] + sums[j] : sums[j];
    }
  }
}

template <typename Panel>
void MatMulBlockPanelOf(Panel panel, const float* x, int rows, int x_stride,
                        const BlockPanelView& view, int depth, int valid,
                        float* widened, float* y, int y_stride,
                        bool accumulate) {
  panel.codes = view.codes;
  panel.view = &view;
  panel.offset = 8388608.0f + static_cast<float>(view.code_offset);
  for (int i = 0; i < kVec; ++i) panel.table[i] = kIq4Values[i];
  if (rows == kTileRows) {
    return BlockTile<kTileRows>(x, depth, x_stride, panel, y, y_stride, valid,
                                accumulate);
  }
  if (rows < kTileRows) {
    for (int r = 0; r < rows; ++r) {
      BlockTile<1>(x + static_cast<long>(r) * x_stride, depth, x_stride, panel,
                   y + static_cast<long>(r) * y_stride, y_stride, valid,
                   accumulate);
    }
    return;
  }
  if (widened != nullptr) {
    // Prefill: the panel widened once, then every row over the floats.
    panel.Widen(depth, widened);
    PanelGroups(x, rows, x_stride, F32Panel{widened}, depth, nullptr, nullptr,
                y, y_stride, valid, accumulate);
    return;
  }
  MatMulPanelsOf(
      x, rows, x_stride, [&](int) { return panel; }, depth, valid, 0, 1,
      widened, y, y_stride, accumulate);
}

// run(panel): a BlockPanel of the kind of codes and scales `v` has (its
// codes and view not yet set), so that each kernel is instantiated per kind.
template <typename Run>
void ForPanelKind(const BlockPanelView& v, Run run) {
  constexpr BlockBias kNone = BlockBias::kNone;
  constexpr BlockBias kPlusM = BlockBias::kPlusM;
  constexpr BlockBias kMinusMin = BlockBias::kMinusMin;
  if (v.iq4_table) return run(BlockPanel<4, kNone, true, 32>{});
  if (v.sub_block == 16) {
    if (v.code_bits == 6) return run(BlockPanel<6, kNone, false, 16>{});
    if (v.bias == kMinusMin)
      return run(BlockPanel<4, kMinusMin, false, 16>{});  // Q2_K
    return run(BlockPanel<4, kNone, false, 16>{});        // Q3_K
  }
  switch (v.code_bits) {
    case 8:
      return run(BlockPanel<8, kNone, false, 32>{});
    case 5:
      if (v.bias == kPlusM) return run(BlockPanel<5, kPlusM, false, 32>{});
      if (v.bias == kMinusMin)
        return run(BlockPanel<5, kMinusMin, false, 32>{});
      return run(BlockPanel<5, kNone, false, 32>{});
    default:
      if (v.bias == kPlusM) return run(BlockPanel<4, kPlusM, false, 32>{});
      if (v.bias == kMinusMin)
        return run(BlockPanel<4, kMinusMin, false, 32>{});
      return run(BlockPanel<4, kNone, false, 32>{});
  }
}

void MatMulBlockPanel(const float* x, int rows, int x_stride,
                      const BlockPanelView& v, int depth, int valid,
                      float* widened, float* y, int y_stride, bool accumulate) {
  ForPanelKind(v, [&](auto panel) {
    MatMulBlockPanelOf(panel, x, rows, x_stride, v, depth, valid, widened, y,
                       y_stride, accumulate);
  });
}

// ---- kBlocks × int8 activations (PackedWeights::int8_activations) ----
//
// The same panels, multiplied by activations quantized as kInt8's are
// (QuantizedRows: per row, per group of 32 steps, q = round(x / dx)), with
// integer dot products where kBlocks dequantizes each weight to a float.
// Per row, column and sub-block s of group g (kernels.h has the contract):
//   T = Σ_k code_k · q_k - offset · S   (S = Σ_k q_k; exact int32)
//   acc = acc + float(T) · (a_s · dx)   [± float(S) · (b_s · dx)]
// every rounding its own (no FMA here), sub-blocks in increasing k; T is
// formed however the family likes (it is exact), so every family gives the
// same floats, and a row's floats do not depend on the rows beside it.
//
// A lane of 8 nibbles (steps 8o .. 8o + 7 of octet o) splits into two lanes
// of 4 bytes, the even steps' codes (0, 2, 4, 6) and the odd ones': the
// layout of BlockActivations::pairs, so one 4-byte dot product per lane takes
// 4 steps. 5- and 6-bit codes' high bits are moved into bits 4 and 5 of the
// same bytes.

// Bit pairs at bits 0, 4, 8, 12 of each lane moved to bits 0, 8, 16, 24.
inline VecU32 SpreadPairs(VecU32 v) {
  v = (v | (v << 8)) & 0x00ff00ffu;
  return (v | (v << 4)) & 0x0f0f0f0fu;
}

// Octet o's codes of 16 columns (`low`, `high` as BlockPanel::LoadGroup gives
// them), as the even steps' and the odd steps' bytes.
template <int kBits>
inline void OctetCodes(const VecU32* low, const VecU32* high, unsigned o,
                       VecU32* even, VecU32* odd) {
  *even = low[o] & 0x0f0f0f0fu;
  *odd = (low[o] >> 4) & 0x0f0f0f0fu;
  if (kBits == 5) {
    // Step 8o + i's fifth bit is bit 8o + i of high[0]. Times 2^4 + 2^10 +
    // 2^16 + 2^22, bits 0, 2, 4, 6 land on bits 4, 12, 20, 28; the other
    // products land (and carry) on none of those.
    const VecU32 h = high[0] >> (8 * o);
    *even |= ((h & 0x55u) * 0x410410u) & 0x10101010u;
    *odd |= (((h >> 1) & 0x55u) * 0x410410u) & 0x10101010u;
  }
  if (kBits == 6) {
    // Step 8o + i's high pair is bits 2i of high[o / 2] >> 16 (o % 2).
    const VecU32 h = high[o / 2] >> (16 * (o % 2));
    *even |= SpreadPairs(h & 0x3333u) << 4;
    *odd |= SpreadPairs((h >> 2) & 0x3333u) << 4;
  }
}

// acc + Σ over each lane's 4 bytes of code · x (codes at most 63, x4 four
// signed bytes): exact.
inline VecI DotCodes(VecI acc, VecU32 codes, int32_t x4) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  __m512i a, w;
  __builtin_memcpy(&a, &acc, sizeof(a));
  __builtin_memcpy(&w, &codes, sizeof(w));
  a = _mm512_dpbusd_epi32(a, w, _mm512_set1_epi32(x4));
  __builtin_memcpy(&acc, &a, sizeof(a));
  return acc;
#elif defined(__AVX2__)
  // Pairs of products are at most 2 · 63 · 128 in magnitude: no saturation.
  const __m256i x = _mm256_set1_epi32(x4);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a[2], w[2];
  __builtin_memcpy(a, &acc, sizeof(a));
  __builtin_memcpy(w, &codes, sizeof(w));
  for (int h = 0; h < 2; ++h) {
    a[h] = _mm256_add_epi32(
        a[h], _mm256_madd_epi16(_mm256_maddubs_epi16(w[h], x), ones));
  }
  __builtin_memcpy(&acc, a, sizeof(a));
  return acc;
#else
  for (int b = 0; b < 4; ++b) {
    const int32_t xb =
        static_cast<int8_t>(static_cast<uint32_t>(x4) >> (8 * b));
    acc += __builtin_convertvector((codes >> (8 * b)) & 0xffu, VecI) * xb;
  }
  return acc;
#endif
}

// Rows [r0, r0 + R) × the panel, into out[R][kPanelVecs].
template <int R, typename Panel>
void BlockInt8Tile(const BlockActivations& a, int r0, const Panel& panel,
                   int depth, Vec (&out)[R][kPanelVecs]) {
  constexpr int kBits = Panel::kCodeBits;
  constexpr bool kHalves = Panel::kSubBlock == 16;
  const int groups = depth / 32;
  const int blocks = a.x.blocks;
  // What the dot products leave to take off: offset · S, except where
  // DotQuad already took 128 off each 8-bit code (kOffsetWeights false).
  const int offset =
      kBits == 8 && !kOffsetWeights ? 0 : panel.view->code_offset;
  Vec acc[R][kPanelVecs] = {};
  for (int g = 0; g < groups; ++g) {
    if (R == 1) {
      const char* step = panel.Step(32L * g);
      for (unsigned e = 0; e < Panel::kGroupBytes; e += 64) {
        __builtin_prefetch(step + kPrefetchNearBytes + e);
        __builtin_prefetch(step + kPrefetchFarBytes + e, 0, 2);
      }
    }
    float dx[R];
    int32_t sums[R][2] = {};
    const int32_t* pairs[R];
    const int8_t* q[R];
    for (int r = 0; r < R; ++r) {
      const long rb = static_cast<long>(r0 + r) * blocks + g;
      dx[r] = a.x.scale[rb];
      q[r] = a.x.q + rb * PackedWeights::kInt8Block;
      pairs[r] = a.pairs + rb * 8;
      if (kHalves) {
        sums[r][0] = a.half_sums[2 * rb];
        sums[r][1] = a.half_sums[2 * rb + 1];
      } else {
        sums[r][0] = a.x.sum[rb];
      }
    }
    for (int c = 0; c < kPanelVecs; ++c) {
      VecI dots[R][2] = {};
      if (kBits == 8) {
        const uint8_t* group =
            panel.codes + g * Panel::kGroupBytes + c * 4 * kVec;
        for (int quad = 0; quad < 8; ++quad) {
          const QuadWeights w = LoadQuadWeights(group + quad * kLaneRowBytes);
          for (int r = 0; r < R; ++r) {
            VecI& d = dots[r][kHalves && quad >= 4];
            d = DotQuad(d, w, LoadQuad(q[r] + 4 * quad));
          }
        }
      } else {
        VecU32 low[4], high[Panel::kHighRows > 0 ? Panel::kHighRows : 1];
        panel.LoadGroup(g, c, low, high);
        for (unsigned o = 0; o < 4; ++o) {
          VecU32 even, odd;
          OctetCodes<kBits>(low, high, o, &even, &odd);
          for (int r = 0; r < R; ++r) {
            VecI& d = dots[r][kHalves && o >= 2];
            d = DotCodes(DotCodes(d, even, pairs[r][2 * o]), odd,
                         pairs[r][2 * o + 1]);
          }
        }
      }
      for (int h = 0; h < (kHalves ? 2 : 1); ++h) {
        const Vec fa = panel.FactorA(32 * g + 16 * h, c);
        const Vec fb = panel.FactorB(32 * g + 16 * h, c);
        for (int r = 0; r < R; ++r) {
          const Vec t =
              __builtin_convertvector(dots[r][h] - offset * sums[r][h], Vec);
          acc[r][c] = acc[r][c] + t * (fa * dx[r]);
          if (Panel::kBias != BlockBias::kNone) {
            const Vec s = Vec{} + static_cast<float>(sums[r][h]);
            const Vec bias = s * (fb * dx[r]);
            acc[r][c] = Panel::kBias == BlockBias::kPlusM ? acc[r][c] + bias
                                                          : acc[r][c] - bias;
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < kPanelVecs; ++c) out[r][c] = acc[r][c];
  }
}

template <typename Panel>
void MatMulBlockPanelInt8Of(Panel panel, const BlockActivations& a,
                            const BlockPanelView& view, int depth, int valid,
                            float* y, int y_stride, bool accumulate) {
  panel.codes = view.codes;
  panel.view = &view;
  int r = 0;
  for (; r + kTileRows <= a.x.rows; r += kTileRows) {
    Vec sums[kTileRows][kPanelVecs];
    BlockInt8Tile<kTileRows>(a, r, panel, depth, sums);
    for (int i = 0; i < kTileRows; ++i) {
      StoreSums<kPanelVecs>(sums[i], 0, valid,
                            y + static_cast<long>(r + i) * y_stride,
                            accumulate);
    }
  }
  for (; r < a.x.rows; ++r) {
    Vec sums[1][kPanelVecs];
    BlockInt8Tile<1>(a, r, panel, depth, sums);
    StoreSums<kPanelVecs>(sums[0], 0, valid,
                          y + static_cast<long>(r) * y_stride, accumulate);
  }
}

// Not IQ4's tables: BlockTypeTakesInt8Activations.
void MatMulBlockPanelInt8(const BlockActivations& a, const BlockPanelView& v,
                          int depth, int valid, float* y, int y_stride,
                          bool accumulate) {
  ForPanelKind(v, [&](auto panel) {
    if constexpr (!decltype(panel)::kTableCodes) {
      MatMulBlockPanelInt8Of(panel, a, v, depth, valid, y, y_stride,
                             accumulate);
    }
  });
}

#if defined(__AVX512F__)
// out[c · 16 + r] = in[r · stride + c] for r, c < 16: a 16 × 16 block moved
// in registers (unpack 32-bit, then 64-bit pairs, then 128-bit lanes twice),
// 48 shuffles instead of 256 scalar loads and stores. A copy: exact.
// (Through the full-mask forms: GCC 12's unmasked ones take an undefined
// source that -Wuninitialized reports.)
inline __m512 UnpackLo(__m512 a, __m512 b) {
  return _mm512_mask_unpacklo_ps(a, 0xFFFF, a, b);
}
inline __m512 UnpackHi(__m512 a, __m512 b) {
  return _mm512_mask_unpackhi_ps(a, 0xFFFF, a, b);
}
inline __m512 UnpackLo64(__m512 a, __m512 b) {
  const __m512d x = _mm512_castps_pd(a);
  return _mm512_castpd_ps(
      _mm512_mask_unpacklo_pd(x, 0xFF, x, _mm512_castps_pd(b)));
}
inline __m512 UnpackHi64(__m512 a, __m512 b) {
  const __m512d x = _mm512_castps_pd(a);
  return _mm512_castpd_ps(
      _mm512_mask_unpackhi_pd(x, 0xFF, x, _mm512_castps_pd(b)));
}
template <int kImm>
inline __m512 Lanes(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, 0xFFFF, a, b, kImm);
}

template <typename Element>
inline void Transpose16(const Element* in, long stride, float* out) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = LoadElements(in + i * stride);
  for (int i = 0; i < 16; i += 2) {
    t[i] = UnpackLo(r[i], r[i + 1]);
    t[i + 1] = UnpackHi(r[i], r[i + 1]);
  }
  // u[4i + m] holds, in each 128-bit lane L, column 4L + m of rows 4i .. 4i+3.
  __m512 u[16];
  for (int i = 0; i < 16; i += 4) {
    u[i] = UnpackLo64(t[i], t[i + 2]);
    u[i + 1] = UnpackHi64(t[i], t[i + 2]);
    u[i + 2] = UnpackLo64(t[i + 1], t[i + 3]);
    u[i + 3] = UnpackHi64(t[i + 1], t[i + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    // Lanes (L0, L2) and (L1, L3) of u[m], u[4 + m], then of u[8 + m], u[12 +
    // m].
    const __m512 v0 = Lanes<0x88>(u[m], u[4 + m]);
    const __m512 w0 = Lanes<0xDD>(u[m], u[4 + m]);
    const __m512 v1 = Lanes<0x88>(u[8 + m], u[12 + m]);
    const __m512 w1 = Lanes<0xDD>(u[8 + m], u[12 + m]);
    _mm512_storeu_ps(out + (0 + m) * 16, Lanes<0x88>(v0, v1));
    _mm512_storeu_ps(out + (4 + m) * 16, Lanes<0x88>(w0, w1));
    _mm512_storeu_ps(out + (8 + m) * 16, Lanes<0xDD>(v0, v1));
    _mm512_storeu_ps(out + (12 + m) * 16, Lanes<0xDD>(w0, w1));
  }
}
#endif

template <typename Element>
void AttentionScoresOf(const float* q, int rows, int depth, int q_stride,
                       const Element* k, int k_stride, int keys,
                       int first_position, float* y, int y_stride,
                       float* scratch, bool request_next) {
  const bool request_ahead = k_stride != depth || request_next;
  for (int j0 = 0; j0 < keys; j0 += kVec) {
    const int valid = Min(kVec, keys - j0);
    // Keys two blocks ahead requested (a hint; past the end is harmless):
    // keys a stride apart are each their own cache lines; past a contiguous
    // run, only when asked (see kernels.h).
    for (int jj = 0; jj < kVec && request_ahead; ++jj) {
      const Element* ahead =
          k + static_cast<long>(j0 + jj + 2 * kVec) * k_stride;
      for (int e = 0; e < depth; e += 64 / sizeof(Element)) {
        __builtin_prefetch(ahead + e);
      }
    }
    // Keys j0 .. j0 + 15 transposed: scratch[d · 16 + jj] = k_{j0 + jj}[d].
    // (With one query row, as in decoding, moving the keys costs more than
    // scoring them: a whole block moves in registers where the target can.)
    bool transposed = false;
#if defined(__AVX512F__)
    if (valid == kVec && depth % kVec == 0) {
      for (int d0 = 0; d0 < depth; d0 += kVec) {
        Transpose16(k + static_cast<long>(j0) * k_stride + d0, k_stride,
                    scratch + d0 * kVec);
      }
      transposed = true;
    }
#endif
    if (!transposed) {
      for (int jj = 0; jj < kVec; ++jj) {
        const Element* kj = k + static_cast<long>(j0 + jj) * k_stride;
        for (int d = 0; d < depth; ++d)
          scratch[d * kVec + jj] = jj < valid ? ElementValue(kj[d]) : 0.0f;
      }
    }
    // Row t sees key j0 once first_position + t >= j0.
    int t = Max(0, j0 - first_position);
    auto store = [&](int row, Vec acc) {
      float* out = y + static_cast<long>(row) * y_stride + j0;
      if (valid == kVec) {
        Store(out, acc);
      } else {
        float sums[kVec];
        __builtin_memcpy(sums, &acc, sizeof(sums));
        for (int jj = 0; jj < valid; ++jj) out[jj] = sums[jj];
      }
    };
    // Rows in groups of 8, then 4, each group sharing each key vector's load:
    // 8 independent chains of multiply-adds keep the FMA units busy where 4
    // wait on their latency (a prompt's many rows; decoding has one).
    auto group = [&](auto rows_in_group) {
      constexpr int kRows = decltype(rows_in_group)::value;
      Vec acc[kRows] = {};
      for (int d = 0; d < depth; ++d) {
        const Vec b = Load(scratch + d * kVec);
        for (int r = 0; r < kRows; ++r) {
          acc[r] =
              MulAdd(q[static_cast<long>(t + r) * q_stride + d], b, acc[r]);
        }
      }
      for (int r = 0; r < kRows; ++r) store(t + r, acc[r]);
    };
    for (; t + 8 <= rows; t += 8) group(std::integral_constant<int, 8>());
    for (; t + 4 <= rows; t += 4) group(std::integral_constant<int, 4>());
    for (; t < rows; ++t) {
      Vec acc = {};
      const float* qt = q + static_cast<long>(t) * q_stride;
      for (int d = 0; d < depth; ++d) {
        acc = MulAdd(qt[d], Load(scratch + d * kVec), acc);
      }
      store(t, acc);
    }
  }
}

// R rows of weights over the same values (R <= 8), dimensions d0 .. d0 +
// V vectors: for each value's vectors, loaded once, every row's running sum
// takes one multiply and one add, in increasing j, as a single row's would.
// R and V are constants so that the R × V sums stay in registers.
// Accumulating starts from the stored float instead of 0: the running sum is
// a float either way, so a sum split into consecutive ranges of j is the same
// sequence of operations.
template <int R, int V, typename Element>
void WeightedVectorsOf(const float* p, int p_stride, int n, const Element* v,
                       int v_stride, float* out, int out_stride,
                       bool accumulate, bool request_ahead) {
  Vec acc[R][V];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < V; ++c) {
      acc[r][c] = accumulate ? Load(out + r * out_stride + c * kVec) : Vec{};
    }
  }
  for (int j = 0; j < n; ++j) {
    const Element* vj = v + static_cast<long>(j) * v_stride;
    // Rows 16 ahead requested (see kernels.h).
    for (int c = 0; c < V && request_ahead; ++c) {
      __builtin_prefetch(vj + 16L * v_stride + c * kVec);
    }
    for (int c = 0; c < V; ++c) {
      const Vec x = LoadElements(vj + c * kVec);
      for (int r = 0; r < R; ++r) acc[r][c] += p[r * p_stride + j] * x;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < V; ++c)
      Store(out + r * out_stride + c * kVec, acc[r][c]);
  }
}

template <int R, typename Element>
void WeightedRowsOf(const float* p, int p_stride, int n, const Element* v,
                    int v_stride, int depth, float* out, int out_stride,
                    bool accumulate, bool request_next) {
  const bool request_ahead = v_stride != depth || request_next;
  // Up to 4 vectors (64 dimensions with AVX-512) at a time; element d always
  // takes the same path (vector or scalar), whatever n is.
  int d0 = 0;
  for (; d0 + kVec <= depth;) {
    const int vecs = Min(4, (depth - d0) / kVec);
    auto run = [&](auto vectors) {
      WeightedVectorsOf<R, decltype(vectors)::value>(
          p, p_stride, n, v + d0, v_stride, out + d0, out_stride, accumulate,
          request_ahead);
    };
    switch (vecs) {
      case 4:
        run(std::integral_constant<int, 4>());
        break;
      case 3:
        run(std::integral_constant<int, 3>());
        break;
      case 2:
        run(std::integral_constant<int, 2>());
        break;
      default:
        run(std::integral_constant<int, 1>());
    }
    d0 += vecs * kVec;
  }
  for (int r = 0; r < R; ++r) {
    for (int d = d0; d < depth; ++d) {
      float acc = accumulate ? out[r * out_stride + d] : 0.0f;
      for (int j = 0; j < n; ++j) {
        acc += p[r * p_stride + j] *
               ElementValue(v[static_cast<long>(j) * v_stride + d]);
      }
      out[r * out_stride + d] = acc;
    }
  }
}

template <typename Element>
void WeightedSumOf(const float* p, int p_stride, int rows, int n,
                   const Element* v, int v_stride, int depth, float* out,
                   int out_stride, bool accumulate, bool request_next) {
  // 8 rows at a time where their sums fit in registers (a head of up to 32
  // dimensions: 8 × 2 vectors), so that 8 independent chains of adds hide
  // each add's latency; else 4.
  int r = 0;
  if (depth <= 2 * kVec) {
    for (; r + 8 <= rows; r += 8) {
      WeightedRowsOf<8>(p + static_cast<long>(r) * p_stride, p_stride, n, v,
                        v_stride, depth, out + static_cast<long>(r) * out_stride,
                        out_stride, accumulate, request_next);
    }
  }
  for (; r < rows; r += 4) {
    const float* pr = p + static_cast<long>(r) * p_stride;
    float* outr = out + static_cast<long>(r) * out_stride;
    switch (Min(4, rows - r)) {
      case 4:
        WeightedRowsOf<4>(pr, p_stride, n, v, v_stride, depth, outr, out_stride,
                          accumulate, request_next);
        break;
      case 3:
        WeightedRowsOf<3>(pr, p_stride, n, v, v_stride, depth, outr, out_stride,
                          accumulate, request_next);
        break;
      case 2:
        WeightedRowsOf<2>(pr, p_stride, n, v, v_stride, depth, outr, out_stride,
                          accumulate, request_next);
        break;
      default:
        WeightedRowsOf<1>(pr, p_stride, n, v, v_stride, depth, outr, out_stride,
                          accumulate, request_next);
    }
  }
}

void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const float* k, int k_stride, int keys, int first_position,
                     float* y, int y_stride, float* scratch,
                     bool request_next) {
  AttentionScoresOf(q, rows, depth, q_stride, k, k_stride, keys, first_position,
                    y, y_stride, scratch, request_next);
}
void AttentionScoresBf16(const float* q, int rows, int depth, int q_stride,
                         const uint16_t* k, int k_stride, int keys,
                         int first_position, float* y, int y_stride,
                         float* scratch, bool request_next) {
  AttentionScoresOf(q, rows, depth, q_stride, k, k_stride, keys, first_position,
                    y, y_stride, scratch, request_next);
}
void WeightedSum(const float* p, int p_stride, int rows, int n, const float* v,
                 int v_stride, int depth, float* out, int out_stride,
                 bool accumulate, bool request_next) {
  WeightedSumOf(p, p_stride, rows, n, v, v_stride, depth, out, out_stride,
                accumulate, request_next);
}
void WeightedSumBf16(const float* p, int p_stride, int rows, int n,
                     const uint16_t* v, int v_stride, int depth, float* out,
                     int out_stride, bool accumulate, bool request_next) {
  WeightedSumOf(p, p_stride, rows, n, v, v_stride, depth, out, out_stride,
                accumulate, request_next);
}

typedef int32_t VecI32 __attribute__((vector_size(kVec * sizeof(int32_t))));

// exp of 16 floats in [-87, 88] (elsewhere some finite value, as callers
// that replace those lanes may leave it): range reduction x = n ln2 + r,
// |r| <= ln2 / 2, and a degree-7 Taylor polynomial (truncation error 5e-9);
// within a few ulp of exp.
inline Vec Exp16InRange(Vec x) {
  // n = round(x / ln2), by the 1.5 · 2^23 trick (|x / ln2| < 2^22).
  constexpr float kRound = 12582912.0f;
  const Vec n = (x * 1.44269504088896341f + kRound) - kRound;
  // ln2 split in two so that n · ln2_hi is exact.
  const Vec r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  Vec p = r * (1.0f / 5040) + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const VecI32 ni = __builtin_convertvector(n, VecI32);
  const VecI32 scale_bits = (ni + 127) << 23;  // 2^n
  Vec scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof(scale));
  return p * scale;
}

// The same with x clamped to [-87, 88] first, so the result is a normal float.
inline Vec Exp16(Vec x) {
  x = x < -87.0f ? Vec{} - 87.0f : x;
  x = x > 88.0f ? Vec{} + 88.0f : x;
  return Exp16InRange(x);
}

// exp(x - max) of every element through Exp16, the tail included (padded),
// so that an element's value does not depend on where it sits; below -87,
// where expf's value is subnormal or 0 (a weight no sum can feel), exactly 0.
// The libm call per element was half of a long prompt's attention time.
void Softmax(float* x, int n, float scale, float* entropy) {
  // max is exact in any order: lane by lane, then across the lanes (a scalar
  // chain of compares was most of a long row's time).
  Vec lanes = Vec{} + x[0];
  int i = 0;
  for (; i + kVec <= n; i += kVec) {
    const Vec v = Load(x + i);
    lanes = v > lanes ? v : lanes;
  }
  float max = lanes[0];
  for (int lane = 1; lane < kVec; ++lane) {
    max = lanes[lane] > max ? lanes[lane] : max;
  }
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  // Scaled here rather than in a pass of its own: rounding is monotonic, so
  // the scaled max is the max of the scaled values, bit for bit.
  const float scaled_max = max * scale;
  // The exponentials' sum is Sum's (element i into lane i % kVec, in index
  // order, lanes folded by FoldLanes), taken as they are stored rather than
  // in a second pass; for the entropy, Σ e (y - max) beside it.
  Vec sum = {}, weighted = {};
  auto exp_shifted = [&](Vec v, int valid) {
    const Vec shifted = v * scale - scaled_max;
    // shifted <= 0 (max is the max); below -87 the value is replaced.
    Vec e = shifted < -87.0f ? Vec{} : Exp16InRange(shifted);
    // A tail's padding lanes are not the row's: they add nothing.
    for (int lane = valid; lane < kVec; ++lane) e[lane] = 0.0f;
    sum += e;
    if (entropy != nullptr) weighted += e * shifted;
    return e;
  };
  for (i = 0; i + kVec <= n; i += kVec) {
    Store(x + i, exp_shifted(Load(x + i), kVec));
  }
  if (i < n) {
    float tail[kVec] = {};
    for (int j = i; j < n; ++j) tail[j - i] = x[j];
    Store(tail, exp_shifted(Load(tail), n - i));
    for (int j = i; j < n; ++j) x[j] = tail[j - i];
  }
  float folded[kVec];
  Store(folded, sum);
  const float z = FoldLanes(folded);
  const float inv_sum = 1.0f / z;
  for (i = 0; i + kVec <= n; i += kVec) Store(x + i, Load(x + i) * inv_sum);
  for (; i < n; ++i) x[i] *= inv_sum;
  if (entropy != nullptr) {
    Store(folded, weighted);
    const double h = log(static_cast<double>(z)) -
                     static_cast<double>(FoldLanes(folded)) / z;
    *entropy = static_cast<float>(h > 0 ? h : 0);
  }
}

void RowStats(const float* p, int n, float* max, float* index_dot) {
  Vec top = Vec{} + p[0], acc = {}, index = {};
  for (int lane = 0; lane < kVec; ++lane) index[lane] = static_cast<float>(lane);
  int i = 0;
  for (; i + kVec <= n; i += kVec) {
    const Vec v = Load(p + i);
    top = v > top ? v : top;
    acc += v * index;
    index += static_cast<float>(kVec);
  }
  float m = top[0], dot = 0;
  for (int lane = 1; lane < kVec; ++lane) m = top[lane] > m ? top[lane] : m;
  for (; i < n; ++i) {
    m = p[i] > m ? p[i] : m;
    dot += p[i] * static_cast<float>(i);
  }
  float folded[kVec];
  Store(folded, acc);
  *max = m;
  *index_dot = FoldLanes(folded) + dot;
}

// ln of 16 positive normal floats: x = 2^e · m with m in [√½, √2), and
// ln m = ln(1 + f), f = m - 1, by Cephes' logf polynomial (relative error
// about 1e-7, no division: a divide was most of an entropy's time).
inline Vec Log16(Vec x) {
  VecI32 bits;
  __builtin_memcpy(&bits, &x, sizeof(bits));
  VecI32 exponent = ((bits >> 23) & 0xFF) - 127;
  const VecI32 mantissa_bits = (bits & 0x7FFFFF) | 0x3F800000;
  Vec m;
  __builtin_memcpy(&m, &mantissa_bits, sizeof(m));
  const auto high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  exponent = high ? exponent + 1 : exponent;
  const Vec f = m - 1.0f;
  const Vec f2 = f * f;
  Vec p = f * 7.0376836292e-2f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  const Vec e = __builtin_convertvector(exponent, Vec);
  // ln2 split in two so that e · ln2_hi is exact.
  return (f - 0.5f * f2 + p * f * f2 + e * -2.12194440e-4f) + e * 0.693359375f;
}

// -Σ p ln p over the positive normal p (a subnormal's term is under 1e-36),
// lane by lane in index order, the tail padded with ones (1 · ln 1 = 0).
float Entropy(const float* p, int n) {
  auto terms = [](Vec v) {
    const auto positive = v >= 1.17549435e-38f;
    const Vec safe = positive ? v : Vec{} + 1.0f;
    return safe * Log16(safe);
  };
  Vec acc = {};
  int i = 0;
  for (; i + kVec <= n; i += kVec) acc += terms(Load(p + i));
  if (i < n) {
    Vec tail = Vec{} + 1.0f;
    for (int j = i; j < n; ++j) tail[j - i] = p[j];
    acc += terms(tail);
  }
  float lanes[kVec];
  Store(lanes, acc);
  float sum = 0;
  for (int l = 0; l < kVec; ++l) sum += lanes[l];
  return -sum;
}

// GPT-2's "gelu_new", 0.5 v (1 + tanh(u)) with u = sqrt(2/pi) (v + 0.044715
// v^3), written as v / (1 + exp(-2u)) (the same function: 0.5 (1 + tanh(u)) =
// sigmoid(2u)), which has no cancellation for negative v and needs only exp.
inline Vec Gelu16(Vec v) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const Vec u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
  return v / (1.0f + Exp16(-2.0f * u));
}

void GeluTanh(float* x, int n) {
  int i = 0;
  for (; i + kVec <= n; i += kVec) Store(x + i, Gelu16(Load(x + i)));
  if (i < n) {
    // The tail through the same vector routine, so every element is computed
    // alike wherever it sits.
    float tail[kVec] = {};
    for (int j = i; j < n; ++j) tail[j - i] = x[j];
    Store(tail, Gelu16(Load(tail)));
    for (int j = i; j < n; ++j) x[j] = tail[j - i];
  }
}

void SiluMultiply(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i)
    gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

// FloatToBf16 (model/kernels/kernels.cc) lane by lane: round to nearest even by
// adding 0x7fff plus the kept part's lowest bit; a NaN keeps its sign and
// payload's top bits and is made quiet. The tail calls FloatToBf16 itself.
void RoundToBf16(const float* x, int n, uint16_t* out) {
  int i = 0;
  for (; i + kVec <= n; i += kVec) {
    VecU32 bits;
    __builtin_memcpy(&bits, x + i, sizeof(bits));
    const VecU32 nan = (VecU32)((bits & 0x7fffffffu) > 0x7f800000u);
    const VecU32 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    const VecU32 quiet = (bits >> 16) | 0x40u;
    const Vec16 h =
        __builtin_convertvector((quiet & nan) | (rounded & ~nan), Vec16);
    __builtin_memcpy(out + i, &h, sizeof(h));
  }
  for (; i < n; ++i) out[i] = FloatToBf16(x[i]);
}

}  // namespace

#define TEXTGEN_STRINGIFY_(x) #x
#define TEXTGEN_STRINGIFY(x) TEXTGEN_STRINGIFY_(x)

const KernelTable kTable = {
    TEXTGEN_STRINGIFY(TEXTGEN_KERNEL_FAMILY),
    Dot,
    Sum,
    MatMulF32,
    MatMulBf16,
    QuantizeRows,
    MatMulInt8,
    MatMulW8A32,
    MatMulBlockPanel,
    MatMulBlockPanelInt8,
    AttentionScores,
    WeightedSum,
    AttentionScoresBf16,
    WeightedSumBf16,
    Softmax,
    Entropy,
    RowStats,
    GeluTanh,
    SiluMultiply,
    RoundToBf16,
};

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY
