// The paged KV cache's bookkeeping (model/kv_cache.h): blocks taken and given
// back, prefix blocks published, found by their whole prefix, shared with
// reference counts, kept cached after release and evicted least recently
// used first, never written while shared. The arithmetic over blocks is held
// to the contiguous layout bit for bit in tests/model/parity_test.cc and
// tests/model/kernels/kernels_test.cc.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "model/kernels/kernels.h"

namespace textgen {
namespace {

ModelConfig TinyConfig() {
  ModelConfig c;
  c.context_length = 64;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  return c;
}

constexpr int kKvWidth = 8;  // TinyConfig's n_kv_heads × head_dim.

KvCacheOptions Options(int slots, int block_tokens, int blocks) {
  KvCacheOptions o;
  o.num_slots = slots;
  o.block_tokens = block_tokens;
  o.num_blocks = blocks;
  return o;
}

std::vector<int> Iota(int n, int first = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Fills `slot` as the decoder would: reserve, write every row, advance.
void Fill(KvCache& cache, int slot, int n, float value) {
  ASSERT_TRUE(cache.Reserve(slot, cache.length(slot) + n).ok());
  for (int p = cache.length(slot); p < cache.length(slot) + n; ++p) {
    ASSERT_TRUE(cache.Writable(slot, p)) << p;
    const std::vector<float> key(kKvWidth, value + p), v(kKvWidth, -value - p);
    for (int l = 0; l < 2; ++l)
      cache.WriteRow(slot, l, p, key.data(), v.data());
  }
  cache.Advance(slot, n);
}

// The first element of `position`'s key in `layer`.
float Key(const KvCache& cache, int slot, int layer, int position) {
  std::vector<float> key(kKvWidth), value(kKvWidth);
  cache.ReadRow(slot, layer, position, key.data(), value.data());
  return key[0];
}

void ExpectAllBack(const KvCache& cache) {
  const KvBlockCounts c = cache.CountBlocks();
  EXPECT_EQ(c.used, 0);
  EXPECT_EQ(c.free + c.cached, c.total);
}

TEST(KvCacheTest, DefaultPoolHoldsEverySlotsWholeContext) {
  const KvCache cache(TinyConfig(), 3);
  EXPECT_EQ(cache.block_tokens(), 16);
  EXPECT_EQ(cache.num_blocks(), 3 * 4);
  EXPECT_EQ(cache.MemoryBytes(), 3u * 64 * 2 * 2 * 8 * sizeof(float));
}

TEST(KvCacheTest, ReserveTakesWholeBlocksAndClearGivesThemBack) {
  KvCache cache(TinyConfig(), Options(2, 4, 5));
  ASSERT_TRUE(cache.Reserve(0, 9).ok());  // 3 blocks
  EXPECT_EQ(cache.block_table(0).size(), 3u);
  EXPECT_EQ(cache.AvailableBlocks(), 2);
  const absl::Status full = cache.Reserve(1, 12);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_TRUE(cache.block_table(1).empty()) << "nothing taken on failure";
  EXPECT_EQ(cache.Reserve(1, 65).code(), absl::StatusCode::kOutOfRange);
  cache.Clear(0);
  EXPECT_EQ(cache.AvailableBlocks(), 5);
  ExpectAllBack(cache);
}

TEST(KvCacheTest, PublishedPrefixIsFoundOnlyForTheSameWholePrefix) {
  KvCache cache(TinyConfig(), Options(3, 4, 12));
  const std::vector<int> prompt = Iota(10);  // Blocks [0,4) [4,8), tail 2.
  Fill(cache, 0, 10, 1.0f);
  cache.Publish(0, prompt);
  EXPECT_TRUE(cache.published(cache.block_table(0)[0]));
  EXPECT_TRUE(cache.published(cache.block_table(0)[1]));
  EXPECT_FALSE(cache.published(cache.block_table(0)[2])) << "partial block";

  // Same first 8 tokens: both blocks; the shared ones are read-only.
  std::vector<int> same = Iota(8);
  same.push_back(99);
  EXPECT_EQ(cache.MatchPrefix(same).tokens, 8);
  EXPECT_EQ(cache.AttachPrefix(1, same), 8);
  EXPECT_EQ(cache.length(1), 8);
  EXPECT_EQ(cache.block_table(1)[0], cache.block_table(0)[0]);
  EXPECT_EQ(cache.references(cache.block_table(0)[0]), 2);
  EXPECT_FALSE(cache.Writable(1, 0));
  EXPECT_FALSE(cache.Writable(0, 4));

  // The last prompt token is always left to compute: an 8-token prompt
  // attaches one block only.
  EXPECT_EQ(cache.MatchPrefix(Iota(8)).tokens, 4);
  // A different first block: the second block's tokens alone do not match.
  std::vector<int> other = Iota(10);
  other[0] = 50;
  EXPECT_EQ(cache.MatchPrefix(other).tokens, 0);
  cache.Clear(0);
  cache.Clear(1);
  ExpectAllBack(cache);
  EXPECT_EQ(cache.CountBlocks().cached, 2);
}

TEST(KvCacheTest, CachedBlocksOutliveTheirSlotAndAreEvictedOldestFirst) {
  KvCache cache(TinyConfig(), Options(2, 4, 4));
  Fill(cache, 0, 8, 1.0f);
  cache.Publish(0, Iota(8));
  cache.Clear(0);
  EXPECT_EQ(cache.CountBlocks().cached, 2);
  EXPECT_EQ(cache.AvailableBlocks(), 4);

  // A hit takes the blocks off the LRU list (not evictable while held).
  std::vector<int> prompt = Iota(9);
  const KvCache::PrefixMatch match = cache.MatchPrefix(prompt);
  EXPECT_EQ(match.tokens, 8);
  EXPECT_EQ(match.idle_blocks, 2);
  EXPECT_EQ(cache.AttachPrefix(1, prompt), 8);
  EXPECT_EQ(cache.AvailableBlocks(), 2);
  EXPECT_EQ(Key(cache, 1, 1, 5), 6.0f) << "the cached rows";
  cache.Clear(1);

  // Four blocks wanted with two free: the two cached ones are evicted, and
  // the prefix is gone.
  Fill(cache, 0, 16, 2.0f);
  EXPECT_EQ(cache.CountBlocks().cached, 0);
  EXPECT_EQ(cache.MatchPrefix(prompt).tokens, 0);
  cache.Clear(0);
  ExpectAllBack(cache);
}

TEST(KvCacheTest, AnEqualBlockPublishedTwiceKeepsTheFirst) {
  KvCache cache(TinyConfig(), Options(2, 4, 8));
  Fill(cache, 0, 5, 1.0f);
  Fill(cache, 1, 5, 1.0f);
  cache.Publish(0, Iota(5));
  cache.Publish(1, Iota(5));
  EXPECT_TRUE(cache.published(cache.block_table(0)[0]));
  EXPECT_FALSE(cache.published(cache.block_table(1)[0]));
  cache.Clear(0);
  cache.Clear(1);
  const KvBlockCounts c = cache.CountBlocks();
  EXPECT_EQ(c.cached, 1);
  EXPECT_EQ(c.free, 7);
}

TEST(KvCacheTest, TruncatingIntoASharedBlockCopiesItFirst) {
  KvCache cache(TinyConfig(), Options(2, 4, 8));
  Fill(cache, 0, 8, 1.0f);
  cache.Publish(0, Iota(8));
  std::vector<int> prompt = Iota(9);
  ASSERT_EQ(cache.AttachPrefix(1, prompt), 8);
  const int shared = cache.block_table(1)[1];
  cache.Truncate(1, 6);  // Position 6 is in the shared second block.
  EXPECT_NE(cache.block_table(1)[1], shared);
  EXPECT_TRUE(cache.Writable(1, 6));
  EXPECT_EQ(Key(cache, 1, 0, 5), 6.0f) << "kept rows copied";
  const std::vector<float> row(kKvWidth, -7.0f);
  cache.WriteRow(1, 0, 6, row.data(), row.data());
  EXPECT_EQ(Key(cache, 0, 0, 6), 7.0f) << "the shared block untouched";
  cache.Clear(0);
  cache.Clear(1);
  ExpectAllBack(cache);
}

TEST(KvCacheTest, Bf16HoldsEachElementRoundedToNearestInHalfTheBytes) {
  KvCacheOptions options = Options(1, 4, 4);
  KvCache f32(TinyConfig(), options);
  options.dtype = KvDtype::kBf16;
  KvCache bf16(TinyConfig(), options);
  EXPECT_EQ(bf16.dtype(), KvDtype::kBf16);
  EXPECT_EQ(2 * bf16.MemoryBytes(), f32.MemoryBytes());

  // 1 + 2^-8 is a tie between two bf16 values (ties to even: 1); 1 + 3·2^-8
  // rounds up to 1 + 2^-6; -0.1f rounds to nearest; 256 is exact.
  const float key[kKvWidth] = {
      1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.1f, 256.0f, 0.0f, -0.0f, 1e-30f,
      3.0e38f};
  float value[kKvWidth];
  for (int i = 0; i < kKvWidth; ++i) value[i] = -key[i];
  ASSERT_TRUE(bf16.Reserve(0, 3).ok());
  bf16.WriteRow(0, 1, 2, key, value);
  float k[kKvWidth], v[kKvWidth];
  bf16.ReadRow(0, 1, 2, k, v);
  EXPECT_EQ(k[0], 1.0f);
  EXPECT_EQ(k[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(k[2], -0.10009765625f);
  EXPECT_EQ(k[3], 256.0f);
  for (int i = 0; i < kKvWidth; ++i) {
    EXPECT_EQ(k[i], kernels::Bf16ToFloat(kernels::FloatToBf16(key[i]))) << i;
    EXPECT_EQ(v[i], -k[i]) << i;
  }
  // What the attention kernels read is the same bits, head-major: head h's
  // element d of position p at h · head_stride + p · head_dim + d.
  const uint16_t* block = bf16.block_keys<uint16_t>(0, 1, 0);
  ASSERT_NE(block, nullptr);
  constexpr int kHeadDim = kKvWidth / 2;
  EXPECT_EQ(bf16.head_stride(), 4 * kHeadDim);
  for (int h = 0; h < 2; ++h) {
    for (int d = 0; d < kHeadDim; ++d) {
      EXPECT_EQ(kernels::Bf16ToFloat(
                    block[h * bf16.head_stride() + 2 * kHeadDim + d]),
                k[h * kHeadDim + d])
          << h << ", " << d;
    }
  }
  EXPECT_EQ(bf16.block_keys<float>(0, 1, 0), nullptr) << "not its dtype";
}

TEST(KvCacheTest, ParsesItsDtypes) {
  EXPECT_EQ(*ParseKvDtype("f32"), KvDtype::kF32);
  EXPECT_EQ(*ParseKvDtype("bf16"), KvDtype::kBf16);
  EXPECT_EQ(ParseKvDtype("fp8").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_STREQ(KvDtypeName(KvDtype::kBf16), "bf16");
}

}  // namespace
}  // namespace textgen
