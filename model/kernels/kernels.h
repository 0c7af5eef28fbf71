// The decoder's arithmetic kernels, written so that results are
// *batch-invariant*: every output value is produced by the same sequence of
// floating-point operations whatever else is in the batch, wherever its row
// sits in memory, and however many tokens share the step.
//
// Why: a general GEMM (Eigen's, BLAS's) picks its blocking, its vector/scalar
// split and even its kernel (GEMM vs GEMV) from the matrix sizes and pointer
// alignment, so the same token's logits drift by a few ulps between a full
// pass, a KV-cached decode step and a batched step. Drift of that kind is
// invisible in one step but can flip a greedy argmax between "alone" and
// "batched". Here, instead:
//   - MatMul (the projections and the LM head) sums each output over k in
//     increasing order, one multiply-add per step, vectorized across output
//     columns: lanes never interact; splitting it by panels (threads) or by
//     k-chunks (accumulators stored and reloaded exactly) changes nothing;
//   - AttentionScores likewise sums over the head dimension in order,
//     vectorized across keys; WeightedSum over keys in order, vectorized
//     across the head dimension;
//   - Dot and Sum accumulate element i into lane i % kLanes
//     in index order and fold the lanes in one fixed tree;
//   - exp in SiluMultiply is the scalar libm call for every element; Softmax
//     and GeluTanh run every element, tail included, through one vector
//     routine;
//   - multiplies and adds are never fused implicitly (kernels.cc is built with
//     -ffp-contract=off), so vector lanes and scalar tails compute identical
//     values. MatMul and AttentionScores fuse explicitly (MulAdd, where the
//     target has FMA): they have no scalar tail, so every path that computes
//     one of their outputs fuses the same way.
// KV-cached decoding therefore equals full recomputation bit for bit, and a
// sequence's logits do not depend on its batch; tests/model/parity_test.cc
// holds the decoder to that.
//
// kInt8 weights (GGUF Q8_0's numerics) are multiplied by activations quantized
// the same way on the fly, each row on its own: every block of 32 steps of k
// gives an integer dot product, exact in any order, and the blocks' scaled
// sums are added in increasing block order, never fused (see MatMul).
//
// Families. These functions run one of several builds of the same kernels
// (the family files that model/kernels/family.cc lists, compiled for generic
// x86-64-v2, AVX2 + FMA, and AVX-512 + VNNI), chosen once at start-up by CPUID
// (model/kernels/dispatch.h).
// The contract above holds within a family; families may differ in the last
// bits of f32 and bf16 results (only some fuse multiply-adds), so a model's
// logits differ between families by a few ulps, even with kInt8 weights,
// whose products alone are the same in every family.
#ifndef TEXTGEN_MODEL_KERNELS_KERNELS_H_
#define TEXTGEN_MODEL_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/huge_pages.h"
#include "model/kernels/ggml_blocks.h"

