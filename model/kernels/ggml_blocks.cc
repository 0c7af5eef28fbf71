#include "model/kernels/ggml_blocks.h"

#include <cmath>
#include <cstring>

namespace textgen::kernels {
namespace {

using B = BlockType;
using Bias = BlockBias;

// type, name, values, bytes, sub_block, code_bits, bias, offset, iq4_table.
constexpr BlockLayout kLayouts[] = {
    {B::kQ4_0, "Q4_0", 32, 18, 32, 4, Bias::kNone, 8, false},
    {B::kQ4_1, "Q4_1", 32, 20, 32, 4, Bias::kPlusM, 0, false},
    {B::kQ5_0, "Q5_0", 32, 22, 32, 5, Bias::kNone, 16, false},
    {B::kQ5_1, "Q5_1", 32, 24, 32, 5, Bias::kPlusM, 0, false},
    {B::kQ8_0, "Q8_0", 32, 34, 32, 8, Bias::kNone, 128, false},
    {B::kQ2_K, "Q2_K", 256, 84, 16, 2, Bias::kMinusMin, 0, false},
    {B::kQ3_K, "Q3_K", 256, 110, 16, 3, Bias::kNone, 4, false},
    {B::kQ4_K, "Q4_K", 256, 144, 32, 4, Bias::kMinusMin, 0, false},
    {B::kQ5_K, "Q5_K", 256, 176, 32, 5, Bias::kMinusMin, 0, false},
    {B::kQ6_K, "Q6_K", 256, 210, 16, 6, Bias::kNone, 32, false},
    {B::kIQ4_NL, "IQ4_NL", 32, 18, 32, 4, Bias::kNone, 0, true},
    {B::kIQ4_XS, "IQ4_XS", 256, 136, 32, 4, Bias::kNone, 0, true},
};

uint16_t Load16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
float Half(const uint8_t* p) { return HalfToFloat(Load16(p)); }

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j of a
// Q4_K/Q5_K block's 12 scale bytes.
void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// Values j and j + 16 of a 32-value block are the low and high nibbles of
// qs[j] (Q4_0, Q4_1, IQ4_NL, and the low bits of Q5_0, Q5_1).
void Nibbles32(const uint8_t* qs, uint8_t* code) {
  for (int j = 0; j < 16; ++j) {
    code[j] = qs[j] & 0xF;
    code[j + 16] = qs[j] >> 4;
  }
}

// Q5_0/Q5_1's fifth bits: bit i of the little-endian 32-bit qh is value i's.
void FifthBits32(const uint8_t* qh, uint8_t* code) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof(h));
  for (int i = 0; i < 32; ++i) code[i] |= ((h >> i) & 1) << 4;
}

void UnpackQ2K(const uint8_t* b, UnpackedBlock* out) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  out->d = Half(b + 80);
  out->m = Half(b + 82);
  for (int s = 0; s < 16; ++s) {
    out->scale[s] = static_cast<int8_t>(scales[s] & 0xF);
    out->min[s] = scales[s] >> 4;
  }
  // Value i: half h of 128, then 4 shifts j, each two runs of 16 bytes.
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, r = i % 128, j = r / 32, part = (r % 32) / 16;
    out->code[i] = (qs[h * 32 + part * 16 + r % 16] >> (2 * j)) & 3;
  }
}

void UnpackQ3K(const uint8_t* b, UnpackedBlock* out) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* packed = b + 96;
  out->d = Half(b + 108);
  // The 16 6-bit scales: low 4 bits in bytes 0..7 (two per byte), high 2
  // bits in bytes 8..11 (ggml's kmask1/kmask2 shuffle, written out).
  for (int s = 0; s < 16; ++s) {
    const int low = (s < 8) ? (packed[s] & 0xF) : (packed[s - 8] >> 4);
    const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
    out->scale[s] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, r = i % 128, j = r / 32, part = (r % 32) / 16;
    const int l = part * 16 + r % 16;
    const int low = (qs[h * 32 + l] >> (2 * j)) & 3;
    const bool high = hmask[l] & (1 << (h * 4 + j));
    out->code[i] = static_cast<uint8_t>(low | (high ? 4 : 0));
  }
}

void UnpackQ4KScales(const uint8_t* b, UnpackedBlock* out) {
  out->d = Half(b);
  out->m = Half(b + 2);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    ScaleMinK4(s, b + 4, &sc, &m);
    out->scale[s] = static_cast<int8_t>(sc);
    out->min[s] = m;
  }
}

// Q4_K/Q5_K's low 4 bits: 64 values per 32 bytes, low nibbles then high.
void NibblesK(const uint8_t* qs, uint8_t* code) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      code[c * 64 + l] = qs[c * 32 + l] & 0xF;
      code[c * 64 + 32 + l] = qs[c * 32 + l] >> 4;
    }
  }
}

