// Keys and values of past positions, so that decoding a new token attends
// over the prefix without recomputing it: a paged cache (vLLM's
// PagedAttention layout) with automatic prefix caching.
//
// Memory is one pool of fixed-size blocks, allocated once, up front: block b
// holds positions of `block_tokens` consecutive tokens, keys and values, for
// every layer. Per layer the keys are one [num_blocks × block_tokens,
// kv_width] array (kv_width = n_kv_heads × head_dim), a block's part
// contiguous; likewise the values. Within a block they are head-major,
// [n_kv_heads, block_tokens, head_dim] (vLLM's order): one head's keys over
// the block are one contiguous run. Attention reads a head at a time, so
// position-major rows (a head's 64 floats, then a stride of kv_width) made
// every key a separate short read: batched decoding waited on each, and
// halving the bytes (bf16, below) gained almost nothing until the layout
// changed.
//
// A sequence lives in a slot (a handle: the engine's running sequences, the
// decoder's batch entries). A slot has a length and a block table: position p
// is row p % block_tokens of block table[p / block_tokens]. Blocks are taken
// from the pool as a slot grows (Reserve) and given back when it is cleared.
// Which block is free, shared, published or cached is the business of a
// BlockPool (model/block_pool.h), which this cache owns and which knows no
// tensors; the cache holds what the blocks store and the slots' tables.
//
// Prefix caching. A full block of prompt tokens can be published under its
// whole prefix (the tokens of positions 0 .. end of the block): a later
// sequence whose prompt starts with the same tokens attaches the same block
// (AttachPrefix) instead of recomputing it; a hash collision is a miss, never
// a wrong block, and a lookup finds only blocks published with its salt (a
// partition per client when the server has tokens; see BlockPool). Published
// blocks are read-only: shared between slots with reference counts, never
// written (a slot only writes at its length, and a slot attached to published
// blocks has its length at their end; Truncate into one copies it first). When
// its last slot lets go, a published block stays cached, in LRU order, until
// the pool needs it for something else.
//
// Encoder–decoder models. A slot also holds its source's cross-attention
// keys and values: per decoder layer one [source_length, d_model] matrix of
// each, written once by Decoder::Encode and read by every later forward pass
// until the slot is cleared. They never grow (the source is fixed) and are
// never shared, so they live beside the pool, sized to the source.
//
// Element type. Keys and values are held as f32 or, with KvDtype::kBf16, as
// bf16: half the memory (twice the positions in the same bytes) and half the
// bytes attention reads per step, which is what batched decoding spends most
// of its memory traffic on once the weights are shared by the batch. An
// element is rounded to the nearest bf16 once, when written; every read
// (prefill, decode, recomputation) sees that same value, so KV-cached still
// equals recomputed and batched equals alone, bit for bit. Against f32 it
// moves the random golden models' logits by up to ~0.2
// (tests/model/parity_test.cc states the bound), and the shipped model's top-1
// character agrees with f32's at 99.89 %
// (tests/model/shipped_model_validation_test.cc).
//
// Not thread-safe: one thread (the engine's) uses a cache.
#ifndef TEXTGEN_MODEL_KV_CACHE_H_
#define TEXTGEN_MODEL_KV_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/huge_pages.h"
#include "model/block_pool.h"
#include "model/config.h"
#include "model/tensor.h"

namespace textgen {

// How a cache holds keys and values (see above).
enum class KvDtype { kF32, kBf16 };
// "f32" or "bf16"; anything else is INVALID_ARGUMENT.
absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name);
const char* KvDtypeName(KvDtype dtype);
// Bytes of one element.
size_t KvDtypeBytes(KvDtype dtype);

struct KvCacheOptions {
  // Slots (sequences at once).
  int num_slots = 1;
  // Positions per block.
  int block_tokens = 16;
  // Blocks in the pool; 0 means enough for every slot to hold a whole
  // context (the memory of unpaged slots).
  int num_blocks = 0;
  // Element type of the keys and values.
  KvDtype dtype = KvDtype::kF32;
};

