// Keys and values of past positions, per sequence slot and layer, so that
// decoding a new token attends over the prefix without recomputing it.
//
// All memory is allocated once, up front: num_slots × n_layers × {K, V} ×
// [capacity, kv_width] floats, where kv_width = n_kv_heads × head_dim. A slot
// is reused by clearing it, which only resets its length. The decoder writes
// rows [length, length + n) during a forward pass over n new tokens and then
// advances the length.
#ifndef TEXTGEN_MODEL_KV_CACHE_H_
#define TEXTGEN_MODEL_KV_CACHE_H_

#include <vector>

#include "model/config.h"
#include "model/tensor.h"

namespace textgen {

class KvCache {
 public:
  // Preallocates `num_slots` slots of `config.context_length` positions each.
  KvCache(const ModelConfig& config, int num_slots);

  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int num_slots() const { return static_cast<int>(lengths_.size()); }
  int capacity() const { return capacity_; }  // Positions one slot can hold.
  int length(int slot) const {
    return lengths_[slot];
  }  // Positions filled in `slot`.

  // Forgets the contents of `slot` (O(1): only its length is reset).
  void Clear(int slot) { lengths_[slot] = 0; }
  // Keeps the first `length` positions of `slot` (for rollback); length ≤
  // length(slot).
  void Truncate(int slot, int length);

  // [capacity, kv_width] row-major; row p holds position p. Rows ≥ length(slot)
  // are stale.
  Activations& keys(int slot, int layer) { return keys_[Index(slot, layer)]; }
  Activations& values(int slot, int layer) {
    return values_[Index(slot, layer)];
  }
  const Activations& keys(int slot, int layer) const {
    return keys_[Index(slot, layer)];
  }
  const Activations& values(int slot, int layer) const {
    return values_[Index(slot, layer)];
  }

  // Called by the decoder once a forward pass has written `n` new rows in every
  // layer.
  void Advance(int slot, int n) { lengths_[slot] += n; }

  // Bytes held by all slots.
  size_t MemoryBytes() const;

 private:
  size_t Index(int slot, int layer) const {
    return static_cast<size_t>(slot) * n_layers_ + layer;
  }

  int capacity_;
  int n_layers_;
  std::vector<int> lengths_;
  std::vector<Activations> keys_;    // [slot * n_layers + layer]
  std::vector<Activations> values_;  // [slot * n_layers + layer]
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_KV_CACHE_H_
