/* The input rows of the ggml block goldens (testdata/ggml_blocks.golden), and
 * the hash their records use. Shared, as C, by the program that makes the
 * goldens from llama.cpp's own code (tools/make_ggml_block_goldens.c) and by
 * the C++ tests that check textgen against them
 * (tests/model/kernels/ggml_blocks_test.cc, tests/tools/ggml_quantize_test.cc),
 * so the file holds no inputs: both sides compute the same floats.
 *
 * Every value is a pure function of (row, index), from integer hashing and
 * IEEE float operations only (no libm), so it is the same on every machine
 * and compiler. Compile the users with -ffp-contract=off so no multiply and
 * add is fused (none here has a rounding that fusing could change, but the
 * rule is simpler than the proof).
 *
 * Rows cycle through eight kinds, chosen to reach every branch of ggml's
 * quantizers (row % 8):
 *   0  weights as in a model: 0.02 x a normal-like value;
 *   1  normal-like, unit scale;
 *   2  small values with rare large outliers (1 in 64, x 40);
 *   3  all positive (the min = 0 paths);
 *   4  all negative, away from zero (max < 0);
 *   5  16-value sub-blocks cycling zero / 1e-3 scale / unit scale (empty
 *      sub-blocks and uneven scales within one block);
 *   6  32-value sub-blocks cycling below ggml's GROUP_MAX_EPS (1e-17),
 *      float subnormals (1e-39), 1e-5 scale, and one constant (max == min);
 *   7  quarter-integers in [-2, 2] and signed zeros (exact rounding ties).
 */
#ifndef TEXTGEN_TESTS_MODEL_KERNELS_GGML_GOLDEN_ROWS_H_
#define TEXTGEN_TESTS_MODEL_KERNELS_GGML_GOLDEN_ROWS_H_

#include <stddef.h>
#include <stdint.h>

/* splitmix64's output function: a well-mixed 64-bit hash of x. */
static inline uint64_t GoldenMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Uniform in [0, 1), a multiple of 2^-24 (exact in float). */
static inline float GoldenUniform(uint64_t h) {
  return (float)(h >> 40) * 0x1p-24f;
}

/* Mean 0, standard deviation about 1: a sum of four uniforms, recentred. */
static inline float GoldenNormal(uint64_t h) {
  const float u0 = GoldenUniform(GoldenMix(h ^ 1));
  const float u1 = GoldenUniform(GoldenMix(h ^ 2));
  const float u2 = GoldenUniform(GoldenMix(h ^ 3));
  const float u3 = GoldenUniform(GoldenMix(h ^ 4));
  return ((u0 + u1) + (u2 + u3) - 2.0f) * 1.7320508f;
}

/* Value `i` of row `row`. */
static inline float GoldenValue(uint32_t row, uint32_t i) {
  const uint64_t h = GoldenMix(GoldenMix(row) ^ ((uint64_t)i << 20));
  switch (row % 8) {
    case 0:
      return 0.02f * GoldenNormal(h);
    case 1:
      return GoldenNormal(h);
    case 2:
      return (h & 63) == 0 ? 40.0f * GoldenNormal(h) : 0.05f * GoldenNormal(h);
    case 3:
      return 0.1f * GoldenUniform(h);
    case 4:
      return -0.5f - GoldenUniform(h);
    case 5:
      switch ((i / 16) % 3) {
        case 0:
          return 0.0f;
        case 1:
          return 1e-3f * GoldenNormal(h);
        default:
          return GoldenNormal(h);
      }
    case 6:
      switch ((i / 32) % 4) {
        case 0:
          return 1e-17f * GoldenNormal(h);
        case 1:
          return 1e-39f * GoldenNormal(h);
        case 2:
          return 1e-5f * GoldenNormal(h);
        default:
          return 0.375f + (float)(row % 5);
      }
    default:
      if ((h & 15) == 0) return (h & 16) ? -0.0f : 0.0f;
      return (float)((int)(h % 17) - 8) * 0.25f;
  }
}

/* out[0 .. n) = values 0 .. n of `row`. */
static inline void GoldenRow(uint32_t row, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = GoldenValue(row, (uint32_t)i);
}

/* 64-bit FNV-1a of n bytes. */
static inline uint64_t GoldenFnv1a(const void* data, size_t n) {
  const unsigned char* p = (const unsigned char*)data;
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

#endif /* TEXTGEN_TESTS_MODEL_KERNELS_GGML_GOLDEN_ROWS_H_ */
