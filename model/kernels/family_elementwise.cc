// One CPU family's reductions and element-wise functions: Dot and Sum,
// Softmax (with its entropy), RowStats, Entropy, the activations (GeluTanh,
// SiluMultiply) and RoundToBf16. Compiled once per family
// (model/kernels/family.cc).
#include "model/kernels/family_functions.h"
#include "model/kernels/family_vectors.h"

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {

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

namespace {

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

}  // namespace

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
  for (int lane = 0; lane < kVec; ++lane)
    index[lane] = static_cast<float>(lane);
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

namespace {

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

}  // namespace

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

namespace {

// 8 doubles: half of SumExp's 16 lanes (one AVX-512 vector, two of AVX2). A
// vector of 16 would be two registers, whose compares and selects GCC lowers
// lane by lane.
constexpr int kVecD = 8;
typedef double VecD __attribute__((vector_size(kVecD * sizeof(double))));
typedef int64_t VecI64 __attribute__((vector_size(kVecD * sizeof(int64_t))));
typedef float VecF8 __attribute__((vector_size(kVecD * sizeof(float))));

// exp of 8 doubles in [-708, 0] (elsewhere some value the caller masks): x =
// k ln2 + r, |r| <= ln2 / 2, and a degree-13 Taylor polynomial (truncation
// under 5e-18 relative), unfused as every kernel here (-ffp-contract=off), so
// each family computes the same bits; within 2 ulp of exp.
inline VecD ExpD8(VecD x) {
  // k = round(x / ln2), by the 1.5 · 2^52 trick (|x / ln2| < 2^51).
  constexpr double kRound = 6755399441055744.0;
  const VecD k = (x * 1.4426950408889634 + kRound) - kRound;
  // fdlibm's ln2 split: k · ln2_hi is exact for |k| < 2^20.
  const VecD r =
      (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  VecD p = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k from its exponent bits (k >= -1022 here: a normal double).
  const VecI64 ki = __builtin_convertvector(k, VecI64);
  const VecI64 bits = (ki + 1023) << 52;
  VecD scale;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// The exponentials SumExp adds for 8 differences x - shift (each rounded to
// float first, as a scalar loop computes them): under -708 (and -inf) 0, by
// clearing the bits, NaN kept. ExpD8 only ever sees [-708, 0], so its
// conversion to integers is always in range.
inline VecD ExpTerms(VecF8 d) {
  const VecD x = __builtin_convertvector(d, VecD);
  const VecI64 keep = ~(x < -708.0);  // All ones but where x < -708.
  const VecD in_range = x >= -708.0 ? x : VecD{} - 708.0;  // NaN: -708.
  // + (x - x): 0 for a number, NaN for NaN (and -inf, cleared below).
  const VecD e = ExpD8(in_range) + (x - x);
  VecI64 bits;
  __builtin_memcpy(&bits, &e, sizeof(bits));
  bits &= keep;
  VecD out;
  __builtin_memcpy(&out, &bits, sizeof(out));
  return out;
}

}  // namespace

double SumExp(const float* x, int n, float shift) {
  // Lanes 0-7 and 8-15 of 16: element i goes to lane i mod 16.
  VecD low = {}, high = {};
  auto add = [&](Vec d) {
    VecF8 a, b;
    __builtin_memcpy(&a, &d, sizeof(a));
    __builtin_memcpy(&b, reinterpret_cast<const char*>(&d) + sizeof(a),
                     sizeof(b));
    low += ExpTerms(a);
    high += ExpTerms(b);
  };
  int i = 0;
  for (; i + kVec <= n; i += kVec) add(Load(x + i) - shift);
  if (i < n) {
    // The tail in the lanes of its index, the rest exp(-inf) = 0.
    Vec tail = Vec{} - __builtin_inff();
    for (int j = i; j < n; ++j) tail[j - i] = x[j] - shift;
    add(tail);
  }
  double acc[kVec];
  __builtin_memcpy(acc, &low, sizeof(low));
  __builtin_memcpy(acc + kVecD, &high, sizeof(high));
  return FoldLanes(acc);
}

int ArgMax(const float* x, int n) {
  // Each lane's largest and the first index that holds it (a later equal
  // one does not replace it), then the lanes': the largest, the lowest index
  // among equals. Lanes start below every number, so a NaN never wins.
  Vec best = Vec{} - __builtin_inff();
  VecI32 at = {}, index;
  for (int l = 0; l < kVec; ++l) index[l] = l;
  int i = 0;
  for (; i + kVec <= n; i += kVec, index += kVec) {
    const Vec v = Load(x + i);
    const auto greater = v > best;
    best = greater ? v : best;
    at = greater ? index : at;
  }
  float top = best[0];
  int top_at = at[0];  // 0 while lane 0 saw nothing above -inf.
  for (int l = 1; l < kVec; ++l) {
    if (best[l] > top || (best[l] == top && at[l] < top_at)) {
      top = best[l];
      top_at = at[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > top) {
      top = x[i];
      top_at = i;
    }
  }
  return top_at;
}

namespace {

// GPT-2's "gelu_new", 0.5 v (1 + tanh(u)) with u = sqrt(2/pi) (v + 0.044715
// v^3), written as v / (1 + exp(-2u)) (the same function: 0.5 (1 + tanh(u)) =
// sigmoid(2u)), which has no cancellation for negative v and needs only exp.
inline Vec Gelu16(Vec v) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const Vec u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
  return v / (1.0f + Exp16(-2.0f * u));
}

}  // namespace

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

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY
