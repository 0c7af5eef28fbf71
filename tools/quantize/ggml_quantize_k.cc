// The K-quants: ggml's quantize_row_q2_K_ref .. q6_K_ref and the scale
// fitters they call (make_qx_quants, make_q3_quants, make_qkx2_quants).
// Each 256-value block is fitted per sub-block (16 or 32 values) to a scale
// (and a min), then the sub-blocks' scales are themselves quantized to 4, 6
// or 8 bits under the block's fp16 d (and dmin), and the values are
// re-quantized against the scales as stored. Every expression follows
// ggml-quants.c operand for operand: reordering one would change bits.
#include "tools/quantize/ggml_quantize_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/kernels/ggml_blocks.h"
#include "tools/quantize/ggml_quantize.h"

namespace textgen::quantize {
namespace {

using kernels::HalfToFloat;

constexpr int kQK = 256;                // ggml's QK_K.
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS.

struct BlockQ2K {
  uint8_t scales[kQK / 16];  // Low nibble the scale, high the min.
  uint8_t qs[kQK / 4];
  uint16_t d, dmin;
};
struct BlockQ3K {
  uint8_t hmask[kQK / 8];
  uint8_t qs[kQK / 4];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK / 2];
};
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK / 8];
  uint8_t qs[kQK / 2];
};
struct BlockQ6K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110 &&
              sizeof(BlockQ4K) == 144 && sizeof(BlockQ5K) == 176 &&
              sizeof(BlockQ6K) == 210);

template <typename Block>
void Store(const Block& b, uint8_t* y, int64_t i) {
  std::memcpy(y + i * sizeof(Block), &b, sizeof(Block));
}

// Symmetric codes L[i] in [0, 2 nmax) for x[i] ~ scale * (L[i] - nmax),
// the scale fitted by weighted least squares over 19 trial scales
// (rmse_type 1: weights x^2, or qw if given). Returns the scale.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L, int rmse_type,
                   const float* qw) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {  // All zero.
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) {
      const int l = NearestInt(iscale * x[i]);
      L[i] = nmax + std::max(-nmax, std::min(nmax - 1, l));
    }
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  auto weight = [&](int i) -> float {
    return qw               ? qw[i]
           : rmse_type == 1 ? x[i] * x[i]
           : rmse_type == 2 ? 1
           : rmse_type == 3 ? std::fabs(x[i])
                            : std::sqrt(std::fabs(x[i]));
  };
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = l + nmax;
    const float w = weight(i);
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = weight(i);
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = nmax + std::max(-nmax, std::min(nmax - 1, l));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's fitter: codes in [0, 2 nmax), then up to 5 passes moving single
// codes while the weighted (x^2) least-squares error falls.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {  // All zero.
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  if (do_rmse) {
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      L[i] = l;
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        float slx = sumlx - w * x[i] * L[i];
        if (slx > 0) {
          float sl2 = suml2 - w * L[i] * L[i];
          int new_l = NearestInt(x[i] * sl2 / slx);
          new_l = std::max(-nmax, std::min(nmax - 1, new_l));
          if (new_l != L[i]) {
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = new_l;
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] += nmax;
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
  }
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = l + nmax;
  }
  return 1 / iscale;
}

// Asymmetric codes L[i] in [0, nmax] for x[i] ~ scale * L[i] - the_min,
// searching nstep + 1 trial scales (rmin + rdelta * is + nmax) / (max - min)
// and fitting scale and min to each by weighted least squares; the error is
// weighted |diff| (use_mad) or diff^2. Returns the scale; *the_min gets the
// min (>= 0).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights,
                     uint8_t* L, float* the_min, uint8_t* Laux, float rmin,
                     float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = std::max(0, std::min(nmax, l));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    const float w = weights[i];
    best_error += w * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = l;
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        const float w = weights[i];
        cur_error += w * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml's get_scale_min_k4.
void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// Q2_K and Q3_K store four 2-bit codes of values l, l+32, l+64, l+96 per byte.
void Pack2Bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                      (L[j + l + 96] << 6);
    }
  }
}

// Q4_K and Q5_K: 8 sub-blocks' 6-bit scales and mins in 12 bytes.
void PackScalesMinsK4(const float* scales, const float* mins, float max_scale,
                      float max_min, uint8_t* out) {
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kQK / 32; ++j) {
    uint8_t ls = NearestInt(inv_scale * scales[j]);
    uint8_t lm = NearestInt(inv_min * mins[j]);
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      out[j] = ls;
      out[j + 4] = lm;
    } else {
      out[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
      out[j - 4] |= ((ls >> 4) << 6);
      out[j - 0] |= ((lm >> 4) << 6);
    }
  }
}

