// Decoder::Forward's contract on bad input: a clear status, and the cache left
// untouched.
#include "model/decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "model/formats/hf_checkpoint.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

using ::testing::HasSubstr;

class DecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    decoder_ = std::make_unique<Decoder>(*std::move(checkpoint));
    cache_ = std::make_unique<KvCache>(decoder_->config(), 2);
  }

  absl::Status Run(std::vector<SequenceChunk> batch) {
    return decoder_->Forward(batch, *cache_, {}, result_);
  }

  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<KvCache> cache_;
  ForwardResult result_;
};

TEST_F(DecoderTest, RejectsBadBatchesWithoutTouchingTheCache) {
  const std::vector<int> ok = {1, 2, 3};
  ASSERT_TRUE(Run({{0, ok}}).ok());
  ASSERT_EQ(cache_->length(0), 3);

  const int vocab = decoder_->config().vocab_size;
  const std::vector<int> out_of_vocab = {1, vocab};
  const std::vector<int> negative = {-1};
  const std::vector<int> empty;
  const std::vector<int> too_long(decoder_->config().context_length - 2, 0);

  struct Case {
    std::vector<SequenceChunk> batch;
    absl::StatusCode code;
    const char* message;
  } cases[] = {
      {{}, absl::StatusCode::kInvalidArgument, "empty batch"},
      {{{2, ok}},
       absl::StatusCode::kInvalidArgument,
       "slot 2 is outside [0, 2)"},
      {{{-1, ok}}, absl::StatusCode::kInvalidArgument, "slot -1 is outside"},
      {{{1, ok}, {1, ok}},
       absl::StatusCode::kInvalidArgument,
       "slot 1 appears twice"},
      {{{1, empty}},
       absl::StatusCode::kInvalidArgument,
       "sequence 0: no tokens"},
      {{{1, ok}, {0, out_of_vocab}},
       absl::StatusCode::kInvalidArgument,
       "sequence 1: token id 97 is outside the vocabulary [0, 97)"},
      {{{1, negative}}, absl::StatusCode::kInvalidArgument, "token id -1"},
      {{{0, too_long}},
       absl::StatusCode::kOutOfRange,
       "3 cached + 126 new tokens exceed the context length 128"},
  };
  for (const Case& c : cases) {
    const absl::Status s = Run(c.batch);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
  EXPECT_EQ(cache_->length(0), 3);
  EXPECT_EQ(cache_->length(1), 0);
}

TEST_F(DecoderTest, FillsTheContextExactlyAndNoFurther) {
  const int n = decoder_->config().context_length;
  std::vector<int> tokens(n - 1, 5);
  ASSERT_TRUE(Run({{0, tokens}}).ok());
  const std::vector<int> one = {6};
  ASSERT_TRUE(Run({{0, one}}).ok());
  EXPECT_EQ(cache_->length(0), n);
  EXPECT_EQ(Run({{0, one}}).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(DecoderTest, ClearedSlotIsReusedFromScratch) {
  const std::vector<int> a = {4, 8, 15, 16, 23, 42};
  ASSERT_TRUE(Run({{1, a}}).ok());
  const Activations first = result_.logits;
  const std::vector<int> other = {9, 9, 9};
  ASSERT_TRUE(Run({{1, other}}).ok());
  cache_->Clear(1);
  ASSERT_TRUE(Run({{1, a}}).ok());
  EXPECT_EQ(result_.logits, first);
}

TEST_F(DecoderTest, CapturesNothingUnlessAsked) {
  const std::vector<int> a = {1, 2};
  ASSERT_TRUE(
      decoder_
          ->Forward({{0, a}}, *cache_, {LogitsMode::kAllTokens, false}, result_)
          .ok());
  EXPECT_TRUE(result_.attention.empty());
  ASSERT_TRUE(
      decoder_
          ->Forward({{1, a}}, *cache_, {LogitsMode::kAllTokens, true}, result_)
          .ok());
  ASSERT_EQ(result_.attention.size(), 1u);
  EXPECT_EQ(result_.attention[0].weights.size(),
            static_cast<size_t>(decoder_->config().n_layers *
                                decoder_->config().n_heads * 2 * 2));
}

// Threads split work by output (model/decoder.h), so a mixed batch (a prefill
// chunk, a decode step, a fresh sequence) gives the same logits and attention
// maps bit for bit on one thread and on two, with f32 or bf16 keys and
// values. Also run under TSan.
TEST(DecoderThreadsTest, TwoThreadsEqualOneBitForBit) {
  auto checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  Decoder one(*checkpoint);
  DecoderOptions options;
  options.threads = 2;
  options.min_parallel_work = 0;  // Split even this small model's steps.
  Decoder two(std::move(*checkpoint), options);
  ASSERT_EQ(two.threads(), 2);
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBf16}) {
    SCOPED_TRACE(KvDtypeName(dtype));
    KvCache cache_one(one.config(), 3, dtype),
        cache_two(two.config(), 3, dtype);
    const std::vector<int> a = {4, 8, 15, 16, 23, 42, 7};
    const std::vector<int> b = {1, 2, 3};
    const std::vector<int> c = {9};
    const ForwardOptions all{LogitsMode::kAllTokens,
                             /*capture_attention=*/true};
    for (const std::vector<SequenceChunk>& batch :
         {std::vector<SequenceChunk>{{0, a}, {1, b}},
          std::vector<SequenceChunk>{{1, c}, {0, c}, {2, a}},
          std::vector<SequenceChunk>{{2, c}}}) {
      ForwardResult r1, r2;
      ASSERT_TRUE(one.Forward(batch, cache_one, all, r1).ok());
      ASSERT_TRUE(two.Forward(batch, cache_two, all, r2).ok());
      ASSERT_EQ(r1.logits.rows(), r2.logits.rows());
      EXPECT_EQ(r1.logits, r2.logits);
      ASSERT_EQ(r1.attention.size(), r2.attention.size());
      for (size_t i = 0; i < r1.attention.size(); ++i) {
        EXPECT_EQ(r1.attention[i].weights, r2.attention[i].weights);
      }
    }
  }
}

// A second Decoder over the same weights shares them (no copy) and computes
// the same logits with its own scratch.
TEST(DecoderThreadsTest, SharedWeightsAreNotCopied) {
  auto checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  Decoder first(*std::move(checkpoint));
  Decoder second(first.config(), first.shared_weights());
  EXPECT_EQ(&first.weights(), &second.weights());
  KvCache c1(first.config(), 1), c2(first.config(), 1);
  const std::vector<int> a = {3, 1, 4, 1, 5};
  ForwardResult r1, r2;
  ASSERT_TRUE(first.Forward({{0, a}}, c1, {}, r1).ok());
  ASSERT_TRUE(second.Forward({{0, a}}, c2, {}, r2).ok());
  EXPECT_EQ(r1.logits, r2.logits);
}

// bf16 storage: the same logits as f32 storage of the bf16-rounded weights
// would give, and close to the f32 model's.
TEST(DecoderThreadsTest, Bf16WeightsStayCloseToF32) {
  LoadOptions bf16;
  bf16.weight_type = kernels::WeightType::kBF16;
  auto f32_checkpoint = LoadCheckpoint(testing::GoldenDir("gpt2_learned"));
  auto bf16_checkpoint =
      LoadCheckpoint(testing::GoldenDir("gpt2_learned"), bf16);
  ASSERT_TRUE(f32_checkpoint.ok()) << f32_checkpoint.status();
  ASSERT_TRUE(bf16_checkpoint.ok()) << bf16_checkpoint.status();
  EXPECT_EQ(bf16_checkpoint->weights.head.type(), kernels::WeightType::kBF16);
  EXPECT_LT(bf16_checkpoint->weights.MemoryBytes(),
            f32_checkpoint->weights.MemoryBytes() * 0.6);
  Decoder f32(*std::move(f32_checkpoint));
  Decoder half(*std::move(bf16_checkpoint));
  KvCache c1(f32.config(), 1), c2(f32.config(), 1);
  const std::vector<int> a = {3, 1, 4, 1, 5, 9, 2, 6};
  ForwardResult r1, r2;
  ASSERT_TRUE(f32.Forward({{0, a}}, c1, {LogitsMode::kAllTokens}, r1).ok());
  ASSERT_TRUE(half.Forward({{0, a}}, c2, {LogitsMode::kAllTokens}, r2).ok());
  const float diff = (r1.logits - r2.logits).cwiseAbs().maxCoeff();
  const float scale = r1.logits.cwiseAbs().maxCoeff();
  EXPECT_GT(diff, 0.0f);  // The weights really were rounded.
  // bf16 keeps 8 significant bits (relative error 2^-9 per weight).
  EXPECT_LT(diff, 0.02f * scale) << "max |logit| " << scale;
}

}  // namespace
}  // namespace textgen
