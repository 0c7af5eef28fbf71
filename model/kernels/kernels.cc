// The family-independent half of the kernels: packing weights, quantizing
// activations, and calling the selected family's code (model/kernels/table.h).
#include "model/kernels/kernels.h"

#include <Eigen/Core>
#include <algorithm>

#include "base/worker_pool.h"
#include "model/kernels/block_panels.h"
#include "model/kernels/table.h"

namespace textgen::kernels {

float Dot(const float* a, const float* b, int n) {
  return ActiveKernelTable().dot(a, b, n);
}

float Sum(const float* a, int n) { return ActiveKernelTable().sum(a, n); }

const char* WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return "f32";
    case WeightType::kBF16:
      return "bf16";
    case WeightType::kInt8:
      return "int8";
    case WeightType::kW8A32:
      return "w8a32";
    case WeightType::kBlocks:
      return "blocks";
  }
  return "?";
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // Quiet NaN.
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

constexpr int kBlock = PackedWeights::kInt8Block;

// Q8_0's rounding of one block of n ≤ kBlock values (the rest are zero), for
// the weights at load: the kernel family's quantizer, the one that also
// quantizes activations (KernelTable::quantize_rows: q = round(v / d), d =
// max|v| / 127, as llama.cpp's quantize_row_q8_0), so weights and activations
// are rounded by the same code. Returns d.
float QuantizeBlock(const float* v, int n, int8_t* q) {
  float d;
  int32_t sum;
  ActiveKernelTable().quantize_rows(v, 1, n, n, q, &d, &sum);
  return d;
}

// Byte of weight (k, jj) in its panel's block: quads of 4 steps, each holding
// 4 bytes per column (model/kernels/family_panels.h).
inline size_t Int8Offset(int k, int jj) {
  return static_cast<size_t>(k / kBlock) * kBlock * PackedWeights::kPanel +
         static_cast<size_t>((k % kBlock) / 4) * 4 * PackedWeights::kPanel +
         jj * 4 + k % 4;
}

// Per-thread scratch for quantized activations: a product's rows are
// quantized by every thread that computes some of its panels (a few
// multiplies per row element, against one per weight of a panel).
struct ActivationScratch {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
};

QuantizedRows QuantizeRows(const float* x, int rows, int x_stride, int depth) {
  thread_local ActivationScratch scratch;
  const int blocks = (depth + kBlock - 1) / kBlock;
  const size_t n = static_cast<size_t>(rows) * blocks;
  if (scratch.scale.size() < n) {
    scratch.q.resize(n * kBlock);
    scratch.scale.resize(n);
    scratch.sum.resize(n);
  }
  ActiveKernelTable().quantize_rows(x, rows, x_stride, depth, scratch.q.data(),
                                    scratch.scale.data(), scratch.sum.data());
  QuantizedRows out;
  out.q = scratch.q.data();
  out.scale = scratch.scale.data();
  out.sum = scratch.sum.data();
  out.rows = rows;
  out.blocks = blocks;
  return out;
}

// Per-thread room for one panel widened to f32 (model/kernels/table.h), for a
// bf16 or w8a32 product of more rows than one tile; null otherwise.
float* WidenedPanel(int rows, int depth) {
  if (rows <= kTileRows) return nullptr;
  thread_local std::vector<float> widened;
  const size_t n = static_cast<size_t>(depth) * PackedWeights::kPanel;
  if (widened.size() < n) widened.resize(n);
  return widened.data();
}

}  // namespace

