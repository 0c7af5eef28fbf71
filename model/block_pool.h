// The bookkeeping of a paged KV cache's blocks, and nothing else: which block
// is free, how many holders each has, which full blocks are published under
// their prefix for the prefix cache, and the order in which cached ones are
// evicted. It knows no keys, values, element types or tensors (vLLM v1's
// BlockPool under its KV cache manager): KvCache (model/kv_cache.h) holds the
// storage and the per-sequence block tables and asks a BlockPool which block
// to use; tests drive a pool alone.
//
// A block is in one of three states:
//   free     no holder, no content worth keeping;
//   used     one or more holders (references() > 0);
//   cached   published, no holder: its content is kept for a later prompt
//            with the same prefix until the pool needs the block (LRU).
// Take() hands out free blocks first (lowest id first), then evicts the least
// recently released cached one.
//
// Prefix caching. A published block is keyed by its whole prefix: the tokens
// of positions 0 .. its end. Keys are a hash chain over the blocks, but a
// match also compares the stored prefix tokens, so a hash collision is a miss,
// never a wrong block. A published block is read-only (Writable() is false):
// it may be shared, and a later sequence reads it as it is.
//
// Partitions. Match and Publish take a salt (vLLM's cache_salt): a block is
// found only by a lookup with the salt it was published with. The salt is
// folded into the first block's hash, so the whole chain differs, and it is
// stored and compared with the prefix, so not even a hash collision crosses
// partitions. The server salts with the caller's token when it has tokens,
// so that one client cannot learn from its own hits whether another sent a
// text; the empty salt is the one shared partition.
//
// Not thread-safe: one thread (the engine's) uses a pool. Block ids are
// 0 .. num_blocks() - 1; passing any other id is a bug (assert), as is
// releasing a block that has no holder.
#ifndef TEXTGEN_MODEL_BLOCK_POOL_H_
#define TEXTGEN_MODEL_BLOCK_POOL_H_

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace textgen {

// Block counts by state, for metrics. used + cached + free = total.
struct KvBlockCounts {
  int total = 0;
  int used = 0;    // Held by at least one sequence.
  int cached = 0;  // Published, held by none: reusable until evicted.
  int free = 0;
};

class BlockPool {
 public:
  // `num_blocks` free blocks of `block_tokens` positions each (both >= 1).
  BlockPool(int num_blocks, int block_tokens);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_tokens() const { return block_tokens_; }
  // Blocks a sequence of `tokens` positions occupies.
  int BlocksFor(int tokens) const {
    return (tokens + block_tokens_ - 1) / block_tokens_;
  }
  // Blocks Take() can still hand out: free ones and cached ones.
  int available() const { return static_cast<int>(free_.size() + lru_.size()); }
  KvBlockCounts Counts() const;

  // One block with a single holder: a free one (lowest id first), else the
  // least recently released cached one, which is unpublished (its prefix is
  // forgotten). The caller must have checked available() > 0.
  int Take();
  // Adds a holder to block `b`, which must be published (a prefix-cache hit);
  // a cached block leaves the LRU list, so it cannot be evicted while held.
  void Share(int b);
  // Drops a holder of `b`. With none left, a published block is cached (the
  // most recently released, so evicted last), any other is free.
  void Release(int b);

  int references(int b) const { return blocks_[b].refs; }
  bool published(int b) const { return blocks_[b].published; }
  // Whether the one holder of `b` may write into it: it is held once and not
  // published.
  bool Writable(int b) const {
    return blocks_[b].refs == 1 && !blocks_[b].published;
  }

  // The published blocks holding the longest run of whole blocks of `prompt`
  // from its start, in order, stopping short of the last token (its block
  // must still be computed, for its logits), published with `salt`. Nothing
  // is taken or shared.
  std::vector<int> Match(absl::Span<const int> prompt,
                         absl::string_view salt = {}) const;
  // Publishes table[i] under `salt` and the prefix tokens[0, (i + 1) ×
  // block_tokens) for every block that `tokens` covers whole, unless it
  // already is, or an equal block (same salt and prefix) already is: that
  // one stays the cached copy and table[i] stays private, while later blocks
  // of `table` can still be published. `table` is one sequence's blocks in
  // position order; tokens[p] is position p's token. A block of `table`
  // already published was found by Match with the same salt (or published
  // by this sequence), so it stays as it is.
  void Publish(absl::Span<const int> table, absl::Span<const int> tokens,
               absl::string_view salt = {});

 private:
  struct Block {
    int refs = 0;
    bool published = false;
    uint64_t hash = 0;
    std::string salt;         // Published: its partition.
    std::vector<int> prefix;  // Published: tokens of positions 0 .. its end.
    std::list<int>::iterator lru;  // Valid when cached.
  };

  void Unpublish(int b);
  // The hash of a block's prefix: `previous` (the block before's hash; for
  // the first, SaltHash(salt)) folded with the block's tokens.
  static uint64_t ChainHash(uint64_t previous, absl::Span<const int> tokens);
  // What the first block's hash starts from: 0 for the empty salt (the
  // shared partition), else a hash of the salt's bytes.
  static uint64_t SaltHash(absl::string_view salt);
  // The published block holding exactly `prefix` under `salt`, or -1.
  int Find(uint64_t hash, absl::string_view salt,
           absl::Span<const int> prefix) const;

  const int block_tokens_;
  std::vector<Block> blocks_;
  std::vector<int> free_;  // A stack: low ids on top.
  std::list<int> lru_;     // Cached blocks, least recently released first.
  std::unordered_multimap<uint64_t, int> published_;  // hash -> block
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_BLOCK_POOL_H_