// Q4_K and Q5_K: the 8 sub-blocks' (scale, min) fitted by make_qkx2_quants
// with weights av_x + |x| (av_x the sub-block's RMS).
void FitK4(const float* x, int nmax, float rmin, float rdelta, int nstep,
           uint8_t* L, float* scales, float* mins, float* max_scale,
           float* max_min) {
  uint8_t Laux[32];
  float weights[32];
  *max_scale = 0;  // As the min is subtracted, scales are always positive.
  *max_min = 0;
  for (int j = 0; j < kQK / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j,
                               &mins[j], Laux, rmin, rdelta, nstep, false);
    const float scale = scales[j];
    if (scale > *max_scale) *max_scale = scale;
    const float min = mins[j];
    if (min > *max_min) *max_min = min;
  }
}

// Q4_K and Q5_K: the codes again, against the scales as stored.
void RequantizeK4(const float* x, uint16_t d_bits, uint16_t dmin_bits,
                  const uint8_t* packed_scales, int nmax, uint8_t* L) {
  uint8_t sc, m;
  for (int j = 0; j < kQK / 32; ++j) {
    GetScaleMinK4(j, packed_scales, &sc, &m);
    const float d = HalfToFloat(d_bits) * sc;
    if (!d) continue;
    const float dm = HalfToFloat(dmin_bits) * m;
    for (int ii = 0; ii < 32; ++ii) {
      int l = NearestInt((x[32 * j + ii] + dm) / d);
      l = std::max(0, std::min(nmax, l));
      L[32 * j + ii] = l;
    }
  }
}

}  // namespace

void QuantizeQ2K(const float* x, uint8_t* y, int64_t nb) {
  uint8_t L[kQK];
  uint8_t Laux[16];
  float weights[16];
  float mins[kQK / 16];
  float scales[kQK / 16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < nb; i++) {
    BlockQ2K b{};
    float max_scale = 0;  // As the min is subtracted, scales are positive.
    float max_min = 0;
    for (int j = 0; j < kQK / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j,
                                 &mins[j], Laux, -0.5f, 0.1f, 15, true);
      const float scale = scales[j];
      if (scale > max_scale) max_scale = scale;
      const float min = mins[j];
      if (min > max_min) max_min = min;
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < kQK / 16; ++j) {
        const int l = NearestInt(iscale * scales[j]);
        b.scales[j] = l;
      }
      b.d = FloatToHalf(max_scale / q4scale);
    } else {
      for (int j = 0; j < kQK / 16; ++j) b.scales[j] = 0;
      b.d = FloatToHalf(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < kQK / 16; ++j) {
        const int l = NearestInt(iscale * mins[j]);
        b.scales[j] |= (l << 4);
      }
      b.dmin = FloatToHalf(max_min / q4scale);
    } else {
      b.dmin = FloatToHalf(0.f);
    }
    for (int j = 0; j < kQK / 16; ++j) {
      const float d = HalfToFloat(b.d) * (b.scales[j] & 0xF);
      if (!d) continue;
      const float dm = HalfToFloat(b.dmin) * (b.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        int l = NearestInt((x[16 * j + ii] + dm) / d);
        l = std::max(0, std::min(3, l));
        L[16 * j + ii] = l;
      }
    }
    Pack2Bit(L, b.qs);
    Store(b, y, i);
    x += kQK;
  }
}

