// The shipped instruct model, models/chat-instruct (trained by
// tools/train_chat.py), in C++:
//   - its tokenizer.json (with tokenizer_config.json and
//     generation_config.json) loads as a byte-level BPE whose special tokens
//     and end ids are the model card's, and encodes every held-out prompt (the
//     chat template's rendering, special tokens written out) to the ids the
//     training script recorded;
//   - greedy decoding of every held-out prompt until an end token gives
//     PyTorch's recorded answer, token for token, and exact-match accuracy of
//     at least 95 %;
//   - the template shipped in chat_template.jinja is the one in
//     tokenizer_config.json.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "model/decoder.h"
#include "model/formats/model_loader.h"
#include "model/generate.h"
#include "model/sampler.h"

namespace textgen {
namespace {

std::string ModelDir() {
  return std::string(TEXTGEN_SOURCE_DIR) + "/models/chat-instruct";
}

std::string Read(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::vector<nlohmann::json> HeldOut() {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(Read(ModelDir() + "/heldout.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

class ChatModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = LoadModel(ModelDir());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_NE(loaded->tokenizer, nullptr);
    tokenizer_ = std::move(loaded->tokenizer);
    decoder_ = std::make_unique<Decoder>(std::move(loaded->checkpoint));
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Decoder> decoder_;
};

TEST_F(ChatModelTest, TokenizerIsTheCardsByteLevelBpe) {
  const nlohmann::json metrics =
      nlohmann::json::parse(Read(ModelDir() + "/metrics.json"));
  const int endoftext = metrics.at("special_tokens").at("<|endoftext|>");
  const int im_start = metrics.at("special_tokens").at("<|im_start|>");
  const int im_end = metrics.at("special_tokens").at("<|im_end|>");
  EXPECT_EQ(tokenizer_->kind(), TokenizerKind::kBpe);
  EXPECT_EQ(tokenizer_->vocab_size(), decoder_->config().vocab_size);
  EXPECT_EQ(tokenizer_->bos_id(), -1);  // bos_token null, add_bos_token false
  // tokenizer_config's eos_token first, then generation_config's list.
  EXPECT_EQ(tokenizer_->eos_ids(), (std::vector<int>{im_end, endoftext}));

  auto ids = tokenizer_->Encode(
      "<|im_start|>user\nWhat is 17 + 25?<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->front(), im_start);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), im_end), 1);
  // Digits are single tokens (Qwen2's pre-tokenizer): ids 48.. are bytes.
  auto digits = tokenizer_->Encode("2021-03-04");
  ASSERT_TRUE(digits.ok());
  EXPECT_EQ(*digits, (std::vector<int>{'2', '0', '2', '1', '-', '0', '3', '-',
                                       '0', '4'}));
  auto text = tokenizer_->Decode(*digits);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "2021-03-04");
}

TEST_F(ChatModelTest, ChatTemplateFileEqualsTokenizerConfig) {
  const nlohmann::json config =
      nlohmann::json::parse(Read(ModelDir() + "/tokenizer_config.json"));
  EXPECT_EQ(config.at("chat_template").get<std::string>(),
            Read(ModelDir() + "/chat_template.jinja"));
  EXPECT_EQ(config.at("eos_token").get<std::string>(), "<|im_end|>");
}

TEST_F(ChatModelTest, GreedyAnswersEqualPyTorchAndAreAccurate) {
  const std::vector<nlohmann::json> rows = HeldOut();
  ASSERT_GE(rows.size(), 50u);
  int correct = 0, same_as_pytorch = 0, n = 0;
  for (const nlohmann::json& row : rows) {
    const std::string prompt = row.at("prompt");
    const std::vector<int> prompt_ids = row.at("prompt_ids");
    auto ids = tokenizer_->Encode(prompt);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, prompt_ids) << prompt;

    GenerateOptions options;
    options.max_new_tokens = 16;  // tools/train_chat.py's MAX_NEW
    options.sampling.temperature = 0.0f;
    options.is_end_token = [&](int id) { return tokenizer_->EndsSequence(id); };
    std::vector<int> answer_ids;
    const absl::StatusOr<GenerateEnd> end =
        Generate(*decoder_, *ids, options, [&](const GeneratedToken& token) {
          if (!token.is_end_token) answer_ids.push_back(token.id);
        });
    ASSERT_TRUE(end.ok()) << end.status();
    auto answer = tokenizer_->Decode(answer_ids);
    ASSERT_TRUE(answer.ok()) << answer.status();

    const std::vector<int> pytorch_ids = row.at("prediction_ids");
    const bool same = answer_ids == pytorch_ids &&
                      *answer == row.at("prediction").get<std::string>();
    EXPECT_TRUE(same) << prompt << "\nC++: " << *answer
                      << "\nPyTorch: " << row.at("prediction");
    same_as_pytorch += same;
    correct += *answer == row.at("answer").get<std::string>();
    ++n;
  }
  std::printf(
      "[chat-instruct] %d held-out conversations: %d answered exactly "
      "(%.2f %%), %d the same as PyTorch\n",
      n, correct, 100.0 * correct / n, same_as_pytorch);
  EXPECT_EQ(same_as_pytorch, n);
  EXPECT_GE(correct, 0.95 * n);
}

}  // namespace
}  // namespace textgen