namespace textgen::kernels {

// Lanes of every reduction. Fixed: changing it changes results (not
// correctness).
inline constexpr int kLanes = 16;

// How far ahead (in bytes) the one-row products request the weights they
// stream: decode reads every weight from memory once per step, and a single
// sequential stream per panel leaves the hardware prefetcher short of full
// bandwidth. In bytes, not steps: a bf16 step is half an f32 one and a Q8_0
// step a quarter, and a distance in steps left them too few lines in flight.
// Two distances: into L1 4 KB ahead, and into L2 16 KB ahead, which keeps
// more lines in flight than L1's fill buffers hold (a bf16 panel stream on
// the Xeon of bench/README.md: 10.1 GB/s with the first alone, 11.9 with
// both). bench/stream_read.cc reads with the same two, so that the bandwidth
// bound is measured as the weights are read. Hints: values never depend on
// them.
inline constexpr int kPrefetchNearBytes = 4096;
inline constexpr int kPrefetchFarBytes = 16384;

// Σ a[i] · b[i], i < n.
float Dot(const float* a, const float* b, int n);

// Σ a[i], i < n.
float Sum(const float* a, int n);

// How PackedWeights stores its values. kBF16 keeps the upper 16 bits of each
// float (rounded to nearest even when packed); the kernel widens them back
// exactly (a shift by 16) and accumulates in float, so a kBF16 product equals
// the kF32 product of the bf16-rounded weights bit for bit, at half the bytes
// streamed from memory.
// kInt8 is GGUF Q8_0: each column's weights in blocks of kInt8Block steps of
// k, one scale d = max|w| / 127 per block and w ≈ d · q, q = round(w / d) in
// [-127, 127]. The scale is kept as a float, not Q8_0's fp16: a product needs
// no conversion, the generic family needs no F16C, an fp16 scale from a Q8_0
// file converts to it exactly, and 32 + 4 bytes per 32 weights is still 0.28×
// f32.
// kW8A32 stores the same Q8_0 weights as kInt8 but multiplies them by the
// activations as they are (f32): each weight is dequantized (d · q, exact as
// PackedWeights::at) inside the product, so a kW8A32 product equals the kF32
// product of the dequantized weights bit for bit. It moves kInt8's bytes and
// loses only the weights' rounding (on the shipped model, 99.4 % top-1
// agreement with f32 against kInt8's 98.7 %), at more arithmetic per weight
// than kInt8's integer dot products (bench/README.md compares them).
// kBlocks holds a GGUF file's block-quantized weights (Q4_K, Q6_K, Q4_0, ...:
// model/kernels/ggml_blocks.h) as stored, repacked into panels but with the
// same codes and scales, so resident memory is about the file's bytes. The
// product dequantizes each weight inside the kernel to ggml's float and
// multiplies the activations as they are (f32), like kW8A32: a kBlocks
// product equals the kF32 product of the dequantized weights bit for bit. It
// is never chosen by --weights_dtype: a file's block-quantized matrices are
// packed as it (PackedWeights::FromBlockRows). With --weights_dtype int8 they
// stay so, but the product takes activations quantized as kInt8 does
// (int8_activations(): integer dot products, as llama.cpp multiplies these
// types; see MatMul); IQ4_NL and IQ4_XS keep f32 activations.
enum class WeightType { kF32, kBF16, kInt8, kW8A32, kBlocks };

// "f32", "bf16", "int8", "w8a32" or "blocks".
const char* WeightTypeName(WeightType type);

// Whether `type` stores its weights as Q8_0 (kInt8's layout below).
inline bool IsQ8_0(WeightType type) {
  return type == WeightType::kInt8 || type == WeightType::kW8A32;
}

// A weight matrix W [depth, cols] (the [in, out] layout of GPT-2's Conv1D)
// repacked for MatMul: cut into panels of kPanel consecutive columns, each
// stored k-major, so the kernel streams through memory in order. The last panel
// is zero-padded to kPanel columns.
//
// kInt8 and kW8A32 panels go by blocks of kInt8Block steps: block b of panel p
// holds the quants of its 64 columns (laid out for the dot-product
// instructions, as bytes q + 128: model/kernels/family_panels.h's quads), and
// 64 float scales. A depth that is not a multiple of kInt8Block is padded with
// zero weights.
class PackedWeights {
 public:
  static constexpr int kPanel = 64;
  static constexpr int kInt8Block = 32;

  PackedWeights() = default;
  // `w` is row-major [depth, cols] with row stride `w_stride`.
  PackedWeights(const float* w, int depth, int cols, int w_stride,
                WeightType type = WeightType::kF32);
  // Packs the transpose of `v`, row-major [cols, depth]: W[k, j] = v[j, k]. For
  // an embedding table used as the LM head (logits = x · tableᵀ) and for
  // nn.Linear weights, stored [out, in].
  static PackedWeights FromTransposed(const float* v, int cols, int depth,
                                      WeightType type = WeightType::kF32);
  // ggml's block_q8_0, as a GGUF Q8_0 tensor stores its rows: an fp16 scale
  // d (little-endian) and kInt8Block int8 quants q; value = q · d.
  static constexpr int kQ8_0BlockBytes = 2 + kInt8Block;
  // A matrix [rows, depth] held as such blocks along its rows: an nn.Linear
  // weight [out, in] or an embedding table [vocab, C] in a Q8_0 file.
  struct Q8_0Rows {
    const char* blocks;  // rows × depth / kInt8Block blocks, row-major.
    int rows;
  };
  // Packs, as an IsQ8_0 `type`, W [depth, Σ rows] whose columns are the rows
  // of `parts` in order, W[k, j] = row j's value k: their transposes side by
  // side, as FromTransposed packs floats ([Q | K | V] fuses three). The
  // stored quants and scales are kept as they are (the scale widened to
  // float, exactly), so W is the stored matrix, with no dequantizing and
  // requantizing. `depth` must be a multiple of kInt8Block.
  static PackedWeights FromQ8_0Rows(const std::vector<Q8_0Rows>& parts,
                                    int depth, WeightType type);

