#include "model/block_pool.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace textgen {

BlockPool::BlockPool(int num_blocks, int block_tokens)
    : block_tokens_(std::max(1, block_tokens)), blocks_(num_blocks) {
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

KvBlockCounts BlockPool::Counts() const {
  KvBlockCounts counts;
  counts.total = num_blocks();
  counts.free = static_cast<int>(free_.size());
  counts.cached = static_cast<int>(lru_.size());
  counts.used = counts.total - counts.free - counts.cached;
  return counts;
}

int BlockPool::Take() {
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

void BlockPool::Share(int b) {
  Block& block = blocks_[b];
  assert(block.published);
  if (block.refs++ == 0) lru_.erase(block.lru);
}

void BlockPool::Release(int b) {
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

void BlockPool::Unpublish(int b) {
  Block& block = blocks_[b];
  auto [first, last] = published_.equal_range(block.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == b) {
      published_.erase(it);
      break;
    }
  }
  block.published = false;
  block.salt.clear();
  block.salt.shrink_to_fit();
  block.prefix.clear();
  block.prefix.shrink_to_fit();
}

uint64_t BlockPool::ChainHash(uint64_t previous, absl::Span<const int> tokens) {
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

uint64_t BlockPool::SaltHash(absl::string_view salt) {
  if (salt.empty()) return 0;
  // FNV-1a over the bytes, then the same finish as the chain (through
  // ChainHash of no tokens), so that the salt's bits reach every bit of the
  // first block's hash.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : salt) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return ChainHash(h, {});
}

int BlockPool::Find(uint64_t hash, absl::string_view salt,
                    absl::Span<const int> prefix) const {
  auto [first, last] = published_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const Block& block = blocks_[it->second];
    if (block.salt == salt && absl::MakeConstSpan(block.prefix) == prefix) {
      return it->second;
    }
  }
  return -1;
}

std::vector<int> BlockPool::Match(absl::Span<const int> prompt,
                                  absl::string_view salt) const {
  std::vector<int> blocks;
  if (published_.empty() || prompt.empty()) return blocks;
  const int max_blocks = static_cast<int>(prompt.size() - 1) / block_tokens_;
  uint64_t hash = SaltHash(salt);
  for (int i = 0; i < max_blocks; ++i) {
    const int end = (i + 1) * block_tokens_;
    hash = ChainHash(hash, prompt.subspan(end - block_tokens_, block_tokens_));
    const int b = Find(hash, salt, prompt.first(end));
    if (b < 0) break;
    blocks.push_back(b);
  }
  return blocks;
}

void BlockPool::Publish(absl::Span<const int> table,
                        absl::Span<const int> tokens, absl::string_view salt) {
  const int full = std::min<int>(table.size(), tokens.size() / block_tokens_);
  uint64_t hash = SaltHash(salt);
  for (int i = 0; i < full; ++i) {
    const int end = (i + 1) * block_tokens_;
    Block& block = blocks_[table[i]];
    if (block.published) {
      // Found under this salt, so its chain goes on from here; a block of
      // another partition (a misuse) ends what this call may publish.
      if (block.salt != salt) return;
      hash = block.hash;
      continue;
    }
    hash = ChainHash(hash, tokens.subspan(end - block_tokens_, block_tokens_));
    // An equal block published by another sequence first: this one stays
    // private (and later blocks can still be published after it).
    if (Find(hash, salt, tokens.first(end)) >= 0) continue;
    block.published = true;
    block.hash = hash;
    block.salt.assign(salt.data(), salt.size());
    block.prefix.assign(tokens.begin(), tokens.begin() + end);
    published_.emplace(hash, table[i]);
  }
}

}  // namespace textgen