template <typename Get>
void PackedWeights::Pack(int depth, int cols, WeightType type, Get get) {
  type_ = type;
  depth_ = depth;
  cols_ = cols;
  if (IsQ8_0(type)) {
    AllocateQ8_0(depth, cols, type);
    const int blocks = int8_blocks();
    const size_t panel_bytes = static_cast<size_t>(blocks) * kBlock * kPanel;
    float values[kBlock];
    int8_t q[kBlock];
    for (int p = 0; p < panels(); ++p) {
      const int j0 = p * kPanel;
      const int valid = std::min(kPanel, cols - j0);
      for (int b = 0; b < blocks; ++b) {
        const int n = std::min(kBlock, depth - b * kBlock);
        for (int jj = 0; jj < valid; ++jj) {
          for (int i = 0; i < n; ++i) values[i] = get(b * kBlock + i, j0 + jj);
          q8_scales_[(static_cast<size_t>(p) * blocks + b) * kPanel + jj] =
              QuantizeBlock(values, n, q);
          for (int i = 0; i < kBlock; ++i) {
            q8_[p * panel_bytes + Int8Offset(b * kBlock + i, jj)] =
                static_cast<uint8_t>(q[i] + 128);
          }
        }
      }
    }
    return;
  }
  const size_t size = static_cast<size_t>(panels()) * depth * kPanel;
  if (type == WeightType::kF32) {
    f32_.assign(size, 0.0f);
  } else {
    bf16_.assign(size, 0);
  }
  for (int p = 0; p < panels(); ++p) {
    const int j0 = p * kPanel;
    const int valid = std::min(kPanel, cols - j0);
    const size_t base = static_cast<size_t>(p) * depth * kPanel;
    for (int k = 0; k < depth; ++k) {
      for (int jj = 0; jj < valid; ++jj) {
        const float v = get(k, j0 + jj);
        const size_t i = base + static_cast<size_t>(k) * kPanel + jj;
        if (type == WeightType::kF32) {
          f32_[i] = v;
        } else {
          bf16_[i] = FloatToBf16(v);
        }
      }
    }
  }
}

void PackedWeights::AllocateQ8_0(int depth, int cols, WeightType type) {
  type_ = type;
  depth_ = depth;
  cols_ = cols;
  const size_t panel_bytes =
      static_cast<size_t>(int8_blocks()) * kBlock * kPanel;
  // Padding: zero weights (q = 0, stored as 128) with zero scales.
  q8_.assign(panels() * panel_bytes, 128);
  q8_scales_.assign(static_cast<size_t>(panels()) * int8_blocks() * kPanel,
                    0.0f);
}

PackedWeights PackedWeights::FromQ8_0Rows(const std::vector<Q8_0Rows>& parts,
                                          int depth, WeightType type) {
  int cols = 0;
  for (const Q8_0Rows& part : parts) cols += part.rows;
  PackedWeights packed;
  packed.AllocateQ8_0(depth, cols, type);
  const int blocks = packed.int8_blocks();
  const size_t panel_bytes = static_cast<size_t>(blocks) * kBlock * kPanel;
  int j = 0;  // The packed column: a row of some part.
  for (const Q8_0Rows& part : parts) {
    for (int r = 0; r < part.rows; ++r, ++j) {
      const int p = j / kPanel, jj = j % kPanel;
      const char* row =
          part.blocks + static_cast<size_t>(r) * blocks * kQ8_0BlockBytes;
      for (int b = 0; b < blocks; ++b) {
        const char* block = row + static_cast<size_t>(b) * kQ8_0BlockBytes;
        uint16_t bits;
        __builtin_memcpy(&bits, block, sizeof(bits));  // Little-endian.
        packed.q8_scales_[(static_cast<size_t>(p) * blocks + b) * kPanel + jj] =
            static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
        for (int i = 0; i < kBlock; ++i) {
          packed.q8_[p * panel_bytes + Int8Offset(b * kBlock + i, jj)] =
              static_cast<uint8_t>(static_cast<int8_t>(block[2 + i]) + 128);
        }
      }
    }
  }
  return packed;
}

PackedWeights::PackedWeights(const float* w, int depth, int cols, int w_stride,
                             WeightType type) {
  Pack(depth, cols, type,
       [&](int k, int j) { return w[static_cast<long>(k) * w_stride + j]; });
}