  // A matrix held as ggml blocks along its rows, each row a column of W (as
  // Q8_0Rows): `rows` rows of `type`'s blocks at `blocks`.
  struct BlockRows {
    BlockType type;
    const uint8_t* blocks;
    int rows;
  };
  // Whether FromBlockRows can pack `parts` side by side for `depth`: depth a
  // multiple of each part's block values, and each panel of kPanel columns of
  // one type (a part that ends inside a panel is followed by one of the same
  // type, or is the last).
  static bool CanPackBlockRows(const std::vector<BlockRows>& parts, int depth);
  // Packs W [depth, Σ rows], W[k, j] = row j's value k, as kBlocks: each
  // panel keeps its rows' codes and scales (model/kernels/block_panels.h).
  // With `int8_activations`, if every part's type takes them
  // (BlockTypeTakesInt8Activations), the products quantize the activations
  // (int8_activations() below).
  static PackedWeights FromBlockRows(const std::vector<BlockRows>& parts,
                                     int depth, bool int8_activations = false);
  // Whether a kBlocks product of `type` can take int8 activations: every
  // type but the IQ4 ones (whose code values are a table).
  static bool BlockTypeTakesInt8Activations(BlockType type);

  WeightType type() const { return type_; }
  int depth() const { return depth_; }
  int cols() const { return cols_; }
  int panels() const { return (cols_ + kPanel - 1) / kPanel; }
  // Panel p: depth × kPanel values, row k holding columns p·kPanel .. p·kPanel
  // + kPanel - 1; f32 or bf16 bits as type() says.
  const float* panel_f32(int p) const {
    return f32_.data() + static_cast<size_t>(p) * depth_ * kPanel;
  }
  const uint16_t* panel_bf16(int p) const {
    return bf16_.data() + static_cast<size_t>(p) * depth_ * kPanel;
  }
  // IsQ8_0: blocks of kInt8Block steps along the depth (the last one padded).
  int int8_blocks() const { return (depth_ + kInt8Block - 1) / kInt8Block; }
  // Panel p's quants (int8_blocks() × kInt8Block × kPanel bytes) and scales
  // (int8_blocks() × kPanel floats, block-major).
  const uint8_t* panel_int8(int p) const {
    return q8_.data() +
           static_cast<size_t>(p) * int8_blocks() * kInt8Block * kPanel;
  }
  const float* panel_int8_scales(int p) const {
    return q8_scales_.data() + static_cast<size_t>(p) * int8_blocks() * kPanel;
  }
  // [begin, end) of share t of n over the panels, for threads that each
  // compute whole panels: about the same bytes in every share. kBlocks panels
  // differ in size where a matrix's parts differ in type (llama.cpp's mixes
  // give a fused QKV's V, or some layers' rows, more bits), so an even count
  // of panels would leave one thread reading more; other types split evenly.
  // Which thread computes a column never changes its values.
  std::pair<int, int> PanelShare(int t, int n) const;
  // W[k, j], for tests and debugging.
  float at(int k, int j) const;
  // out[k] = W[k, j], k < depth: one column (a token's row of a tied
  // embedding table stored as the packed LM head).
  void Column(int j, float* out) const;
  // kBlocks: panel p's type and bytes (model/kernels/block_panels.h).
  BlockType panel_block_type(int p) const { return block_types_[p]; }
  const uint8_t* panel_blocks(int p) const {
    return blocks_.data() + block_offsets_[p];
  }
  // kBlocks: whether products quantize the activations (MatMul says how).
  bool int8_activations() const { return int8_activations_; }
  size_t MemoryBytes() const {
    return f32_.size() * sizeof(float) + bf16_.size() * sizeof(uint16_t) +
           q8_.size() + q8_scales_.size() * sizeof(float) + blocks_.size();
  }

 private:
  template <typename Get>
  void Pack(int depth, int cols, WeightType type, Get get);
  // IsQ8_0 storage for depth × cols, all zero weights (q = 0, scale 0).
  void AllocateQ8_0(int depth, int cols, WeightType type);

