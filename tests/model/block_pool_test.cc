// The KV cache's block bookkeeping alone (model/block_pool.h), without a
// tensor: blocks handed out lowest id first and given back, holders counted,
// full blocks published under their whole prefix (and salt) and found only by
// it, cached blocks evicted least recently released first, and an exhausted
// pool. What the blocks hold is tests/model/kv_cache_test.cc's business.
#include "model/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace textgen {
namespace {

std::vector<int> Iota(int n, int first = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Takes `n` blocks: a sequence's table.
std::vector<int> TakeN(BlockPool& pool, int n) {
  std::vector<int> table;
  for (int i = 0; i < n; ++i) table.push_back(pool.Take());
  return table;
}

void ReleaseAll(BlockPool& pool, const std::vector<int>& table) {
  for (int b : table) pool.Release(b);
}

void ExpectCounts(const BlockPool& pool, int used, int cached, int free) {
  const KvBlockCounts c = pool.Counts();
  EXPECT_EQ(c.total, pool.num_blocks());
  EXPECT_EQ(c.used, used);
  EXPECT_EQ(c.cached, cached);
  EXPECT_EQ(c.free, free);
  EXPECT_EQ(pool.available(), cached + free);
}

TEST(BlockPoolTest, HandsOutLowIdsFirstAndTakesThemBack) {
  BlockPool pool(4, 16);
  EXPECT_EQ(pool.num_blocks(), 4);
  EXPECT_EQ(pool.block_tokens(), 16);
  EXPECT_EQ(pool.BlocksFor(0), 0);
  EXPECT_EQ(pool.BlocksFor(1), 1);
  EXPECT_EQ(pool.BlocksFor(16), 1);
  EXPECT_EQ(pool.BlocksFor(17), 2);
  ExpectCounts(pool, 0, 0, 4);

  EXPECT_EQ(TakeN(pool, 3), (std::vector<int>{0, 1, 2}));
  ExpectCounts(pool, 3, 0, 1);
  EXPECT_EQ(pool.references(1), 1);
  EXPECT_TRUE(pool.Writable(1));
  pool.Release(1);
  ExpectCounts(pool, 2, 0, 2);
  EXPECT_EQ(pool.references(1), 0);
  // A freed block is reused before a never-used one (a stack).
  EXPECT_EQ(pool.Take(), 1);
  EXPECT_EQ(pool.Take(), 3);
  ExpectCounts(pool, 4, 0, 0);
  ReleaseAll(pool, {0, 1, 2, 3});
  ExpectCounts(pool, 0, 0, 4);
}

TEST(BlockPoolTest, PublishedBlocksAreSharedByReferenceAndReadOnly) {
  BlockPool pool(6, 4);
  const std::vector<int> prompt = Iota(10);  // Blocks [0,4) [4,8), tail 2.
  const std::vector<int> table = TakeN(pool, 3);
  pool.Publish(table, prompt);
  EXPECT_TRUE(pool.published(table[0]));
  EXPECT_TRUE(pool.published(table[1]));
  EXPECT_FALSE(pool.published(table[2])) << "partial block";
  EXPECT_FALSE(pool.Writable(table[0])) << "published: read-only";
  EXPECT_TRUE(pool.Writable(table[2]));

  // A second prompt with the same first 8 tokens shares both blocks.
  std::vector<int> same = Iota(8);
  same.push_back(99);
  const std::vector<int> hit = pool.Match(same);
  EXPECT_EQ(hit, (std::vector<int>{table[0], table[1]}));
  for (int b : hit) pool.Share(b);
  EXPECT_EQ(pool.references(table[0]), 2);
  ExpectCounts(pool, 3, 0, 3);

  // The first holder lets go: the blocks stay used by the second; then
  // cached, not free, once nobody holds them.
  ReleaseAll(pool, table);
  ExpectCounts(pool, 2, 0, 4);
  ReleaseAll(pool, hit);
  ExpectCounts(pool, 0, 2, 4);
  EXPECT_EQ(pool.Match(same), hit) << "cached blocks are still found";
}

TEST(BlockPoolTest, AMatchNeedsTheWholePrefixAndLeavesTheLastToken) {
  BlockPool pool(4, 4);
  const std::vector<int> table = TakeN(pool, 2);
  pool.Publish(table, Iota(8));

  // Misses: nothing published matches a different first block, even when
  // the second block's own tokens are the same.
  std::vector<int> other = Iota(10);
  other[0] = 50;
  EXPECT_TRUE(pool.Match(other).empty());
  EXPECT_TRUE(pool.Match({}).empty());
  // The last prompt token's block is never matched: its logits must be
  // computed. 8 tokens match one block, 9 match two.
  EXPECT_EQ(pool.Match(Iota(8)).size(), 1u);
  EXPECT_EQ(pool.Match(Iota(9)).size(), 2u);
  EXPECT_EQ(pool.Match(Iota(4)).size(), 0u);
  // A run stops at the first block that differs.
  std::vector<int> diverges = Iota(12);
  diverges[5] = 77;
  EXPECT_EQ(pool.Match(diverges), (std::vector<int>{table[0]}));
  ReleaseAll(pool, table);
}

TEST(BlockPoolTest, AnEqualBlockPublishedTwiceKeepsTheFirst) {
  BlockPool pool(8, 4);
  const std::vector<int> first = TakeN(pool, 2);
  const std::vector<int> second = TakeN(pool, 2);
  pool.Publish(first, Iota(5));
  pool.Publish(second, Iota(5));
  EXPECT_TRUE(pool.published(first[0]));
  EXPECT_FALSE(pool.published(second[0]));
  EXPECT_TRUE(pool.Writable(second[0])) << "stays private";
  // Publishing again is a no-op.
  pool.Publish(first, Iota(5));
  ReleaseAll(pool, first);
  ReleaseAll(pool, second);
  ExpectCounts(pool, 0, 1, 7);
}

TEST(BlockPoolTest, ASaltPartitionsTheCache) {
  BlockPool pool(8, 4);
  const std::vector<int> prompt = Iota(9);  // Two full blocks, then one.
  const std::vector<int> a = TakeN(pool, 2);
  pool.Publish(a, prompt, "client a");
  ASSERT_TRUE(pool.published(a[0]) && pool.published(a[1]));

  // The same prefix under the same salt: a hit. Under another salt, or none
  // (the shared partition): a miss, though the tokens are the same.
  EXPECT_EQ(pool.Match(prompt, "client a"), a);
  EXPECT_TRUE(pool.Match(prompt, "client b").empty());
  EXPECT_TRUE(pool.Match(prompt).empty());
  EXPECT_TRUE(pool.Match(prompt, "client a ").empty()) << "whole salt";

  // Client b computes the same prefix and publishes its own copy: not an
  // equal block (another partition), so both stay published, each found
  // only by its own salt.
  const std::vector<int> b = TakeN(pool, 2);
  pool.Publish(b, prompt, "client b");
  EXPECT_TRUE(pool.published(b[0]) && pool.published(b[1]));
  EXPECT_EQ(pool.Match(prompt, "client b"), b);
  EXPECT_EQ(pool.Match(prompt, "client a"), a);
  // Unsalted blocks are found only unsalted.
  const std::vector<int> shared = TakeN(pool, 2);
  pool.Publish(shared, prompt);
  EXPECT_EQ(pool.Match(prompt), shared);
  EXPECT_EQ(pool.Match(prompt, "client a"), a);

  ReleaseAll(pool, a);
  ReleaseAll(pool, b);
  ReleaseAll(pool, shared);
  ExpectCounts(pool, 0, 6, 2);
  // Evicted blocks forget their salt with their prefix.
  for (int i = 0; i < 8; ++i) pool.Take();
  EXPECT_TRUE(pool.Match(prompt, "client a").empty());
  EXPECT_TRUE(pool.Match(prompt, "client b").empty());
}

TEST(BlockPoolTest, CachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  BlockPool pool(3, 2);
  // Three one-block prompts, published and released in the order a, b, c.
  std::vector<int> a = {1, 2, 0}, b = {3, 4, 0}, c = {5, 6, 0};
  std::vector<int> blocks;
  for (const std::vector<int>* prompt : {&a, &b, &c}) {
    const int block = pool.Take();
    pool.Publish({block}, *prompt);
    blocks.push_back(block);
  }
  for (int block : blocks) pool.Release(block);
  ExpectCounts(pool, 0, 3, 0);

  // A hit on `a` takes it off the LRU list while held; released again it
  // is the most recent, so b goes first, then c, then a.
  ASSERT_EQ(pool.Match(a).size(), 1u);
  pool.Share(blocks[0]);
  ExpectCounts(pool, 1, 2, 0);
  pool.Release(blocks[0]);

  EXPECT_EQ(pool.Take(), blocks[1]);
  EXPECT_TRUE(pool.Match(b).empty()) << "evicted: its prefix is forgotten";
  EXPECT_FALSE(pool.published(blocks[1]));
  EXPECT_TRUE(pool.Writable(blocks[1]));
  EXPECT_EQ(pool.Match(c).size(), 1u);
  EXPECT_EQ(pool.Take(), blocks[2]);
  EXPECT_EQ(pool.Take(), blocks[0]);
  EXPECT_TRUE(pool.Match(a).empty());
  ExpectCounts(pool, 3, 0, 0);
}

TEST(BlockPoolTest, ExhaustionIsSeenInAvailableBeforeTaking) {
  BlockPool pool(2, 4);
  const std::vector<int> held = TakeN(pool, 2);
  EXPECT_EQ(pool.available(), 0);
  // A used block is never evicted: only cached ones are.
  pool.Publish({held[0]}, Iota(4));
  EXPECT_EQ(pool.available(), 0);
  pool.Release(held[0]);
  EXPECT_EQ(pool.available(), 1) << "cached counts as available";
  EXPECT_EQ(pool.Take(), held[0]);
  EXPECT_EQ(pool.available(), 0);
  ReleaseAll(pool, held);
  ExpectCounts(pool, 0, 0, 2);
}

}  // namespace
}  // namespace textgen
