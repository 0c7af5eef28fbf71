// The validation loss the C++ decoder computes for the shipped model on the
// last 10% of
// ../shared/data/tinyshakespeare.txt equals the model card's figure
// (metrics.json) within 0.01. Label `data`: it scores 111,539 predictions, so
// it runs in the Release pass only.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "model/decoder.h"
#include "model/evaluate.h"
#include "model/file_util.h"
#include "model/model_loader.h"
#include "tests/shared_data.h"

namespace textgen {
namespace {

TEST(ShippedModelValidationTest, ValidationLossEqualsTheModelCard) {
  const std::string corpus_path =
      testing::SharedDir() + "/data/tinyshakespeare.txt";
  if (!testing::Exists(corpus_path)) {
    GTEST_SKIP() << "needs " << corpus_path << " (absent in this clone)";
  }
  const std::string model_dir =
      std::string(TEXTGEN_SOURCE_DIR) + "/models/shakespeare-char";
  auto loaded = LoadModel(model_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE(loaded->tokenizer, nullptr);
  Decoder decoder(std::move(loaded->checkpoint));
  auto metrics_text = ReadFileToString(model_dir + "/metrics.json");
  ASSERT_TRUE(metrics_text.ok()) << metrics_text.status();
  const double card = nlohmann::json::parse(*metrics_text).at("val_loss");

  // The last 10% of the characters (the corpus is ASCII: characters are bytes).
  auto corpus = ReadFileToString(corpus_path);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const size_t n_train = static_cast<size_t>(0.9 * corpus->size());
  auto ids =
      loaded->tokenizer->Encode(std::string_view(*corpus).substr(n_train));
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 111540u);
  auto score = ScoreWindows(decoder, *ids, decoder.config().context_length);
  ASSERT_TRUE(score.ok()) << score.status();
  std::printf(
      "[shipped] validation loss: C++ %.6f nats/char over %lld predictions, "
      "model card %.6f\n",
      score->mean_nats, static_cast<long long>(score->predictions), card);
  EXPECT_EQ(score->predictions, static_cast<int64_t>(ids->size()) - 1);
  EXPECT_NEAR(score->mean_nats, card, 0.01);
}

}  // namespace
}  // namespace textgen
