/* Writes tests/model/kernels/testdata/ggml_blocks.golden: ggml's block types
 * quantized and dequantized by llama.cpp's own code, for textgen's tests to
 * hold model/kernels/ggml_blocks.h (Dequantize) and tools/quantize/
 * (the quantizer) to, bit for bit.
 *
 * Run at development time only, against a llama.cpp build (never committed
 * here; any build whose ggml-base is compiled as llama.cpp's CMake does it:
 * no -march, so no fused multiply-add in ggml-quants.c):
 *
 *   cc -O2 -std=c11 -ffp-contract=off -I$LLAMA_SRC/ggml/include \
 *      -Itests/model/kernels tools/make_ggml_block_goldens.c \
 *      $LLAMA_BUILD/ggml/src/libggml-base.a -lm -lpthread \
 *      -o /tmp/make_ggml_block_goldens
 *   /tmp/make_ggml_block_goldens
 * tests/model/kernels/testdata/ggml_blocks.golden
 *
 * The file (little-endian):
 *   "GGMLGOLD", uint32 version (1), uint32 record count, then records:
 *   uint32 kind, ggml_type, block_values (ggml_blck_size), block_bytes
 *   (ggml_type_size), first_row, rows, row_values; then by kind:
 *   1 QUANTIZED   rows first_row .. +rows of ggml_golden_rows.h, each of
 *                 row_values, through ggml_quantize_chunk(type, ..., imatrix
 *                 NULL) (what llama-quantize does without an imatrix): the
 *                 blocks (rows x row_values / block_values x block_bytes),
 *                 then ggml's to_float of them (rows x row_values float bit
 *                 patterns, uint32).
 *   2 RANDOM      `rows` blocks of random bytes whose fp16 scales (d, and m or
 *                 dmin) are set from a list of edge cases (negative, -0, +0,
 *                 subnormal, largest, smallest normal; never inf or NaN):
 *                 the blocks, then ggml's to_float of them. row_values =
 *                 block_values; first_row unused (0).
 *   3 HASHED      rows first_row .. +rows as in 1, but only, per row, the
 *                 64-bit FNV-1a of its quantized bytes and of its dequantized
 *                 floats (two uint64): many more rows in little space.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml_golden_rows.h"

/* The types, with the byte offsets of their fp16 scales (-1: none). */
static const struct {
  enum ggml_type type;
  int d_offset;
  int m_offset;
} kTypes[] = {
    {GGML_TYPE_Q4_0, 0, -1},   {GGML_TYPE_Q4_1, 0, 2},
    {GGML_TYPE_Q5_0, 0, -1},   {GGML_TYPE_Q5_1, 0, 2},
    {GGML_TYPE_Q8_0, 0, -1},   {GGML_TYPE_Q2_K, 80, 82},
    {GGML_TYPE_Q3_K, 108, -1}, {GGML_TYPE_Q4_K, 0, 2},
    {GGML_TYPE_Q5_K, 0, 2},    {GGML_TYPE_Q6_K, 208, -1},
    {GGML_TYPE_IQ4_NL, 0, -1}, {GGML_TYPE_IQ4_XS, 0, -1},
};

/* fp16 edge cases for the random blocks; entry 0 is replaced by a random
 * finite value per block. */
static const uint16_t kSpecialHalves[] = {
    0,      /* random finite */
    0x8000, /* -0 */
    0x83FF, /* largest negative subnormal */
    0x0001, /* smallest positive subnormal */
    0xFBFF, /* -65504 */
    0x7BFF, /* 65504 */
    0x0400, /* smallest normal */
    0x0000, /* +0 */
};
enum { kNumSpecial = sizeof(kSpecialHalves) / sizeof(kSpecialHalves[0]) };

/* The QUANTIZED record: 2 rows of 256 (a normal-like row, an outlier row). */
enum { kQuantFirstRow = 1, kQuantRows = 2, kQuantRowValues = 256 };
/* The HASHED record: 64 rows of 1024 (each of the 8 kinds 8 times). */
enum { kHashFirstRow = 0, kHashRows = 64, kHashRowValues = 1024 };

static FILE* out;

static void Put(const void* p, size_t n) {
  if (fwrite(p, 1, n, out) != n) {
    perror("write");
    exit(1);
  }
}
static void Put32(uint32_t v) { Put(&v, 4); }
static void Put64(uint64_t v) { Put(&v, 8); }

static void Header(uint32_t kind, enum ggml_type type, uint32_t first_row,
                   uint32_t rows, uint32_t row_values) {
  Put32(kind);
  Put32((uint32_t)type);
  Put32((uint32_t)ggml_blck_size(type));
  Put32((uint32_t)ggml_type_size(type));
  Put32(first_row);
  Put32(rows);
  Put32(row_values);
}

