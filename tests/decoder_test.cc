// Decoder::Forward's contract on bad input: a clear status, and the cache left
// untouched.
#include "model/decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "tests/test_util.h"

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

}  // namespace
}  // namespace textgen
