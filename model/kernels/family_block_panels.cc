// One CPU family's products of ggml's block types
// (model/kernels/block_panels.h has the panels' layout): MatMulBlockPanel
// dequantizes the codes on the fly for f32 rows, MatMulBlockPanelInt8 takes
// int8 activations. Compiled once per family (model/kernels/family.cc).
#include "model/kernels/family_functions.h"
#include "model/kernels/family_panels.h"
#include "model/kernels/family_vectors.h"

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {
namespace {

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
    if (kBits == 5) code |= ((high[0] >> HighShift(5, r)) & 1u) << 4;
    if (kBits == 6) {
      code |= ((high[HighLane(6, r)] >> HighShift(6, r)) & 3u) << 4;
    }
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
      // The octet's lanes, its high bits shifted down once (Code's bits:
      // step 8o + i's at HighShift(kBits, 8o + i) - HighShift(kBits, 8o)).
      const VecU32 l0 = kBits == 8 ? low[2 * o] : low[o];
      const VecU32 l1 = kBits == 8 ? low[2 * o + 1] : low[o];
      const VecU32 h = kBits == 5   ? high[0] >> (2 * o)
                       : kBits == 6 ? high[o / 2] >> (4 * (o % 2))
                                    : VecU32{};
#pragma GCC unroll 8
      for (unsigned i = 0; i < 8; ++i) {
        const unsigned r = o * 8 + i;
        VecU32 code;
        if (kBits == 8) {
          code = ((i < 4 ? l0 : l1) >> (8 * (i % 4))) & 0xffu;
        } else {
          code = (l0 >> (4 * i)) & 0xfu;
          const unsigned at = HighShift(kBits, i);  // Octet 0's place.
          if (kBits == 5) code |= ((h >> at) & 1u) << 4;
          if (kBits == 6) code |= ((h >> at) & 3u) << 4;
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

}  // namespace

void MatMulBlockPanel(const float* x, int rows, int x_stride,
                      const BlockPanelView& v, int depth, int valid,
                      float* widened, float* y, int y_stride, bool accumulate) {
  ForPanelKind(v, [&](auto panel) {
    MatMulBlockPanelOf(panel, x, rows, x_stride, v, depth, valid, widened, y,
                       y_stride, accumulate);
  });
}

namespace {

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

// v's bits moved from bit `from` of each byte to bit `to` (bits that leave a
// byte are masked off by the caller).
inline VecU32 ShiftBits(VecU32 v, int from, int to) {
  return from <= to ? v << (to - from) : v >> (from - to);
}

// Octet o's codes of 16 columns (`low`, `high` as BlockPanel::LoadGroup gives
// them), as the even steps' and the odd steps' bytes.
template <int kBits>
inline void OctetCodes(const VecU32* low, const VecU32* high, unsigned o,
                       VecU32* even, VecU32* odd) {
  *even = low[o] & 0x0f0f0f0fu;
  *odd = (low[o] >> 4) & 0x0f0f0f0fu;
  // The even (odd) steps' high bits sit at HighShift(kBits, 8o) (+ 1 bit
  // for 5-bit codes, + 2 for 6-bit ones) of each byte: moved to bit 4.
  const int at = HighShift(kBits, 8 * o), odd_at = HighShift(kBits, 8 * o + 1);
  if (kBits == 5) {
    *even |= ShiftBits(high[0], at, 4) & 0x10101010u;
    *odd |= ShiftBits(high[0], odd_at, 4) & 0x10101010u;
  }
  if (kBits == 6) {
    const VecU32 h = high[HighLane(6, 8 * o)];
    *even |= ShiftBits(h, at, 4) & 0x30303030u;
    *odd |= ShiftBits(h, odd_at, 4) & 0x30303030u;
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

}  // namespace

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

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY
