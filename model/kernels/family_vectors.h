// The vector helpers every file of a CPU family's kernels shares
// (model/kernels/family.cc lists the files): one vector of 16 floats (Vec),
// its loads, stores and multiply-add, bf16 widened to floats, the lane fold of
// Dot and Sum. Internal to the family files (family*.cc), which are compiled
// once per family, each time with that family's -march and with
// TEXTGEN_KERNEL_FAMILY naming the namespace they fill; the preprocessor's
// view of the target (__AVX512F__, __FMA__, __AVX512VNNI__, __AVX2__) picks
// the instructions.
//
// Code compiled for a wider target must never run on a CPU without it: an
// inline function of a header (a std:: template, say) that the compiler emits
// out of line in one family's object could be chosen by the linker for
// callers elsewhere. So the family files use no std:: templates and no header
// code beyond the intrinsics and libm's expf, and everything they define is
// either in an unnamed namespace or one of the family's own functions
// (model/kernels/family_functions.h). That holds for this header and
// family_panels.h too: their helpers are in an unnamed namespace, against the
// usual rule for headers, so that each family file has its own internal copy
// (with its family's flags) and nothing here is ever a symbol the linker could
// merge with another object's.
//
// The arithmetic contract (the order of every sum, where multiplies and adds
// fuse) is model/kernels/kernels.h's; the family files are built with
// -ffp-contract=off.
#ifndef TEXTGEN_MODEL_KERNELS_FAMILY_VECTORS_H_
#define TEXTGEN_MODEL_KERNELS_FAMILY_VECTORS_H_

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
// order (floats, or SumExp's doubles).
template <typename T>
inline T FoldLanes(T* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
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

// 32-bit integer lanes beside Vec's (float bits taken apart, as exponents).
typedef int32_t VecI32 __attribute__((vector_size(kVec * sizeof(int32_t))));

}  // namespace
}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY

#endif  // TEXTGEN_MODEL_KERNELS_FAMILY_VECTORS_H_
