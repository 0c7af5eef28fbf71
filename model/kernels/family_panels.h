// The panel machinery that both the packed-weight products
// (model/kernels/family_matmul.cc) and ggml's block panels
// (model/kernels/family_block_panels.cc) run: the f32 panel tiles and groups
// over any panel view (F32Panel here; Bf16Panel, Int8Panel and BlockPanel in
// those files), kInt8's quad dot products, and the store of a tile's sums.
// Internal to the family files; in an unnamed namespace, as
// model/kernels/family_vectors.h explains.
#ifndef TEXTGEN_MODEL_KERNELS_FAMILY_PANELS_H_
#define TEXTGEN_MODEL_KERNELS_FAMILY_PANELS_H_

#include <cstdint>

#include "model/kernels/family_vectors.h"
#include "model/kernels/kernels.h"
#include "model/kernels/table.h"

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {
namespace {

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
      // The last 1 .. kTileRows - 1 rows share the panel's loads too (a
      // speculative verification chunk is 2 .. 9 rows); each row's sums are
      // formed as in any tile, so its values do not depend on its company.
      const float* rest = x + static_cast<long>(g + r) * x_stride;
      switch (group_rows - r) {
        case 3:
          PanelSteps<3>(rest, x_stride, panel, k0, k1, &partial[r], &prefetch,
                        prefetch_end);
          break;
        case 2:
          PanelSteps<2>(rest, x_stride, panel, k0, k1, &partial[r], &prefetch,
                        prefetch_end);
          break;
        case 1:
          PanelSteps<1>(rest, x_stride, panel, k0, k1, &partial[r], &prefetch,
                        prefetch_end);
          break;
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

// Rows one pass over a panel takes at most: six rows' sums still fit the
// registers of the widest family (24 of AVX-512's 32, and 4 for the panel).
constexpr int kOnePassRows = kTileRows + 2;

// Rows [0, rows), rows ≤ kOnePassRows, × one panel in one pass, all rows
// sharing each load; prefetching (PanelTile<1>) when there is one row.
template <typename Panel>
inline void PanelRowsInOnePass(const float* x, int rows, int x_stride,
                               const Panel& panel, int depth, float* y,
                               int y_stride, int valid, bool accumulate) {
  static_assert(kTileRows == 4, "the cases below are 1 .. kTileRows + 2");
  switch (rows) {
    case 6:
      PanelTile<6>(x, depth, x_stride, panel, y, y_stride, valid, accumulate);
      break;
    case 5:
      PanelTile<5>(x, depth, x_stride, panel, y, y_stride, valid, accumulate);
      break;
    case 4:
      PanelTile<4>(x, depth, x_stride, panel, y, y_stride, valid, accumulate);
      break;
    case 3:
      PanelTile<3>(x, depth, x_stride, panel, y, y_stride, valid, accumulate);
      break;
    case 2:
      PanelTile<2>(x, depth, x_stride, panel, y, y_stride, valid, accumulate);
      break;
    default:
      PanelTile<1>(x, depth, x_stride, panel, y, y_stride, valid, accumulate);
      break;
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
    if (rows <= 2 * kTileRows) {
      // Decode, and a verification chunk (its last token and the guesses):
      // at most two passes over the panel cost less than PanelGroups'
      // chunked walk, which pays for streaming one panel for many rows.
      const int first = rows <= kOnePassRows ? rows : kTileRows;
      PanelRowsInOnePass(x, first, x_stride, panel, depth, y + j0, y_stride,
                         valid, accumulate);
      if (first < rows) {
        PanelRowsInOnePass(x + static_cast<long>(first) * x_stride,
                           rows - first, x_stride, panel, depth,
                           y + static_cast<long>(first) * y_stride + j0,
                           y_stride, valid, accumulate);
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

// ---- kInt8's quads: the integer dot products of Q8_0 weights ----
//
// A panel's block b (PackedWeights::kInt8Block = 32 steps of k) is 8 quads of
// 4 steps; quad q holds, for each of the panel's 64 columns, the 4 weights of
// steps 4q .. 4q + 3 as bytes w + 128 (offset binary, so that VNNI's
// unsigned × signed product takes them as they are). A lane of 4 bytes is one
// column: a 64-byte vector is 16 columns × 4 steps.
//
// The integer dot product of a column and a row's block is exact however it is
// formed (each family forms it its own way); kInt8's products
// (family_matmul.cc) and the 8-bit block panels' with int8 activations
// (family_block_panels.cc) both form it here.
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

}  // namespace
}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY

#endif  // TEXTGEN_MODEL_KERNELS_FAMILY_PANELS_H_
