#include "model/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "model/kernels/kernels.h"

namespace textgen {

namespace {

KvCacheOptions WholeContextSlots(int num_slots, KvDtype dtype) {
  KvCacheOptions options;
  options.num_slots = num_slots;
  options.dtype = dtype;
  return options;
}

}  // namespace

absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV-cache dtype \"", name, "\" (f32 or bf16)"));
}

const char* KvDtypeName(KvDtype dtype) {
  return dtype == KvDtype::kBf16 ? "bf16" : "f32";
}

size_t KvDtypeBytes(KvDtype dtype) {
  return dtype == KvDtype::kBf16 ? sizeof(uint16_t) : sizeof(float);
}

KvCache::KvCache(const ModelConfig& config, int num_slots, KvDtype dtype)
    : KvCache(config, WholeContextSlots(num_slots, dtype)) {}

KvCache::KvCache(const ModelConfig& config, const KvCacheOptions& options)
    : dtype_(options.dtype),
      capacity_(config.context_length),
      block_tokens_(std::max(1, options.block_tokens)),
      n_layers_(config.n_layers),
      kv_width_(config.n_kv_heads * config.head_dim()),
      head_dim_(config.head_dim()),
      n_kv_heads_(config.n_kv_heads),
      cross_width_(config.d_model),
      slots_(options.num_slots) {
  const int num_blocks = options.num_blocks > 0
                             ? options.num_blocks
                             : options.num_slots * BlocksFor(capacity_);
  blocks_.resize(num_blocks);
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  const size_t elements =
      static_cast<size_t>(num_blocks) * block_tokens_ * kv_width_;
  // Uninitialized (StreamedVector does not fill): pages are touched as blocks
  // are first written.
  for (int l = 0; l < n_layers_; ++l) {
    if (dtype_ == KvDtype::kBf16) {
      keys_bf16_.emplace_back(elements);
      values_bf16_.emplace_back(elements);
    } else {
      keys_.emplace_back(elements);
      values_.emplace_back(elements);
    }
  }
}

KvBlockCounts KvCache::CountBlocks() const {
  KvBlockCounts counts;
  counts.total = num_blocks();
  counts.free = static_cast<int>(free_.size());
  counts.cached = static_cast<int>(lru_.size());
  counts.used = counts.total - counts.free - counts.cached;
  return counts;
}

absl::Status KvCache::Reserve(int slot, int tokens) {
  if (tokens > capacity_) {
    return absl::OutOfRangeError(absl::StrCat(
        tokens, " positions exceed the context length ", capacity_));
  }
  Slot& s = slots_[slot];
  const int needed = BlocksFor(tokens) - static_cast<int>(s.table.size());
  if (needed <= 0) return absl::OkStatus();
  if (needed > AvailableBlocks()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the KV cache needs ", needed, " more blocks of ",
                     block_tokens_, " positions but has ", AvailableBlocks(),
                     " available of ", num_blocks()));
  }
  for (int i = 0; i < needed; ++i) s.table.push_back(TakeBlock());
  return absl::OkStatus();
}

int KvCache::TakeBlock() {
  int b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    assert(!lru_.empty());
    b = lru_.front();
    lru_.pop_front();
    Unpublish(b);
  }
  blocks_[b].refs = 1;
  return b;
}

void KvCache::Release(int b) {
  Block& block = blocks_[b];
  assert(block.refs > 0);
  if (--block.refs > 0) return;
  if (block.published) {
    lru_.push_back(b);
    block.lru = std::prev(lru_.end());
  } else {
    free_.push_back(b);
  }
}

void KvCache::Unpublish(int b) {
  Block& block = blocks_[b];
  auto [first, last] = published_.equal_range(block.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == b) {
      published_.erase(it);
      break;
    }
  }
  block.published = false;
  block.prefix.clear();
  block.prefix.shrink_to_fit();
}

void KvCache::Clear(int slot) {
  Slot& s = slots_[slot];
  for (int b : s.table) Release(b);
  s.table.clear();
  s.length = 0;
  s.source_length = 0;
  s.cross_keys.clear();
  s.cross_values.clear();
}

void KvCache::SetSource(int slot, int length) {
  Slot& s = slots_[slot];
  s.source_length = length;
  s.cross_keys.assign(n_layers_, Activations(length, cross_width_));
  s.cross_values.assign(n_layers_, Activations(length, cross_width_));
}

void KvCache::Truncate(int slot, int length) {
  Slot& s = slots_[slot];
  assert(length >= 0 && length <= s.length);
  s.length = length;
  const int keep = BlocksFor(length);
  for (int i = keep; i < static_cast<int>(s.table.size()); ++i) {
    Release(s.table[i]);
  }
  s.table.resize(keep);
  // The block the next write lands in, if partly kept, must be this slot's
  // alone: copy a shared or published one (if the pool has no block for the
  // copy, the decoder refuses the write instead).
  if (length % block_tokens_ != 0 && !Writable(slot, length) &&
      AvailableBlocks() > 0) {
    const int old = s.table[keep - 1];
    const int copy = TakeBlock();
    const size_t elements = static_cast<size_t>(block_tokens_) * kv_width_;
    auto copy_block = [&](auto& rows) {
      for (auto& m : rows) {
        std::copy_n(m.data() + BlockOffset(old), elements,
                    m.data() + BlockOffset(copy));
      }
    };
    copy_block(keys_);
    copy_block(values_);
    copy_block(keys_bf16_);
    copy_block(values_bf16_);
    Release(old);
    s.table[keep - 1] = copy;
  }
}

