// The 32-value types (ggml's quantize_row_q4_0_ref .. q8_0_ref), IQ4_NL and
// IQ4_XS (quantize_iq4_nl / quantize_iq4_xs without an importance matrix),
// the fp16 / bf16 conversions, and the dispatch. Every expression follows
// ggml-quants.c operand for operand: reordering one would change bits.
#include "tools/quantize/ggml_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tools/quantize/ggml_quantize_k.h"

namespace textgen::quantize {
namespace {

using kernels::BlockType;
using kernels::kIq4Values;

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS.

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The blocks as ggml-common.h lays them out (fp16 fields as their bits).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 &&
              sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 &&
              sizeof(BlockQ8_0) == 34 && sizeof(BlockIq4Nl) == 18 &&
              sizeof(BlockIq4Xs) == 136);

// Each block is built in a local and copied out: `y` need not be aligned.
template <typename Block>
void Store(const Block& b, uint8_t* y, int64_t i) {
  std::memcpy(y + i * sizeof(Block), &b, sizeof(Block));
}

// A float converted to an 8-bit integer as ggml's C code is compiled for
// x86-64, `(int8_t)v` and `(uint8_t)v`: cvttss2si to 32 bits (0x80000000 for
// NaN and values out of range, as a scale of 1 / a subnormal d makes them),
// then the low byte. C and C++ leave such conversions undefined; these give
// llama-quantize's bytes without relying on it.
int32_t X86TruncToInt32(float v) {
  return v >= -2147483648.0f && v < 2147483648.0f ? static_cast<int32_t>(v)
                                                  : INT32_MIN;
}
int8_t X86ToInt8(float v) {
  return static_cast<int8_t>(static_cast<uint8_t>(X86TruncToInt32(v) & 0xff));
}
uint8_t X86ToUint8(float v) {
  return static_cast<uint8_t>(X86TruncToInt32(v) & 0xff);
}

// The least and greatest of x[0 .. n), as ggml's Q4_1/Q5_1 quantizers scan
// them (starting from ±FLT_MAX).
void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; j++) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