class KvCache {
 public:
  // `num_slots` slots that can each hold a whole context, in blocks of 16,
  // keys and values held as `dtype`.
  KvCache(const ModelConfig& config, int num_slots,
          KvDtype dtype = KvDtype::kF32);
  KvCache(const ModelConfig& config, const KvCacheOptions& options);

  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  KvDtype dtype() const { return dtype_; }
  // Elements between one head's keys (values) in a block and the next's.
  int head_stride() const { return block_tokens_ * head_dim_; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  int capacity() const { return capacity_; }  // Positions one slot can hold.
  int block_tokens() const { return block_tokens_; }
  int num_blocks() const { return pool_.num_blocks(); }
  int length(int slot) const { return slots_[slot].length; }

  // Blocks a sequence of `tokens` positions occupies.
  int BlocksFor(int tokens) const { return pool_.BlocksFor(tokens); }
  // Blocks that Reserve can still take: free ones and cached ones (evicted
  // on demand).
  int AvailableBlocks() const { return pool_.available(); }
  KvBlockCounts CountBlocks() const { return pool_.Counts(); }
  // The pool's bookkeeping, read-only (for tests and metrics).
  const BlockPool& pool() const { return pool_; }

  // Makes `slot` able to hold `tokens` positions, taking blocks from the pool
  // (free ones first, then the least recently used cached ones).
  // RESOURCE_EXHAUSTED, with nothing taken, if the pool has too few;
  // OUT_OF_RANGE past capacity().
  absl::Status Reserve(int slot, int tokens);

  // Forgets the contents of `slot` and gives its blocks back: published ones
  // stay cached once no slot holds them, the others are free.
  void Clear(int slot);
  // Keeps the first `length` positions of `slot` (for rollback); length ≤
  // length(slot). Blocks wholly past them go back to the pool. A shared or
  // published block that would be written again is first replaced by a
  // private copy (if the pool has a block for it; else the decoder refuses
  // the write).
  void Truncate(int slot, int length);
  // Forgets positions `length` .. length(slot) - 1 of `slot` but keeps its
  // blocks: speculative decoding's rejected proposals, whose blocks were
  // reserved for the sequence and which the next forward pass overwrites.
  // Precondition: length ≤ length(slot), and the forgotten positions are
  // Writable (this slot's own, never published).
  void Rewind(int slot, int length);

  // On an empty `slot`: attaches the cached blocks that hold the longest run
  // of whole blocks of `prompt` from its start, stopping short of the last
  // token (it must still be computed, for its logits), published with
  // `salt` (the prefix cache's partition: BlockPool); the slot's length
  // becomes their end. Returns that length (0 on a miss). The blocks are
  // taken off the LRU list, so they cannot be evicted while the slot holds
  // them.
  int AttachPrefix(int slot, absl::Span<const int> prompt,
                   absl::string_view salt = {});
  // How many positions AttachPrefix would attach, and how many of those
  // blocks are cached (held by no slot, so counted in AvailableBlocks).
  struct PrefixMatch {
    int tokens = 0;
    int idle_blocks = 0;
  };
  PrefixMatch MatchPrefix(absl::Span<const int> prompt,
                          absl::string_view salt = {}) const;

  // Publishes each full block of `slot` within its first length(slot)
  // positions whose tokens are all in `tokens` (tokens[p] is position p's
  // token: the prompt) under `salt`, unless an equal block is already
  // published.
  void Publish(int slot, absl::Span<const int> tokens,
               absl::string_view salt = {});

  // Whether `slot` may write position `position`: its block is held by this
  // slot alone and not published. The decoder checks it before every write.
  bool Writable(int slot, int position) const;

  // Stores the key and value of `position` of `slot` in `layer` (kv_width
  // floats each), in dtype() (bf16: rounded to nearest, ties to even). The
  // position's block must be reserved (and Writable, for the decoder).
  void WriteRow(int slot, int layer, int position, const float* key,
                const float* value);
  // The key and value of `position` as stored, widened to floats (exactly
  // what attention reads).
  void ReadRow(int slot, int layer, int position, float* key,
               float* value) const;
  // The keys (values) of block `i` of `slot`'s table in `layer`, as stored:
  // [n_kv_heads, block_tokens, head_dim] row-major (head h's keys start at
  // h × head_stride(), one position every head_dim elements). Element is
  // float for kF32 and uint16_t (bf16 bits) for kBf16; the other is a null
  // pointer.
  template <typename Element>
  const Element* block_keys(int slot, int layer, int i) const;
  template <typename Element>
  const Element* block_values(int slot, int layer, int i) const;
  // Block ids of `slot`'s table (for tests and metrics).
  const std::vector<int>& block_table(int slot) const {
    return slots_[slot].table;
  }
  // Slots holding block `b` (for tests).
  int references(int b) const { return pool_.references(b); }
  bool published(int b) const { return pool_.published(b); }

  // Called by the decoder once a forward pass has written `n` new rows in
  // every layer.
  void Advance(int slot, int n) { slots_[slot].length += n; }

  // Encoder–decoder models: positions of `slot`'s source (0: none yet).
  int source_length(int slot) const { return slots_[slot].source_length; }
  // Gives `slot` room for the cross-attention keys and values of a source of
  // `length` positions (every layer) and sets source_length. The decoder's
  // Encode calls it on an empty slot, then fills the rows.
  void SetSource(int slot, int length);
  // [source_length, d_model] row-major: the source's keys (values) for the
  // cross-attention of decoder layer `layer`.
  float* cross_keys(int slot, int layer) {
    return slots_[slot].cross_keys[layer].data();
  }
  float* cross_values(int slot, int layer) {
    return slots_[slot].cross_values[layer].data();
  }
  const float* cross_keys(int slot, int layer) const {
    return slots_[slot].cross_keys[layer].data();
  }
  const float* cross_values(int slot, int layer) const {
    return slots_[slot].cross_values[layer].data();
  }

  // Bytes held by the pool and the slots' cross-attention keys and values.
  size_t MemoryBytes() const;

 private:
  struct Slot {
    int length = 0;
    std::vector<int> table;
    int source_length = 0;
    std::vector<Activations> cross_keys;    // [layer]: [source, d_model]
    std::vector<Activations> cross_values;  // [layer]
  };

  size_t Row(int block, int position) const {
    return static_cast<size_t>(block) * block_tokens_ +
           position % block_tokens_;
  }

  // Where block `block` begins in a layer's array.
  size_t BlockOffset(int block) const { return Row(block, 0) * kv_width_; }
  // Where `position` of `slot` begins in its layer's array: head 0's element
  // 0 (head h's is head_stride() × h further).
  size_t Offset(int slot, int position) const {
    return BlockOffset(slots_[slot].table[position / block_tokens_]) +
           static_cast<size_t>(position % block_tokens_) * head_dim_;
  }
  // Block i of `slot`'s table in `arrays[layer]` (keys_, values_ or their
  // bf16 pair).
  template <typename Array>
  auto BlockStart(const std::vector<Array>& arrays, int slot, int layer,
                  int i) const {
    return arrays[layer].data() + BlockOffset(slots_[slot].table[i]);
  }

  KvDtype dtype_;
  int capacity_;
  int block_tokens_;
  int n_layers_;
  int kv_width_;
  int head_dim_;
  int n_kv_heads_;
  int cross_width_;  // d_model
  std::vector<Slot> slots_;
  BlockPool pool_;
  // [layer]: [blocks × block_tokens, kv_width] row-major, on huge pages
  // (base/huge_pages.h: batched decoding streams them every step); the f32
  // pair or the bf16 pair, as dtype_ says (the other is empty).
  std::vector<StreamedVector<float>> keys_;
  std::vector<StreamedVector<float>> values_;
  std::vector<StreamedVector<uint16_t>> keys_bf16_;
  std::vector<StreamedVector<uint16_t>> values_bf16_;
};

template <>
inline const float* KvCache::block_keys<float>(int slot, int layer,
                                               int i) const {
  return dtype_ == KvDtype::kF32 ? BlockStart(keys_, slot, layer, i) : nullptr;
}
template <>
inline const float* KvCache::block_values<float>(int slot, int layer,
                                                 int i) const {
  return dtype_ == KvDtype::kF32 ? BlockStart(values_, slot, layer, i)
                                 : nullptr;
}
template <>
inline const uint16_t* KvCache::block_keys<uint16_t>(int slot, int layer,
                                                     int i) const {
  return dtype_ == KvDtype::kBf16 ? BlockStart(keys_bf16_, slot, layer, i)
                                  : nullptr;
}
template <>
inline const uint16_t* KvCache::block_values<uint16_t>(int slot, int layer,
                                                       int i) const {
  return dtype_ == KvDtype::kBf16 ? BlockStart(values_bf16_, slot, layer, i)
                                  : nullptr;
}

}  // namespace textgen

#endif  // TEXTGEN_MODEL_KV_CACHE_H_