uint64_t KvCache::ChainHash(uint64_t previous, absl::Span<const int> tokens) {
  // FNV-1a over the previous hash and the tokens, then a splitmix64 finish.
  uint64_t h = 0xcbf29ce484222325ull ^ previous;
  for (int t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

int KvCache::Find(uint64_t hash, absl::Span<const int> prefix) const {
  auto [first, last] = published_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const std::vector<int>& stored = blocks_[it->second].prefix;
    if (absl::MakeConstSpan(stored) == prefix) return it->second;
  }
  return -1;
}

std::vector<int> KvCache::MatchingBlocks(absl::Span<const int> prompt) const {
  std::vector<int> blocks;
  if (published_.empty() || prompt.empty()) return blocks;
  const int max_blocks = static_cast<int>(prompt.size() - 1) / block_tokens_;
  uint64_t hash = 0;
  for (int i = 0; i < max_blocks; ++i) {
    const int end = (i + 1) * block_tokens_;
    hash = ChainHash(hash, prompt.subspan(end - block_tokens_, block_tokens_));
    const int b = Find(hash, prompt.first(end));
    if (b < 0) break;
    blocks.push_back(b);
  }
  return blocks;
}

KvCache::PrefixMatch KvCache::MatchPrefix(absl::Span<const int> prompt) const {
  PrefixMatch match;
  for (int b : MatchingBlocks(prompt)) {
    match.tokens += block_tokens_;
    if (blocks_[b].refs == 0) ++match.idle_blocks;
  }
  return match;
}

int KvCache::AttachPrefix(int slot, absl::Span<const int> prompt) {
  Slot& s = slots_[slot];
  assert(s.length == 0 && s.table.empty());
  for (int b : MatchingBlocks(prompt)) {
    Block& block = blocks_[b];
    if (block.refs++ == 0) lru_.erase(block.lru);
    s.table.push_back(b);
    s.length += block_tokens_;
  }
  return s.length;
}

void KvCache::Publish(int slot, absl::Span<const int> tokens) {
  const Slot& s = slots_[slot];
  const int full = std::min<int>(s.length, tokens.size()) / block_tokens_;
  uint64_t hash = 0;
  for (int i = 0; i < full; ++i) {
    const int end = (i + 1) * block_tokens_;
    Block& block = blocks_[s.table[i]];
    if (block.published) {
      hash = block.hash;
      continue;
    }
    hash = ChainHash(hash, tokens.subspan(end - block_tokens_, block_tokens_));
    // An equal block published by another slot first: this one stays
    // private (and later blocks can still be published after it).
    if (Find(hash, tokens.first(end)) >= 0) continue;
    block.published = true;
    block.hash = hash;
    block.prefix.assign(tokens.begin(), tokens.begin() + end);
    published_.emplace(hash, s.table[i]);
  }
}

bool KvCache::Writable(int slot, int position) const {
  const Slot& s = slots_[slot];
  const size_t i = position / block_tokens_;
  if (i >= s.table.size()) return false;
  const Block& block = blocks_[s.table[i]];
  return block.refs == 1 && !block.published;
}

void KvCache::WriteRow(int slot, int layer, int position, const float* key,
                       const float* value) {
  const size_t at = Offset(slot, position);
  for (int h = 0; h < n_kv_heads_; ++h) {
    const size_t to = at + static_cast<size_t>(h) * head_stride();
    const size_t from = static_cast<size_t>(h) * head_dim_;
    if (dtype_ == KvDtype::kBf16) {
      kernels::RoundToBf16(key + from, head_dim_,
                           keys_bf16_[layer].data() + to);
      kernels::RoundToBf16(value + from, head_dim_,
                           values_bf16_[layer].data() + to);
    } else {
      std::copy_n(key + from, head_dim_, keys_[layer].data() + to);
      std::copy_n(value + from, head_dim_, values_[layer].data() + to);
    }
  }
}

void KvCache::ReadRow(int slot, int layer, int position, float* key,
                      float* value) const {
  const size_t at = Offset(slot, position);
  for (int h = 0; h < n_kv_heads_; ++h) {
    const size_t from = at + static_cast<size_t>(h) * head_stride();
    const size_t to = static_cast<size_t>(h) * head_dim_;
    if (dtype_ == KvDtype::kBf16) {
      const uint16_t* k = keys_bf16_[layer].data() + from;
      const uint16_t* v = values_bf16_[layer].data() + from;
      for (int d = 0; d < head_dim_; ++d) {
        key[to + d] = kernels::Bf16ToFloat(k[d]);
        value[to + d] = kernels::Bf16ToFloat(v[d]);
      }
    } else {
      std::copy_n(keys_[layer].data() + from, head_dim_, key + to);
      std::copy_n(values_[layer].data() + from, head_dim_, value + to);
    }
  }
}

size_t KvCache::MemoryBytes() const {
  size_t bytes = 0;
  for (const auto& m : keys_) bytes += m.size() * sizeof(float);
  for (const auto& m : values_) bytes += m.size() * sizeof(float);
  for (const auto& m : keys_bf16_) bytes += m.size() * sizeof(uint16_t);
  for (const auto& m : values_bf16_) bytes += m.size() * sizeof(uint16_t);
  for (const Slot& s : slots_) {
    bytes += 2 * s.cross_keys.size() * static_cast<size_t>(s.source_length) *
             cross_width_ * sizeof(float);
  }
  return bytes;
}

}  // namespace textgen
