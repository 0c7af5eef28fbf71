#include "model/kv_cache.h"

#include <cassert>

namespace textgen {

KvCache::KvCache(const ModelConfig& config, int num_slots)
    : capacity_(config.context_length),
      n_layers_(config.n_layers),
      lengths_(num_slots, 0) {
  const int kv_width = config.n_kv_heads * config.head_dim();
  const size_t n = static_cast<size_t>(num_slots) * n_layers_;
  keys_.reserve(n);
  values_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    keys_.emplace_back(capacity_, kv_width);
    values_.emplace_back(capacity_, kv_width);
  }
}

void KvCache::Truncate(int slot, int length) {
  assert(length >= 0 && length <= lengths_[slot]);
  lengths_[slot] = length;
}

size_t KvCache::MemoryBytes() const {
  size_t bytes = 0;
  for (const auto& m : keys_) bytes += m.size() * sizeof(float);
  for (const auto& m : values_) bytes += m.size() * sizeof(float);
  return bytes;
}

}  // namespace textgen
