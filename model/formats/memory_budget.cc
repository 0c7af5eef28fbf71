#include "model/formats/memory_budget.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace textgen {
namespace {

std::string MiB(double bytes) {
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

}  // namespace

ModelMemory EstimateModelMemory(const ModelConfig& c,
                                kernels::WeightType weight_type,
                                KvDtype kv_dtype) {
  // Bytes per weight: Q8_0 holds 32 one-byte quants and a float scale per
  // block of 32.
  const double w = weight_type == kernels::WeightType::kBF16 ? 2
                   : kernels::IsQ8_0(weight_type)            ? 36.0 / 32
                                                             : 4;
  const double f32 = 4;
  const double C = c.d_model, I = c.d_ff, V = c.vocab_size, L = c.n_layers;
  const double T = c.context_length;
  const double head_dim = c.n_heads > 0 ? c.head_dim() : 0;
  const double q_cols = c.n_heads * head_dim;
  const double kv_cols = c.n_kv_heads * head_dim;
  const double ff_in_cols =
      c.feed_forward == FeedForwardKind::kSwiGlu ? 2 * I : I;
  // Per layer: the four projections (packed, weight_type), norms and biases.
  const double matrices =
      C * (q_cols + 2 * kv_cols) + q_cols * C + C * ff_in_cols + I * C;
  const double vectors = 4 * C + (c.qkv_bias ? q_cols + 2 * kv_cols : 0) +
                         (c.attn_out_bias ? C : 0) +
                         (c.mlp_bias ? ff_in_cols + C : 0) +
                         (c.qk_norm ? 2 * head_dim : 0);
  ModelMemory m;
  m.weights = L * (matrices * w + vectors * f32) + 2 * C * f32  // final norm
              + V * C * w;                                      // LM head
  if (c.is_encoder_decoder()) {
    // The encoder's blocks (the decoder's shape) and output norm; each
    // decoder block's cross-attention: q, [k | v] and out, norm and biases.
    m.weights += c.encoder_layers * (matrices * w + vectors * f32) +
                 2 * C * f32 + L * (4 * C * C * w + 6 * C * f32);
  }
  // An untied model keeps its embedding table as well, in f32.
  if (!c.tied_lm_head) m.weights += V * C * f32;
  if (c.positions != PositionKind::kRotary) m.positions = T * C * f32;
  // The encoder's own table (learned) or copy of the sinusoidal one.
  if (c.is_encoder_decoder()) m.positions *= 2;
  m.kv_cache_per_token = 2 * L * kv_cols * KvDtypeBytes(kv_dtype);
  m.kv_cache_per_slot = T * m.kv_cache_per_token;
  // A slot's cross-attention keys and values for a source of up to a whole
  // context, beside the pool (model/kv_cache.h).
  if (c.is_encoder_decoder()) m.cross_kv_per_slot = T * 2 * L * C * f32;
  m.largest_tensor =
      std::max({V * C, C * ff_in_cols, C * (q_cols + 2 * kv_cols), T * C}) *
      f32;
  return m;
}

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;  // Unknown: no limit.
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

uint64_t MemoryBudget::Limit() const {
  return bytes == 0 ? PhysicalMemoryBytes() : bytes;
}

absl::Status CheckMemoryBudget(const ModelConfig& config,
                               kernels::WeightType weight_type,
                               const MemoryBudget& budget,
                               const std::string& source, double held_weights) {
  const int kv_slots = budget.kv_cache_slots;
  const int64_t kv_tokens = budget.kv_cache_tokens;
  const int sequences = budget.sequences();
  ModelMemory m = EstimateModelMemory(config, weight_type, budget.kv_dtype);
  if (held_weights > 0) m.weights = held_weights;
  const double total = m.Total(kv_slots, kv_tokens, sequences);
  if (total <= static_cast<double>(budget.Limit())) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      source, ": the model needs about ", MiB(total), " (weights ",
      MiB(m.weights), ", position table ", MiB(m.positions), ", KV cache ",
      kv_slots, " x ", MiB(m.kv_cache_per_slot),
      kv_tokens > 0 ? absl::StrCat(" + a pool of ", kv_tokens, " positions ",
                                   MiB(static_cast<double>(kv_tokens) *
                                       m.kv_cache_per_token))
                    : "",
      sequences > 0 && m.cross_kv_per_slot > 0
          ? absl::StrCat(", cross-attention keys and values ", sequences, " x ",
                         MiB(m.cross_kv_per_slot))
          : "",
      ", load temporary ", MiB(m.largest_tensor),
      "), over the memory budget of ", MiB(budget.Limit()),
      budget.bytes == 0 ? " (the machine's physical memory)" : "",
      "; config: ", DescribeConfig(config)));
}

}  // namespace textgen