  WeightType type_ = WeightType::kF32;
  int depth_ = 0;
  int cols_ = 0;
  // Streamed once per decode step: on huge pages (base/huge_pages.h).
  StreamedVector<float> f32_;           // kF32
  StreamedVector<uint16_t> bf16_;       // kBF16
  StreamedVector<uint8_t> q8_;          // IsQ8_0: quants, q + 128
  StreamedVector<float> q8_scales_;     // IsQ8_0
  StreamedVector<uint8_t> blocks_;      // kBlocks: every panel's bytes,
  std::vector<size_t> block_offsets_;   // where each panel's begin,
  std::vector<BlockType> block_types_;  // and each panel's type.
  bool int8_activations_ = false;       // kBlocks: see int8_activations().
};

// Rounds to the nearest bf16 (ties to even), as PackedWeights does; NaN stays
// NaN.
uint16_t FloatToBf16(float f);
// out[i] = FloatToBf16(x[i]), i < n, the same bits, a vector at a time: the
// KV cache rounds every key and value it stores in bf16 (KvCache::WriteRow).
void RoundToBf16(const float* x, int n, uint16_t* out);
inline float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}

// y[r, j] (+)= Σ_k x[r, k] · W[k, j]   for r < rows, j < w.cols().  y = x · W
//   x: rows × w.depth(), row-major with row stride x_stride.
//   y: rows × w.cols(), row-major with row stride y_stride. accumulate: add the
//   product to y.
// Each y[r, j] is the sum over k in increasing order, one multiply-add per step
// (fused where the target has FMA: this kernel is the only one that computes
// these values, so every path contracts alike), whatever rows is and whichever
// panels are computed together.
// Register-tiled like a GEMM micro-kernel, vectorized across columns.
// kInt8: x's rows are first quantized like the weights (per row, per block of
// kInt8Block, round(x / d) with d = max|x| / 127), then y[r, j] is the sum over
// blocks b in increasing order of float(Σ_k qx · qw) · (dx_b · dw_b,j), each
// multiply and add rounded on its own; the integer sums are exact. The rows
// are quantized into per-thread scratch that grows to the largest product seen
// (no allocation in the steady state).
// kW8A32: as kF32, with the dequantized weights d · q.
// kBlocks: as kF32, with ggml's dequantized weights. With int8_activations(),
// x's rows are quantized as for kInt8 and, per column, sub-block s (16 or 32
// steps, within one block b of x) and in increasing k:
//   T = Σ_k code_k · qx_k - offset · S   (S = Σ_k qx_k, integers, exact)
//   acc = acc + float(T) · (a_s · dx_b)  [± float(S) · (b_s · dx_b)]
// with code, offset, a_s = d · scale and b_s = m · min as ggml_blocks.h
// defines them, each multiply and add rounded on its own; every family gives
// the same values.
void MatMul(const float* x, int rows, int x_stride, const PackedWeights& w,
            float* y, int y_stride, bool accumulate);
// The same for the columns of panels [panel_begin, panel_end) only: threads
// split a product by panels and each gets exactly MatMul's values.
void MatMulPanels(const float* x, int rows, int x_stride,
                  const PackedWeights& w, int panel_begin, int panel_end,
                  float* y, int y_stride, bool accumulate);

// Attention scores of one head: y[t, j] = Σ_d q[t, d] · k_j[d] in increasing
// d, one multiply-add per step, for t < rows and the keys row t can see, j <
// first_position + t + 1 (causal); y[t, j] past that is left unspecified.
//   q: rows × depth, row stride q_stride. k: `keys` vectors of `depth` floats,
//   k_j at k + j · k_stride (a head's columns of a row-major KV cache).
// Vectorized across keys (16 at a time, transposed into `scratch`, which holds
// kAttentionScratch(depth) floats), so small head dimensions cost no lane
// folding; the value for (t, j) does not depend on rows, keys or position, so
// keys may be scored block by block (k and y offset by the block's first key,
// first_position reduced by it, negative if the block starts after row 0's
// position) with the values of one call over all of them.
// request_next: a hint, as WeightedSum's below (keys two blocks of 16 ahead).
void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const float* k, int k_stride, int keys, int first_position,
                     float* y, int y_stride, float* scratch,
                     bool request_next = false);
inline int AttentionScratchFloats(int depth) { return depth * 16; }
// The same over keys held as bf16 bits (a kBf16 KV cache, model/kv_cache.h):
// each key element is widened to its float, exactly, as the keys move into
// `scratch`; y equals the call above over the widened keys, bit for bit.
void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const uint16_t* k, int k_stride, int keys,
                     int first_position, float* y, int y_stride, float* scratch,
                     bool request_next = false);

