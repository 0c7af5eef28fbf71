#include "model/kv_cache.h"

#include <algorithm>
#include <cassert>

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

// The pool's size: options.num_blocks, or enough for every slot to hold a
// whole context.
int PoolBlocks(const ModelConfig& config, const KvCacheOptions& options) {
  if (options.num_blocks > 0) return options.num_blocks;
  const int block_tokens = std::max(1, options.block_tokens);
  return options.num_slots *
         ((config.context_length + block_tokens - 1) / block_tokens);
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
      slots_(options.num_slots),
      pool_(PoolBlocks(config, options), block_tokens_) {
  const size_t elements =
      static_cast<size_t>(num_blocks()) * block_tokens_ * kv_width_;
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
  for (int i = 0; i < needed; ++i) s.table.push_back(pool_.Take());
  return absl::OkStatus();
}

void KvCache::Clear(int slot) {
  Slot& s = slots_[slot];
  for (int b : s.table) pool_.Release(b);
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

void KvCache::Rewind(int slot, int length) {
  Slot& s = slots_[slot];
  assert(length >= 0 && length <= s.length);
  assert(length == s.length || Writable(slot, length));
  s.length = length;
}

void KvCache::Truncate(int slot, int length) {
  Slot& s = slots_[slot];
  assert(length >= 0 && length <= s.length);
  s.length = length;
  const int keep = BlocksFor(length);
  for (int i = keep; i < static_cast<int>(s.table.size()); ++i) {
    pool_.Release(s.table[i]);
  }
  s.table.resize(keep);
  // The block the next write lands in, if partly kept, must be this slot's
  // alone: copy a shared or published one (if the pool has no block for the
  // copy, the decoder refuses the write instead).
  if (length % block_tokens_ != 0 && !Writable(slot, length) &&
      AvailableBlocks() > 0) {
    const int old = s.table[keep - 1];
    const int copy = pool_.Take();
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
    pool_.Release(old);
    s.table[keep - 1] = copy;
  }
}

KvCache::PrefixMatch KvCache::MatchPrefix(absl::Span<const int> prompt,
                                          absl::string_view salt) const {
  PrefixMatch match;
  for (int b : pool_.Match(prompt, salt)) {
    match.tokens += block_tokens_;
    if (pool_.references(b) == 0) ++match.idle_blocks;
  }
  return match;
}

int KvCache::AttachPrefix(int slot, absl::Span<const int> prompt,
                          absl::string_view salt) {
  Slot& s = slots_[slot];
  assert(s.length == 0 && s.table.empty());
  for (int b : pool_.Match(prompt, salt)) {
    pool_.Share(b);
    s.table.push_back(b);
    s.length += block_tokens_;
  }
  return s.length;
}

void KvCache::Publish(int slot, absl::Span<const int> tokens,
                      absl::string_view salt) {
  const Slot& s = slots_[slot];
  pool_.Publish(s.table,
                tokens.first(std::min<size_t>(s.length, tokens.size())), salt);
}

bool KvCache::Writable(int slot, int position) const {
  const Slot& s = slots_[slot];
  const size_t i = position / block_tokens_;
  if (i >= s.table.size()) return false;
  return pool_.Writable(s.table[i]);
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
