// The memory a model configuration implies, computed from the config alone,
// and the check of it against a budget, so that a config that would need more
// memory than allowed (a 10-million-position sinusoidal table, a KV cache for
// a huge context) is refused with a message before anything is allocated.
#ifndef TEXTGEN_MODEL_FORMATS_MEMORY_BUDGET_H_
#define TEXTGEN_MODEL_FORMATS_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "model/config.h"
#include "model/kernels/kernels.h"
#include "model/kv_cache.h"

namespace textgen {

// Bytes, as doubles: the products of three 2^30-bounded config values
// overflow 64-bit integers, and an estimate needs no exact count.
struct ModelMemory {
  double weights = 0;             // Every parameter, as held in memory.
  double positions = 0;           // The learned or sinusoidal position table.
  double kv_cache_per_slot = 0;   // Keys and values of one full context.
  double kv_cache_per_token = 0;  // Of one position.
  // Encoder–decoder models: one slot's cross-attention keys and values, for a
  // source as long as the context. Counted per slot even with a pool.
  double cross_kv_per_slot = 0;
  double largest_tensor = 0;  // The loader's one temporary (f32).

  // Weights, positions, `kv_slots` full-context KV-cache slots plus a pool of
  // `kv_tokens` positions, `sequences` slots' cross-attention keys and values
  // (encoder–decoder models), and the load temporary.
  double Total(int kv_slots, int64_t kv_tokens = 0, int sequences = 0) const {
    return weights + positions + kv_slots * kv_cache_per_slot +
           static_cast<double>(kv_tokens) * kv_cache_per_token +
           sequences * cross_kv_per_slot + largest_tensor;
  }
};

// KV-cache bytes at `kv_dtype` (model/kv_cache.h).
ModelMemory EstimateModelMemory(const ModelConfig& config,
                                kernels::WeightType weight_type,
                                KvDtype kv_dtype = KvDtype::kF32);

// The machine's physical memory in bytes (what a budget of 0 means).
uint64_t PhysicalMemoryBytes();

// What a server holds beside the model's weights, and the memory all of it
// must fit in (the serving flags: model/formats/load_flags.h).
struct MemoryBudget {
  // 0 = the machine's physical memory.
  uint64_t bytes = 0;
  // Full-context KV-cache slots, and a KV pool of this many positions.
  int kv_cache_slots = 1;
  int64_t kv_cache_tokens = 0;
  // How those keys and values are held (model/kv_cache.h).
  KvDtype kv_dtype = KvDtype::kF32;
  // Sequences served at once, if not kv_cache_slots (with a pool): each holds
  // its source's cross-attention keys and values in an encoder–decoder model.
  int sequence_slots = 0;
  int sequences() const {
    return sequence_slots > 0 ? sequence_slots : kv_cache_slots;
  }
  // `bytes`, or the physical memory for 0.
  uint64_t Limit() const;
};

// OK if the model of `config` with weights held as `weight_type`, and what
// `budget` says it will hold beside them, fits in budget.bytes; otherwise
// RESOURCE_EXHAUSTED naming `source`, each part's size and the budget.
// `held_weights`, if > 0, is what the weights (all but a position table) will
// take instead of the estimate from `weight_type`: a GGUF file whose
// quantized matrices are kept as stored (GgufHeldWeightBytes).
absl::Status CheckMemoryBudget(const ModelConfig& config,
                               kernels::WeightType weight_type,
                               const MemoryBudget& budget,
                               const std::string& source,
                               double held_weights = 0);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_MEMORY_BUDGET_H_