// out[d] = Σ_j p[j] · v_j[d] for d < depth, summed over j < n in increasing
// order (one multiply and one add per step), v_j at v + j · v_stride. The
// weighted sum of values, accumulated in registers across the head dimension.
// accumulate: the sum starts from out[d] instead of 0, so summing keys
// [0, a) and then, accumulating, [a, n) (the blocks of a paged KV cache) is
// bit for bit the single call over [0, n).
// request_next: a hint, no value changes. Rows a stride apart are always
// requested 16 rows ahead; contiguous rows (a head's run of a KV-cache block)
// only with request_next, when the memory past the run is what the caller
// reads next (in decoding, the next head's run).
void WeightedSum(const float* p, int n, const float* v, int v_stride, int depth,
                 float* out, bool accumulate = false,
                 bool request_next = false);
// The same over values held as bf16 bits, each widened exactly: equal, bit for
// bit, to the call above over the widened values.
void WeightedSum(const float* p, int n, const uint16_t* v, int v_stride,
                 int depth, float* out, bool accumulate = false,
                 bool request_next = false);
// WeightedSum of `rows` rows of weights over the same n values: row r's at
// p + r · p_stride, its sum at out + r · out_stride. Each row's sum is
// WeightedSum's over that row alone, bit for bit; the rows share each value's
// load, and their sums are independent chains of adds where one row of a
// head of 16 dimensions (one vector) would wait on every add: a prompt's
// queries in groups.
void WeightedSumRows(const float* p, int p_stride, int rows, int n,
                     const float* v, int v_stride, int depth, float* out,
                     int out_stride, bool accumulate = false,
                     bool request_next = false);
void WeightedSumRows(const float* p, int p_stride, int rows, int n,
                     const uint16_t* v, int v_stride, int depth, float* out,
                     int out_stride, bool accumulate = false,
                     bool request_next = false);

// In place: with y = x · scale (scale > 0; each product rounded to float, as a
// separate pass of multiplies would), x[i] = exp(y[i] - max) / Σ exp(y[j] -
// max), i < n.
// entropy: if not null, receives the result's -Σ p ln p (nats), from the
// exponentials as they are made: ln Z - Σ e_j (y_j - max) / Z with e_j =
// exp(y_j - max), Z = Σ e_j, so that a pass summarising attention needs no
// logarithm per weight (Entropy below takes ~25 operations per 16). Within
// 1e-5 of a double computation over the result; x is the same either way.
void Softmax(float* x, int n, float scale = 1.0f, float* entropy = nullptr);

// -Σ p[i] ln p[i], i < n, over the positive p (a probability row's entropy,
// in nats): for summaries of attention, within 1e-6 relative of a double
// computation.
float Entropy(const float* p, int n);

// Σ exp(double(x[i] - shift)), i < n (0 for n = 0), for x[i] <= shift (the
// row's largest): x[i] - shift rounded to float, then the exponential and the
// sum in double; the normaliser of a log-softmax over a vocabulary
// (model/sampler.h), whose one libm exp per entry was a tenth of a served
// step. Each exponential within 2 ulp of exp's, summed in 16 lanes (i mod 16)
// folded in a fixed order, the same bits in every family: within 1e-13
// relative of an exact sum at 50,257 entries. An x[i] - shift under -708 adds
// nothing (exp < 2^-1021: not a bit of a sum beside exp(0) = 1, and below
// the 1e-13 otherwise); NaN gives NaN.
double SumExp(const float* x, int n, float shift);

// The first i < n with the largest x[i] (n >= 1), as std::max_element finds
// it where there is no NaN (a NaN never wins); a log-softmax's max, found in
// vectors.
int ArgMax(const float* x, int n);

// The largest p[i] and Σ i · p[i], i < n (n >= 1; i as a float, exact below
// 2^24), in one pass: a probability row's peak and the first moment of its
// keys, for summaries of attention.
void RowStats(const float* p, int n, float* max, float* index_dot);

// In place: GELU, tanh form (GPT-2's "gelu_new").
void GeluTanh(float* x, int n);

// In place: gate[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^-g).
void SiluMultiply(float* gate, const float* up, int n);

}  // namespace textgen::kernels

#endif  // TEXTGEN_MODEL_KERNELS_KERNELS_H_