void QuantizeQ3K(const float* x, uint8_t* y, int64_t nb) {
  int8_t L[kQK];
  float scales[kQK / 16];
  for (int64_t i = 0; i < nb; i++) {
    BlockQ3K b{};
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < kQK / 16; ++j) {
      scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j, true);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(b.scales, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK / 16; ++j) {
        int8_t l = NearestInt(iscale * scales[j]);
        l = std::max(-32, std::min(31, static_cast<int>(l))) + 32;
        if (j < 8) {
          b.scales[j] = l & 0xF;
        } else {
          b.scales[j - 8] |= ((l & 0xF) << 4);
        }
        l >>= 4;
        b.scales[j % 4 + 8] |= (l << (2 * (j / 4)));
      }
      b.d = FloatToHalf(1 / iscale);
    } else {
      b.d = FloatToHalf(0.f);
    }
    int8_t sc;
    for (int j = 0; j < kQK / 16; ++j) {
      sc = j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4;
      sc = (sc | (((b.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const float d = HalfToFloat(b.d) * sc;
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = NearestInt(x[16 * j + ii] / d);
        l = std::max(-4, std::min(3, l));
        L[16 * j + ii] = l + 4;
      }
    }
    // The high bit of the first 32 codes goes to bit 0 of hmask[0..31], the
    // next 32's to bit 1, and so on.
    std::memset(b.hmask, 0, kQK / 8);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < kQK; ++j) {
      if (L[j] > 3) {
        b.hmask[m] |= hm;
        L[j] -= 4;
      }
      if (++m == kQK / 8) {
        m = 0;
        hm <<= 1;
      }
    }
    Pack2Bit(reinterpret_cast<const uint8_t*>(L), b.qs);
    Store(b, y, i);
    x += kQK;
  }
}

void QuantizeQ4K(const float* x, uint8_t* y, int64_t nb) {
  uint8_t L[kQK];
  float mins[kQK / 32];
  float scales[kQK / 32];
  for (int64_t i = 0; i < nb; i++) {
    BlockQ4K b{};
    float max_scale, max_min;
    FitK4(x, 15, -1.f, 0.1f, 20, L, scales, mins, &max_scale, &max_min);
    PackScalesMinsK4(scales, mins, max_scale, max_min, b.scales);
    b.d = FloatToHalf(max_scale / 63.f);
    b.dmin = FloatToHalf(max_min / 63.f);
    RequantizeK4(x, b.d, b.dmin, b.scales, 15, L);
    uint8_t* q = b.qs;
    for (int j = 0; j < kQK; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = L[j + l] | (L[j + l + 32] << 4);
      q += 32;
    }
    Store(b, y, i);
    x += kQK;
  }
}

void QuantizeQ5K(const float* x, uint8_t* y, int64_t nb) {
  uint8_t L[kQK];
  float mins[kQK / 32];
  float scales[kQK / 32];
  for (int64_t i = 0; i < nb; i++) {
    BlockQ5K b{};
    float max_scale, max_min;
    FitK4(x, 31, -0.5f, 0.1f, 15, L, scales, mins, &max_scale, &max_min);
    PackScalesMinsK4(scales, mins, max_scale, max_min, b.scales);
    b.d = FloatToHalf(max_scale / 63.f);
    b.dmin = FloatToHalf(max_min / 63.f);
    RequantizeK4(x, b.d, b.dmin, b.scales, 31, L);
    uint8_t* qh = b.qh;
    uint8_t* ql = b.qs;
    std::memset(qh, 0, kQK / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < kQK; n += 64) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = l1 | (l2 << 4);
      }
      m1 <<= 2;
      m2 <<= 2;
      ql += 32;
    }
    Store(b, y, i);
    x += kQK;
  }
}

void QuantizeQ6K(const float* x, uint8_t* y, int64_t nb) {
  int8_t L[kQK];
  float scales[kQK / 16];
  for (int64_t i = 0; i < nb; i++) {
    BlockQ6K b{};
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < kQK / 16; ++ib) {
      const float scale =
          MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib, 1, nullptr);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // All zero: d = 0, codes 0.
      b = BlockQ6K{};
      b.d = FloatToHalf(0.f);
      Store(b, y, i);
      x += kQK;
      continue;
    }
    const float iscale = -128.f / max_scale;
    b.d = FloatToHalf(1 / iscale);
    for (int ib = 0; ib < kQK / 16; ++ib) {
      b.scales[ib] = std::min(127, NearestInt(iscale * scales[ib]));
    }
    for (int j = 0; j < kQK / 16; ++j) {
      const float d = HalfToFloat(b.d) * b.scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = NearestInt(x[16 * j + ii] / d);
        l = std::max(-32, std::min(31, l));
        L[16 * j + ii] = l + 32;
      }
    }
    uint8_t* ql = b.ql;
    uint8_t* qh = b.qh;
    for (int j = 0; j < kQK; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = q1 | (q3 << 4);
        ql[l + 32] = q2 | (q4 << 4);
        qh[l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6);
      }
      ql += 64;
      qh += 32;
    }
    Store(b, y, i);
    x += kQK;
  }
}

}  // namespace textgen::quantize
