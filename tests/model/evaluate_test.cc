// ScoreWindows: the cross-entropy it reports equals the one PyTorch's golden
// logits give, and the window arithmetic matches tools/train.py's definition.
#include "model/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/checkpoint.h"
#include "model/formats/hf_checkpoint.h"
#include "model/formats/safetensors.h"
#include "tests/testing/test_util.h"

namespace textgen {
namespace {

TEST(EvaluateTest, MatchesCrossEntropyOfPyTorchLogits) {
  const std::string dir = testing::GoldenDir("gpt2_learned");
  auto checkpoint = LoadCheckpoint(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  Decoder decoder(*std::move(checkpoint));
  auto golden = SafetensorsFile::Open(dir + "/golden.safetensors");
  ASSERT_TRUE(golden.ok());
  const std::vector<int64_t> ids64 = *golden->ReadInts("input_ids");
  const std::vector<int> ids(ids64.begin(), ids64.end());
  const int V = decoder.config().vocab_size;
  const std::vector<float> logits = *golden->ReadFloats("logits");

  // One window over all 64 ids: positions 0..62 predict ids 1..63.
  double expected = 0.0;
  for (int t = 0; t + 1 < 64; ++t) {
    const float* row = logits.data() + t * V;
    double max = row[0], sum = 0.0;
    for (int v = 0; v < V; ++v) max = std::max<double>(max, row[v]);
    for (int v = 0; v < V; ++v) sum += std::exp(row[v] - max);
    expected += std::log(sum) + max - row[ids[t + 1]];
  }
  expected /= 63;

  auto score = ScoreWindows(decoder, ids, /*window=*/64);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(score->predictions, 63);
  EXPECT_NEAR(score->mean_nats, expected, 1e-5);
}

TEST(EvaluateTest, WindowsCoverEveryPredictionOnceWhateverTheBatch) {
  auto checkpoint = LoadCheckpoint(testing::GoldenDir("llama_tied_mha"));
  ASSERT_TRUE(checkpoint.ok());
  Decoder decoder(*std::move(checkpoint));
  std::vector<int> ids(203);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = (i * 7 + 3) % decoder.config().vocab_size;
  // Windows of 50: [0,50] [50,100] [100,150] [150,200] [200,202]: 50·4 + 2
  // predictions.
  auto one = ScoreWindows(decoder, ids, 50, /*batch=*/1);
  auto three = ScoreWindows(decoder, ids, 50, /*batch=*/3);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(one->predictions, 202);
  EXPECT_EQ(three->predictions, 202);
  EXPECT_EQ(one->mean_nats,
            three->mean_nats);  // Batch-invariant, so exactly equal.
  EXPECT_FALSE(
      ScoreWindows(decoder, ids, decoder.config().context_length + 1).ok());
}

}  // namespace
}  // namespace textgen