PackedWeights PackedWeights::FromTransposed(const float* v, int cols, int depth,
                                            WeightType type) {
  PackedWeights packed;
  packed.Pack(depth, cols, type, [&](int k, int j) {
    return v[static_cast<long>(j) * depth + k];
  });
  return packed;
}

std::pair<int, int> PackedWeights::PanelShare(int t, int n) const {
  const int p = panels();
  if (type_ != WeightType::kBlocks) return WorkerPool::Share(p, t, n);
  // The panel whose start is nearest to share i's first byte.
  auto boundary = [&](int i) {
    if (i == 0) return 0;
    if (i == n) return p;
    const size_t target =
        static_cast<size_t>(static_cast<double>(blocks_.size()) * i / n);
    const auto at =
        std::lower_bound(block_offsets_.begin(), block_offsets_.end(), target);
    int q = static_cast<int>(at - block_offsets_.begin());
    if (q > 0 && (q == p || target - block_offsets_[q - 1] <
                                block_offsets_[q] - target)) {
      --q;
    }
    return q;
  };
  return {boundary(t), boundary(t + 1)};
}

float PackedWeights::at(int k, int j) const {
  const int p = j / kPanel, jj = j % kPanel;
  if (type_ == WeightType::kBlocks) {
    return BlockPanelWeight(MakeBlockPanelLayout(block_types_[p], depth_),
                            panel_blocks(p), k, jj);
  }
  if (IsQ8_0(type_)) {
    const int q = int{panel_int8(p)[Int8Offset(k, jj)]} - 128;
    return panel_int8_scales(p)[(k / kBlock) * kPanel + jj] *
           static_cast<float>(q);
  }
  const size_t i = static_cast<size_t>(p) * depth_ * kPanel +
                   static_cast<size_t>(k) * kPanel + jj;
  return type_ == WeightType::kF32 ? f32_[i] : Bf16ToFloat(bf16_[i]);
}

void PackedWeights::Column(int j, float* out) const {
  if (type_ == WeightType::kBlocks) {
    const int p = j / kPanel;
    const BlockPanelLayout layout =
        MakeBlockPanelLayout(block_types_[p], depth_);
    for (int k = 0; k < depth_; ++k) {
      out[k] = BlockPanelWeight(layout, panel_blocks(p), k, j % kPanel);
    }
    return;
  }
  if (IsQ8_0(type_)) {
    for (int k = 0; k < depth_; ++k) out[k] = at(k, j);
    return;
  }
  const size_t base =
      static_cast<size_t>(j / kPanel) * depth_ * kPanel + j % kPanel;
  if (type_ == WeightType::kF32) {
    for (int k = 0; k < depth_; ++k)
      out[k] = f32_[base + static_cast<size_t>(k) * kPanel];
  } else {
    for (int k = 0; k < depth_; ++k)
      out[k] = Bf16ToFloat(bf16_[base + static_cast<size_t>(k) * kPanel]);
  }
}

void MatMulPanels(const float* x, int rows, int x_stride,
                  const PackedWeights& w, int panel_begin, int panel_end,
                  float* y, int y_stride, bool accumulate) {
  const KernelTable& table = ActiveKernelTable();
  switch (w.type()) {
    case WeightType::kF32:
      table.matmul_f32(x, rows, x_stride, w.panel_f32(0), w.depth(), w.cols(),
                       panel_begin, panel_end, y, y_stride, accumulate);
      return;
    case WeightType::kBF16:
      table.matmul_bf16(x, rows, x_stride, w.panel_bf16(0), w.depth(), w.cols(),
                        panel_begin, panel_end, WidenedPanel(rows, w.depth()),
                        y, y_stride, accumulate);
      return;
    case WeightType::kInt8:
      if (panel_begin >= panel_end) return;
      table.matmul_int8(QuantizeRows(x, rows, x_stride, w.depth()),
                        w.panel_int8(0), w.panel_int8_scales(0), w.cols(),
                        panel_begin, panel_end, y, y_stride, accumulate);
      return;
    case WeightType::kW8A32:
      table.matmul_w8a32(x, rows, x_stride, w.panel_int8(0),
                         w.panel_int8_scales(0), w.depth(), w.cols(),
                         panel_begin, panel_end, WidenedPanel(rows, w.depth()),
                         y, y_stride, accumulate);
      return;
    case WeightType::kBlocks:
      if (w.int8_activations()) {
        if (panel_begin >= panel_end) return;
        MatMulBlockPanelsInt8(QuantizeRows(x, rows, x_stride, w.depth()), w,
                              panel_begin, panel_end, y, y_stride, accumulate);
        return;
      }
      MatMulBlockPanels(x, rows, x_stride, w, panel_begin, panel_end,
                        WidenedPanel(rows, w.depth()), y, y_stride, accumulate);
      return;
  }
}