void UnpackQ6K(const uint8_t* b, UnpackedBlock* out) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  out->d = Half(b + 208);
  for (int s = 0; s < 16; ++s) out->scale[s] = sc[s];
  for (int i = 0; i < 256; ++i) {
    const int n = i / 128, quarter = (i % 128) / 32, l = i % 32;
    const uint8_t low = ql[n * 64 + l + (quarter & 1) * 32];
    const int low4 = (quarter < 2) ? (low & 0xF) : (low >> 4);
    const int high2 = (qh[n * 32 + l] >> (2 * quarter)) & 3;
    out->code[i] = static_cast<uint8_t>(low4 | (high2 << 4));
  }
}

void UnpackIq4Xs(const uint8_t* b, UnpackedBlock* out) {
  out->d = Half(b);
  const uint16_t scales_h = Load16(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                   (((scales_h >> (2 * ib)) & 3) << 4);
    out->scale[ib] = static_cast<int8_t>(ls - 32);
    Nibbles32(qs + ib * 16, out->code + ib * 32);
  }
}

}  // namespace

namespace {

uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FloatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

uint16_t FloatToHalf(float f) {
  // Scaling by 2^112 then 2^-110 rounds the value to fp16's precision in
  // float arithmetic (and sends overflow to infinity); adding the bias
  // re-centres the exponent so the fp16 bits can be read off.
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = BitsOf(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = FloatOf((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = BitsOf(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) |
                               (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {  // Infinity or NaN (payload kept).
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // Subnormal: normalise.
    int e = 113;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

const BlockLayout* FindBlockLayout(uint32_t ggml_type) {
  for (const BlockLayout& layout : kLayouts) {
    if (static_cast<uint32_t>(layout.type) == ggml_type) return &layout;
  }
  return nullptr;
}

const BlockLayout& LayoutOf(BlockType type) {
  return *FindBlockLayout(static_cast<uint32_t>(type));
}

void UnpackBlock(BlockType type, const uint8_t* b, UnpackedBlock* out) {
  const BlockLayout& layout = LayoutOf(type);
  for (int s = 0; s < layout.values / layout.sub_block; ++s) {
    out->scale[s] = 1;
    out->min[s] = 1;
  }
  out->m = 0;
  switch (type) {
    case B::kQ4_0:
    case B::kIQ4_NL:
      out->d = Half(b);
      Nibbles32(b + 2, out->code);
      return;
    case B::kQ4_1:
      out->d = Half(b);
      out->m = Half(b + 2);
      Nibbles32(b + 4, out->code);
      return;
    case B::kQ5_0:
      out->d = Half(b);
      Nibbles32(b + 6, out->code);
      FifthBits32(b + 2, out->code);
      return;
    case B::kQ5_1:
      out->d = Half(b);
      out->m = Half(b + 2);
      Nibbles32(b + 8, out->code);
      FifthBits32(b + 4, out->code);
      return;
    case B::kQ8_0:
      out->d = Half(b);
      for (int i = 0; i < 32; ++i)
        out->code[i] = static_cast<uint8_t>(b[2 + i] ^ 0x80);
      return;
    case B::kQ2_K:
      UnpackQ2K(b, out);
      return;
    case B::kQ3_K:
      UnpackQ3K(b, out);
      return;
    case B::kQ4_K:
      UnpackQ4KScales(b, out);
      NibblesK(b + 16, out->code);
      return;
    case B::kQ5_K: {
      UnpackQ4KScales(b, out);
      const uint8_t* qh = b + 16;
      NibblesK(b + 48, out->code);
      for (int i = 0; i < 256; ++i) {
        const int c = i / 64, upper = (i % 64) / 32;
        if (qh[i % 32] & (1 << (2 * c + upper))) out->code[i] |= 16;
      }
      return;
    }
    case B::kQ6_K:
      UnpackQ6K(b, out);
      return;
    case B::kIQ4_XS:
      UnpackIq4Xs(b, out);
      return;
  }
}

void Dequantize(BlockType type, const uint8_t* blocks, int64_t n, float* out) {
  const BlockLayout& layout = LayoutOf(type);
  UnpackedBlock u;
  for (int64_t first = 0; first < n; first += layout.values) {
    UnpackBlock(type, blocks, &u);
    blocks += layout.bytes;
    for (int s = 0; s < layout.values / layout.sub_block; ++s) {
      // ggml's order: the sub-block's scale first (d · sc, exact: an fp16
      // times a small integer), then each value's product, then the min.
      const float a = u.d * static_cast<float>(u.scale[s]);
      const float b = u.m * static_cast<float>(u.min[s]);
      for (int i = s * layout.sub_block; i < (s + 1) * layout.sub_block; ++i) {
        float v = a * static_cast<float>(CodeValue(layout, u.code[i]));
        if (layout.bias == BlockBias::kPlusM) v = v + b;
        if (layout.bias == BlockBias::kMinusMin) v = v - b;
        out[first + i] = v;
      }
    }
  }
}

bool BlockScalesFinite(BlockType type, const uint8_t* blocks, int64_t n) {
  const BlockLayout& layout = LayoutOf(type);
  UnpackedBlock u;
  for (int64_t first = 0; first < n; first += layout.values) {
    UnpackBlock(type, blocks, &u);
    blocks += layout.bytes;
    if (!std::isfinite(u.d) || !std::isfinite(u.m)) return false;
  }
  return true;
}

}  // namespace textgen::kernels
