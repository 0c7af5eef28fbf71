// One CPU family's attention kernels: a block of queries against the cached
// keys (AttentionScores) and the probabilities' weighted sum of the cached
// values (WeightedSum), each for f32 and bf16 caches. Compiled once per
// family (model/kernels/family.cc).
#include "model/kernels/family_functions.h"
#include "model/kernels/family_vectors.h"

namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY {
namespace {

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
                        v_stride, depth,
                        out + static_cast<long>(r) * out_stride, out_stride,
                        accumulate, request_next);
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

}  // namespace

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

}  // namespace textgen::kernels::TEXTGEN_KERNEL_FAMILY