void MatMul(const float* x, int rows, int x_stride, const PackedWeights& w,
            float* y, int y_stride, bool accumulate) {
  MatMulPanels(x, rows, x_stride, w, 0, w.panels(), y, y_stride, accumulate);
}

void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const float* k, int k_stride, int keys, int first_position,
                     float* y, int y_stride, float* scratch,
                     bool request_next) {
  ActiveKernelTable().attention_scores(q, rows, depth, q_stride, k, k_stride,
                                       keys, first_position, y, y_stride,
                                       scratch, request_next);
}

void WeightedSum(const float* p, int n, const float* v, int v_stride, int depth,
                 float* out, bool accumulate, bool request_next) {
  ActiveKernelTable().weighted_sum(p, 0, 1, n, v, v_stride, depth, out, 0,
                                   accumulate, request_next);
}

void WeightedSumRows(const float* p, int p_stride, int rows, int n,
                     const float* v, int v_stride, int depth, float* out,
                     int out_stride, bool accumulate, bool request_next) {
  ActiveKernelTable().weighted_sum(p, p_stride, rows, n, v, v_stride, depth,
                                   out, out_stride, accumulate, request_next);
}

void AttentionScores(const float* q, int rows, int depth, int q_stride,
                     const uint16_t* k, int k_stride, int keys,
                     int first_position, float* y, int y_stride, float* scratch,
                     bool request_next) {
  ActiveKernelTable().attention_scores_bf16(q, rows, depth, q_stride, k,
                                            k_stride, keys, first_position, y,
                                            y_stride, scratch, request_next);
}

void WeightedSum(const float* p, int n, const uint16_t* v, int v_stride,
                 int depth, float* out, bool accumulate, bool request_next) {
  ActiveKernelTable().weighted_sum_bf16(p, 0, 1, n, v, v_stride, depth, out, 0,
                                        accumulate, request_next);
}

void WeightedSumRows(const float* p, int p_stride, int rows, int n,
                     const uint16_t* v, int v_stride, int depth, float* out,
                     int out_stride, bool accumulate, bool request_next) {
  ActiveKernelTable().weighted_sum_bf16(p, p_stride, rows, n, v, v_stride,
                                        depth, out, out_stride, accumulate,
                                        request_next);
}

void RoundToBf16(const float* x, int n, uint16_t* out) {
  ActiveKernelTable().round_to_bf16(x, n, out);
}

float Entropy(const float* p, int n) {
  return ActiveKernelTable().entropy(p, n);
}

double SumExp(const float* x, int n, float shift) {
  return ActiveKernelTable().sum_exp(x, n, shift);
}

int ArgMax(const float* x, int n) { return ActiveKernelTable().arg_max(x, n); }

void RowStats(const float* p, int n, float* max, float* index_dot) {
  ActiveKernelTable().row_stats(p, n, max, index_dot);
}

void Softmax(float* x, int n, float scale, float* entropy) {
  ActiveKernelTable().softmax(x, n, scale, entropy);
}

void GeluTanh(float* x, int n) { ActiveKernelTable().gelu_tanh(x, n); }

void SiluMultiply(float* gate, const float* up, int n) {
  ActiveKernelTable().silu_multiply(gate, up, n);
}

}  // namespace textgen::kernels