static uint16_t RandomFiniteHalf(uint64_t h) {
  uint16_t v = (uint16_t)h;
  if (((v >> 10) & 0x1F) == 0x1F) v &= (uint16_t)~0x4000; /* not inf/NaN */
  return v;
}

static void Quantized(enum ggml_type type) {
  const size_t n = (size_t)kQuantRows * kQuantRowValues;
  float* x = malloc(n * sizeof(float));
  float* y = malloc(n * sizeof(float));
  const size_t bytes = kQuantRows * ggml_row_size(type, kQuantRowValues);
  uint8_t* q = malloc(bytes);
  for (int r = 0; r < kQuantRows; ++r) {
    GoldenRow(kQuantFirstRow + r, kQuantRowValues, x + r * kQuantRowValues);
  }
  if (ggml_quantize_chunk(type, x, q, 0, kQuantRows, kQuantRowValues, NULL) !=
      bytes) {
    fprintf(stderr, "%s: unexpected size\n", ggml_type_name(type));
    exit(1);
  }
  ggml_get_type_traits(type)->to_float(q, y, (int64_t)n);
  Header(1, type, kQuantFirstRow, kQuantRows, kQuantRowValues);
  Put(q, bytes);
  Put(y, n * sizeof(float));
  free(x);
  free(y);
  free(q);
}

static void Random(enum ggml_type type, int d_offset, int m_offset) {
  const int values = (int)ggml_blck_size(type);
  const int block_bytes = (int)ggml_type_size(type);
  const int blocks = values == 256 ? 4 : kNumSpecial;
  uint8_t* q = malloc((size_t)blocks * block_bytes);
  float* y = malloc((size_t)blocks * values * sizeof(float));
  for (int b = 0; b < blocks; ++b) {
    uint8_t* block = q + b * block_bytes;
    for (int i = 0; i < block_bytes; ++i) {
      block[i] = (uint8_t)GoldenMix(0xB10C000000ull ^ ((uint64_t)type << 24) ^
                                    ((uint64_t)b << 12) ^ (uint64_t)i);
    }
    const uint64_t h = GoldenMix(0x5CA1E00000ull ^ ((uint64_t)type << 8) ^ b);
    uint16_t d = kSpecialHalves[b % kNumSpecial];
    uint16_t m = kSpecialHalves[(b * 3 + 1) % kNumSpecial];
    if (b % kNumSpecial == 0) d = RandomFiniteHalf(h);
    if ((b * 3 + 1) % kNumSpecial == 0) m = RandomFiniteHalf(h >> 16);
    memcpy(block + d_offset, &d, 2);
    if (m_offset >= 0) memcpy(block + m_offset, &m, 2);
  }
  ggml_get_type_traits(type)->to_float(q, y, (int64_t)blocks * values);
  Header(2, type, 0, (uint32_t)blocks, (uint32_t)values);
  Put(q, (size_t)blocks * block_bytes);
  Put(y, (size_t)blocks * values * sizeof(float));
  free(q);
  free(y);
}

static void Hashed(enum ggml_type type) {
  const size_t row_bytes = ggml_row_size(type, kHashRowValues);
  float* x = malloc(kHashRowValues * sizeof(float));
  float* y = malloc(kHashRowValues * sizeof(float));
  uint8_t* q = malloc(row_bytes);
  Header(3, type, kHashFirstRow, kHashRows, kHashRowValues);
  for (int r = 0; r < kHashRows; ++r) {
    GoldenRow(kHashFirstRow + r, kHashRowValues, x);
    ggml_quantize_chunk(type, x, q, 0, 1, kHashRowValues, NULL);
    ggml_get_type_traits(type)->to_float(q, y, kHashRowValues);
    Put64(GoldenFnv1a(q, row_bytes));
    Put64(GoldenFnv1a(y, kHashRowValues * sizeof(float)));
  }
  free(x);
  free(y);
  free(q);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTPUT\n", argv[0]);
    return 2;
  }
  out = fopen(argv[1], "wb");
  if (out == NULL) {
    perror(argv[1]);
    return 1;
  }
  const int n_types = (int)(sizeof(kTypes) / sizeof(kTypes[0]));
  Put("GGMLGOLD", 8);
  Put32(1);
  Put32((uint32_t)(3 * n_types));
  for (int t = 0; t < n_types; ++t) {
    Quantized(kTypes[t].type);
    Random(kTypes[t].type, kTypes[t].d_offset, kTypes[t].m_offset);
    Hashed(kTypes[t].type);
  }
  if (fclose(out) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
