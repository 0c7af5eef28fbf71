#include "model/kernels/block_panels.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <vector>

#include "model/kernels/table.h"

namespace textgen::kernels {
namespace {

constexpr int kPanel = PackedWeights::kPanel;
constexpr size_t kLaneRow = 4 * kPanel;  // 64 lanes of 32 bits.

int StoredCodeBits(const BlockLayout& type) {
  return type.code_bits <= 4 ? 4 : type.code_bits;
}

uint16_t HalfBits(float f) {  // Exact for a value that came from fp16.
  return Eigen::numext::bit_cast<uint16_t>(Eigen::half(f));
}

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Where the bits of step k's code sit for column jj: the byte of its lane
// and the bit within that lane, for the low part and (5-, 6-bit) high part.
struct CodePlace {
  size_t low_lane, high_lane;
  int low_shift, high_shift;
};
CodePlace PlaceOf(const BlockPanelLayout& l, int k, int jj) {
  const size_t group = static_cast<size_t>(k / 32) * l.group_bytes;
  const int r = k % 32;
  CodePlace place{};
  if (l.code_bits == 8) {
    place.low_lane = group + (r / 4) * kLaneRow + jj * 4;
    place.low_shift = 8 * (r % 4);
    return place;
  }
  place.low_lane = group + (r / 8) * kLaneRow + jj * 4;
  place.low_shift = 4 * (r % 8);
  if (l.code_bits == 5 || l.code_bits == 6) {
    place.high_lane =
        group + (4 + HighLane(l.code_bits, r)) * kLaneRow + jj * 4;
    place.high_shift = HighShift(l.code_bits, r);
  }
  return place;
}

uint32_t LoadLane(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
void OrLane(uint8_t* p, uint32_t bits) {
  const uint32_t v = LoadLane(p) | bits;
  std::memcpy(p, &v, sizeof(v));
}

int CodeAt(const BlockPanelLayout& l, const uint8_t* panel, int k, int jj) {
  const CodePlace place = PlaceOf(l, k, jj);
  const uint32_t mask = l.code_bits == 8 ? 0xffu : 0xfu;
  uint32_t code = (LoadLane(panel + place.low_lane) >> place.low_shift) & mask;
  if (l.code_bits == 5) {
    code |= ((LoadLane(panel + place.high_lane) >> place.high_shift) & 1u) << 4;
  } else if (l.code_bits == 6) {
    code |= ((LoadLane(panel + place.high_lane) >> place.high_shift) & 3u) << 4;
  }
  return static_cast<int>(code);
}

// a and b of sub-block s, column jj (see table.h's BlockPanelView).
float FactorA(const BlockPanelLayout& l, const uint8_t* panel, int s, int jj) {
  const int block = s * l.type->sub_block / l.type->values;
  const float d = HalfToFloat(
      Load16(panel + l.d + (static_cast<size_t>(block) * kPanel + jj) * 2));
  if (!l.has_scale) return d * 1.0f;
  const auto scale = static_cast<int8_t>(
      panel[l.scale + static_cast<size_t>(s) * kPanel + jj]);
  return d * static_cast<float>(scale);
}
float FactorB(const BlockPanelLayout& l, const uint8_t* panel, int s, int jj) {
  const int block = s * l.type->sub_block / l.type->values;
  const float m = HalfToFloat(
      Load16(panel + l.m + (static_cast<size_t>(block) * kPanel + jj) * 2));
  if (!l.has_min) return m * 1.0f;
  return m * static_cast<float>(
                 panel[l.min + static_cast<size_t>(s) * kPanel + jj]);
}

// The family kernel's view of one panel (table.h).
BlockPanelView ViewOf(const BlockPanelLayout& l, const uint8_t* panel) {
  BlockPanelView view;
  view.codes = panel;
  view.d = reinterpret_cast<const uint16_t*>(panel + l.d);
  if (l.has_m) view.m = reinterpret_cast<const uint16_t*>(panel + l.m);
  if (l.has_scale)
    view.scale = reinterpret_cast<const int8_t*>(panel + l.scale);
  if (l.has_min) view.min = panel + l.min;
  view.subs_per_block = l.type->values / l.type->sub_block;
  view.code_bits = l.code_bits;
  view.code_offset = l.type->code_offset;
  view.sub_block = l.type->sub_block;
  view.bias = l.type->bias;
  view.iq4_table = l.type->iq4_table;
  return view;
}

}  // namespace

BlockPanelLayout MakeBlockPanelLayout(BlockType type, int depth) {
  BlockPanelLayout l;
  l.type = &LayoutOf(type);
  l.depth = depth;
  l.code_bits = StoredCodeBits(*l.type);
  l.group_bytes = static_cast<size_t>(l.code_bits) * kLaneRow;
  const size_t blocks = depth / l.type->values;
  const size_t subs = depth / l.type->sub_block;
  size_t at = static_cast<size_t>(depth / 32) * l.group_bytes;
  l.d = at;
  at += blocks * kPanel * 2;
  l.has_m = l.type->bias != BlockBias::kNone;
  if (l.has_m) {
    l.m = at;
    at += blocks * kPanel * 2;
  }
  l.has_scale = l.type->values != l.type->sub_block;
  if (l.has_scale) {
    l.scale = at;
    at += subs * kPanel;
  }
  l.has_min = l.type->bias == BlockBias::kMinusMin;
  if (l.has_min) {
    l.min = at;
    at += subs * kPanel;
  }
  l.bytes = at;
  return l;
}

float BlockPanelWeight(const BlockPanelLayout& l, const uint8_t* panel, int k,
                       int jj) {
  const int s = k / l.type->sub_block;
  const float v =
      static_cast<float>(CodeValue(*l.type, CodeAt(l, panel, k, jj)));
  float w = FactorA(l, panel, s, jj) * v;
  if (l.type->bias == BlockBias::kPlusM) w = w + FactorB(l, panel, s, jj);
  if (l.type->bias == BlockBias::kMinusMin) w = w - FactorB(l, panel, s, jj);
  return w;
}

bool PackedWeights::CanPackBlockRows(const std::vector<BlockRows>& parts,
                                     int depth) {
  int col = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const BlockLayout& layout = LayoutOf(parts[i].type);
    if (depth <= 0 || depth % layout.values != 0) return false;
    col += parts[i].rows;
    // A part ending inside a panel shares it with the next part.
    if (i + 1 < parts.size() && col % kPanel != 0 &&
        parts[i + 1].type != parts[i].type) {
      return false;
    }
  }
  return true;
}

bool PackedWeights::BlockTypeTakesInt8Activations(BlockType type) {
  return !LayoutOf(type).iq4_table;
}

PackedWeights PackedWeights::FromBlockRows(const std::vector<BlockRows>& parts,
                                           int depth, bool int8_activations) {
  PackedWeights w;
  w.type_ = WeightType::kBlocks;
  w.depth_ = depth;
  w.int8_activations_ = int8_activations;
  for (const BlockRows& part : parts) {
    w.cols_ += part.rows;
    if (!BlockTypeTakesInt8Activations(part.type)) w.int8_activations_ = false;
  }
  // Each panel's type: its first column's.
  w.block_types_.resize(w.panels());
  {
    int col = 0;
    for (const BlockRows& part : parts) {
      for (int r = 0; r < part.rows; ++r, ++col) {
        if (col % kPanel == 0) w.block_types_[col / kPanel] = part.type;
      }
    }
  }
  std::vector<BlockPanelLayout> layouts;
  size_t total = 0;
  for (int p = 0; p < w.panels(); ++p) {
    layouts.push_back(MakeBlockPanelLayout(w.block_types_[p], depth));
    w.block_offsets_.push_back(total);
    total += layouts.back().bytes;
  }
  // Padding columns: zero codes and zero scales, weights 0.
  w.blocks_.assign(total, 0);
  UnpackedBlock u;
  int col = 0;
  for (const BlockRows& part : parts) {
    const BlockLayout& type = LayoutOf(part.type);
    const size_t row_bytes =
        static_cast<size_t>(depth / type.values) * type.bytes;
    for (int r = 0; r < part.rows; ++r, ++col) {
      const int p = col / kPanel, jj = col % kPanel;
      const BlockPanelLayout& l = layouts[p];
      uint8_t* panel = w.blocks_.data() + w.block_offsets_[p];
      const uint8_t* row = part.blocks + r * row_bytes;
      for (int b = 0; b < depth / type.values; ++b) {
        UnpackBlock(part.type, row + b * type.bytes, &u);
        const size_t at = (static_cast<size_t>(b) * kPanel + jj) * 2;
        const uint16_t d = HalfBits(u.d), m = HalfBits(u.m);
        std::memcpy(panel + l.d + at, &d, 2);
        if (l.has_m) std::memcpy(panel + l.m + at, &m, 2);
        const int subs = type.values / type.sub_block;
        for (int s = 0; s < subs; ++s) {
          const size_t si = static_cast<size_t>(b * subs + s) * kPanel + jj;
          if (l.has_scale)
            panel[l.scale + si] = static_cast<uint8_t>(u.scale[s]);
          if (l.has_min) panel[l.min + si] = u.min[s];
        }
        for (int i = 0; i < type.values; ++i) {
          const int k = b * type.values + i;
          const CodePlace place = PlaceOf(l, k, jj);
          const uint32_t code = u.code[i];
          const uint32_t low_mask = l.code_bits == 8 ? 0xffu : 0xfu;
          OrLane(panel + place.low_lane, (code & low_mask) << place.low_shift);
          if (l.code_bits == 5 || l.code_bits == 6) {
            OrLane(panel + place.high_lane, (code >> 4) << place.high_shift);
          }
        }
      }
    }
  }
  return w;
}

namespace {

// run(view, valid, j0) for each panel p in [panel_begin, panel_end): its
// view, its real columns and its first column.
template <typename Run>
void ForEachPanel(const PackedWeights& w, int panel_begin, int panel_end,
                  Run run) {
  for (int p = panel_begin; p < panel_end; ++p) {
    const BlockPanelLayout layout =
        MakeBlockPanelLayout(w.panel_block_type(p), w.depth());
    const int j0 = p * kPanel;
    run(ViewOf(layout, w.panel_blocks(p)), std::min(kPanel, w.cols() - j0), j0);
  }
}

}  // namespace

void MatMulBlockPanels(const float* x, int rows, int x_stride,
                       const PackedWeights& w, int panel_begin, int panel_end,
                       float* widened, float* y, int y_stride,
                       bool accumulate) {
  const KernelTable& table = ActiveKernelTable();
  ForEachPanel(w, panel_begin, panel_end,
               [&](const BlockPanelView& view, int valid, int j0) {
                 table.matmul_block_panel(x, rows, x_stride, view, w.depth(),
                                          valid, widened, y + j0, y_stride,
                                          accumulate);
               });
}

void MatMulBlockPanelsInt8(const QuantizedRows& x, const PackedWeights& w,
                           int panel_begin, int panel_end, float* y,
                           int y_stride, bool accumulate) {
  // The quants rearranged for the nibble lanes, and the halves' sums
  // (BlockActivations), once per product: per-thread scratch, as the quants'.
  thread_local std::vector<int32_t> pairs, half_sums;
  const size_t blocks = static_cast<size_t>(x.rows) * x.blocks;
  if (pairs.size() < blocks * 8) {
    pairs.resize(blocks * 8);
    half_sums.resize(blocks * 2);
  }
  for (size_t b = 0; b < blocks; ++b) {
    const int8_t* q = x.q + b * PackedWeights::kInt8Block;
    for (int o = 0; o < 4; ++o) {
      for (int p = 0; p < 2; ++p) {
        uint32_t lane = 0;
        for (int i = 0; i < 4; ++i) {
          lane |=
              static_cast<uint32_t>(static_cast<uint8_t>(q[8 * o + p + 2 * i]))
              << (8 * i);
        }
        pairs[b * 8 + 2 * o + p] = static_cast<int32_t>(lane);
      }
    }
    for (int h = 0; h < 2; ++h) {
      int32_t sum = 0;
      for (int k = 0; k < 16; ++k) sum += q[16 * h + k];
      half_sums[b * 2 + h] = sum;
    }
  }
  BlockActivations a;
  a.x = x;
  a.pairs = pairs.data();
  a.half_sums = half_sums.data();
  const KernelTable& table = ActiveKernelTable();
  ForEachPanel(w, panel_begin, panel_end,
               [&](const BlockPanelView& view, int valid, int j0) {
                 table.matmul_block_panel_int8(a, view, w.depth(), valid,
                                               y + j0, y_stride, accumulate);
               });
}

}  // namespace textgen::kernels