void QuantizeQ4_0(const float* x, uint8_t* y, int64_t nb) {
  constexpr int qk = 32;
  for (int64_t i = 0; i < nb; i++) {
    BlockQ4_0 b{};
    float amax = 0.0f;  // Absolute max.
    float max = 0.0f;
    for (int j = 0; j < qk; j++) {
      const float v = x[i * qk + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    b.d = FloatToHalf(d);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[i * qk + 0 + j] * id;
      const float x1 = x[i * qk + qk / 2 + j] * id;
      const uint8_t xi0 = std::min<int>(15, X86ToInt8(x0 + 8.5f));
      const uint8_t xi1 = std::min<int>(15, X86ToInt8(x1 + 8.5f));
      b.qs[j] = xi0;
      b.qs[j] |= xi1 << 4;
    }
    Store(b, y, i);
  }
}

void QuantizeQ4_1(const float* x, uint8_t* y, int64_t nb) {
  constexpr int qk = 32;
  for (int64_t i = 0; i < nb; i++) {
    BlockQ4_1 b{};
    float min, max;
    MinMax(x + i * qk, qk, &min, &max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    b.d = FloatToHalf(d);
    b.m = FloatToHalf(min);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = (x[i * qk + 0 + j] - min) * id;
      const float x1 = (x[i * qk + qk / 2 + j] - min) * id;
      const uint8_t xi0 = std::min<int>(15, X86ToInt8(x0 + 0.5f));
      const uint8_t xi1 = std::min<int>(15, X86ToInt8(x1 + 0.5f));
      b.qs[j] = xi0;
      b.qs[j] |= xi1 << 4;
    }
    Store(b, y, i);
  }
}

void QuantizeQ5_0(const float* x, uint8_t* y, int64_t nb) {
  constexpr int qk = 32;
  for (int64_t i = 0; i < nb; i++) {
    BlockQ5_0 b{};
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < qk; j++) {
      const float v = x[i * qk + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    b.d = FloatToHalf(d);
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[i * qk + 0 + j] * id;
      const float x1 = x[i * qk + qk / 2 + j] * id;
      const uint8_t xi0 = std::min<int>(31, X86ToInt8(x0 + 16.5f));
      const uint8_t xi1 = std::min<int>(31, X86ToInt8(x1 + 16.5f));
      b.qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
      // The fifth bits, at their value's position in qh.
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(b.qh, &qh, sizeof(qh));
    Store(b, y, i);
  }
}

void QuantizeQ5_1(const float* x, uint8_t* y, int64_t nb) {
  constexpr int qk = 32;
  for (int64_t i = 0; i < nb; i++) {
    BlockQ5_1 b{};
    float min, max;
    MinMax(x + i * qk, qk, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    b.d = FloatToHalf(d);
    b.m = FloatToHalf(min);
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = (x[i * qk + 0 + j] - min) * id;
      const float x1 = (x[i * qk + qk / 2 + j] - min) * id;
      const uint8_t xi0 = X86ToUint8(x0 + 0.5f);
      const uint8_t xi1 = X86ToUint8(x1 + 0.5f);
      b.qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(b.qh, &qh, sizeof(qh));
    Store(b, y, i);
  }
}

void QuantizeQ8_0(const float* x, uint8_t* y, int64_t nb) {
  constexpr int qk = 32;
  for (int64_t i = 0; i < nb; i++) {
    BlockQ8_0 b{};
    float amax = 0.0f;
    for (int j = 0; j < qk; j++) {
      const float v = x[i * qk + j];
      amax = std::max(amax, std::fabs(v));
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    b.d = FloatToHalf(d);
    for (int j = 0; j < qk; ++j) {
      const float x0 = x[i * qk + j] * id;
      b.qs[j] = X86ToInt8(std::round(x0));
    }
    Store(b, y, i);
  }
}

// ggml's best_index_int8: the index of the value of `val` (n ascending)
// nearest to x, the lower one on a tie.
int BestIndexInt8(int n, const int8_t* val, float x) {
  if (x <= val[0]) return 0;
  if (x >= val[n - 1]) return n - 1;
  int ml = 0, mu = n - 1;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// ggml's quantize_row_iq4_nl_impl without importance weights, for one
// super-block of `super_block_size` values in sub-blocks of 32: IQ4_NL is a
// super-block of one (its scale is the fp16 d), IQ4_XS of eight (6-bit
// scales under d). ntry is 7, as quantize_iq4_nl / quantize_iq4_xs pass it.
void QuantizeIq4Impl(int super_block_size, const float* x, uint16_t* dh,
                     uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l,
                     float* scales) {
  constexpr int block_size = 32;
  constexpr int ntry = 7;
  const int8_t* values = kIq4Values;
  float weight[block_size];
  uint8_t L[256];

  std::memset(q4, 0, super_block_size / 2);
  dh[0] = FloatToHalf(0.f);

  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < super_block_size / block_size; ++ib) {
    const float* xb = x + ib * block_size;
    uint8_t* Lb = L + ib * block_size;
    for (int j = 0; j < block_size; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < block_size; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = ntry > 0 ? -max / values[0] : max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < block_size; ++j) {
      const float al = id * xb[j];
      const int l = BestIndexInt8(16, values, al);
      Lb[j] = l;
      const float q = values[l];
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < block_size; ++j) {
        const float al = id * xb[j];
        const int l = BestIndexInt8(16, values, al);
        const float q = values[l];
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    const float abs_d = std::fabs(d);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = d;
    }
  }

  if (super_block_size / block_size > 1) {
    const int nb = super_block_size / block_size;
    std::memset(scales_h, 0, ((nb + 7) / 8) * sizeof(uint16_t));
    const float d = -max_scale / 32;
    dh[0] = FloatToHalf(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < super_block_size / block_size; ++ib) {
      int l = NearestInt(id * scales[ib]);
      l = std::max(-32, std::min(31, l));
      const float dl = d * l;
      const float idl = dl ? 1 / dl : 0.f;
      uint8_t* Lb = L + ib * block_size;
      const float* xb = x + ib * block_size;
      for (int j = 0; j < block_size; ++j) {
        Lb[j] = BestIndexInt8(16, values, idl * xb[j]);
      }
      l += 32;
      const uint8_t l_l = l & 0xf;
      const uint8_t l_h = l >> 4;
      if (ib % 2 == 0) {
        scales_l[ib / 2] = l_l;
      } else {
        scales_l[ib / 2] |= (l_l << 4);
      }
      scales_h[ib / 8] |= (l_h << 2 * (ib % 8));
    }
  } else {
    dh[0] = FloatToHalf(scales[0]);
    const float id = scales[0] ? 1 / scales[0] : 0;
    for (int j = 0; j < super_block_size; ++j) {
      L[j] = BestIndexInt8(16, values, id * x[j]);
    }
  }

  for (int i = 0; i < super_block_size / 32; ++i) {
    for (int j = 0; j < 16; ++j) {
      q4[16 * i + j] = L[32 * i + j] | (L[32 * i + 16 + j] << 4);
    }
  }
}

void QuantizeIq4Nl(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    BlockIq4Nl b{};
    uint16_t unused_h;
    float scale;
    QuantizeIq4Impl(32, x + 32 * i, &b.d, b.qs, &unused_h, nullptr, &scale);
    Store(b, y, i);
  }
}

void QuantizeIq4Xs(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    BlockIq4Xs b{};
    float scales[8];
    QuantizeIq4Impl(256, x + 256 * i, &b.d, b.qs, &b.scales_h, b.scales_l,
                    scales);
    Store(b, y, i);
  }
}

}  // namespace

uint16_t FloatToBf16(float f) {
  const uint32_t u = Bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) {  // NaN: keep it one, quiet.
    return static_cast<uint16_t>((u >> 16) | 64);
  }
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

size_t RowBytes(BlockType type, int64_t row_values) {
  const kernels::BlockLayout& layout = kernels::LayoutOf(type);
  return static_cast<size_t>(row_values / layout.values) * layout.bytes;
}

void QuantizeRows(BlockType type, const float* src, int64_t rows,
                  int64_t row_values, uint8_t* dst) {
  // Blocks never straddle rows (row_values is a multiple of the block), so
  // the rows are one run of blocks, as ggml_quantize_chunk treats them.
  const int64_t blocks = rows * row_values / kernels::LayoutOf(type).values;
  switch (type) {
    case BlockType::kQ4_0:
      return QuantizeQ4_0(src, dst, blocks);
    case BlockType::kQ4_1:
      return QuantizeQ4_1(src, dst, blocks);
    case BlockType::kQ5_0:
      return QuantizeQ5_0(src, dst, blocks);
    case BlockType::kQ5_1:
      return QuantizeQ5_1(src, dst, blocks);
    case BlockType::kQ8_0:
      return QuantizeQ8_0(src, dst, blocks);
    case BlockType::kQ2_K:
      return QuantizeQ2K(src, dst, blocks);
    case BlockType::kQ3_K:
      return QuantizeQ3K(src, dst, blocks);
    case BlockType::kQ4_K:
      return QuantizeQ4K(src, dst, blocks);
    case BlockType::kQ5_K:
      return QuantizeQ5K(src, dst, blocks);
    case BlockType::kQ6_K:
      return QuantizeQ6K(src, dst, blocks);
    case BlockType::kIQ4_NL:
      return QuantizeIq4Nl(src, dst, blocks);
    case BlockType::kIQ4_XS:
      return QuantizeIq4Xs(src, dst, blocks);
  }
}

}  // namespace textgen::quantize
