// config.json parsing: both families' Hugging Face keys, their defaults, and
// clear errors.
#include "model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace textgen {
namespace {

using ::testing::HasSubstr;

constexpr char kGpt2[] =
    R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024,
  "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": null,
  "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"})";

constexpr char kLlama[] = R"({"model_type": "llama", "vocab_size": 32000,
  "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "hidden_act": "silu"})";

TEST(ConfigTest, ParsesGpt2WithItsDefaults) {
  auto c = ParseModelConfig(kGpt2, "gpt2.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kGpt2);
  EXPECT_EQ(c->d_model, 768);
  EXPECT_EQ(c->d_ff, 4 * 768);  // n_inner null means 4 × n_embd.
  EXPECT_EQ(c->n_kv_heads, 12);
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_EQ(c->context_length, 1024);
  EXPECT_EQ(c->norm, NormKind::kLayerNorm);
  EXPECT_EQ(c->positions, PositionKind::kLearned);
  EXPECT_EQ(c->feed_forward, FeedForwardKind::kGeluMlp);
  EXPECT_TRUE(c->tied_lm_head);
  EXPECT_TRUE(c->has_bias);
}

TEST(ConfigTest, SinusoidalPositionsAreOneKey) {
  std::string json = kGpt2;
  json.insert(1, R"("position_embedding_type": "sinusoidal", )");
  auto c = ParseModelConfig(json, "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->positions, PositionKind::kSinusoidal);
}

TEST(ConfigTest, ParsesLlamaWithGroupedQueryAttention) {
  auto c = ParseModelConfig(kLlama, "llama.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kLlama);
  EXPECT_EQ(c->n_heads, 32);
  EXPECT_EQ(c->n_kv_heads, 8);
  EXPECT_EQ(c->queries_per_kv_head(), 4);
  EXPECT_EQ(c->d_ff, 11008);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->norm, NormKind::kRmsNorm);
  EXPECT_EQ(c->positions, PositionKind::kRotary);
  EXPECT_EQ(c->feed_forward, FeedForwardKind::kSwiGlu);
  EXPECT_FALSE(c->tied_lm_head);  // LlamaConfig's default.
  EXPECT_FALSE(c->has_bias);
}

struct BadConfig {
  const char* name;
  std::string json;
  const char* message;
};

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, GivesClearError) {
  auto c = ParseModelConfig(GetParam().json, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("config.json: "));
  EXPECT_THAT(c.status().message(), HasSubstr(GetParam().message));
}

std::string Replace(std::string s, const std::string& from,
                    const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, BadConfigTest,
    ::testing::Values(
        BadConfig{"NotJson", "{", "not valid JSON"},
        BadConfig{"NotObject", "[]", "expected a JSON object"},
        BadConfig{"NoModelType", "{}", "missing required key \"model_type\""},
        BadConfig{"UnknownModelType", R"({"model_type": "bert"})",
                  "\"model_type\" = \"bert\" is not supported"},
        BadConfig{"MissingKey", Replace(kGpt2, "\"n_head\": 12,", ""),
                  "missing required key \"n_head\""},
        BadConfig{"WrongType",
                  Replace(kGpt2, "\"n_layer\": 12", "\"n_layer\": \"12\""),
                  "key \"n_layer\" must be an integer, got \"12\""},
        BadConfig{"Negative",
                  Replace(kGpt2, "\"n_layer\": 12", "\"n_layer\": -1"),
                  "key \"n_layer\" = -1 is out of range"},
        BadConfig{"HeadsDoNotDivide",
                  Replace(kGpt2, "\"n_head\": 12", "\"n_head\": 7"),
                  "model width 768 is not divisible by the 7 heads"},
        BadConfig{"KvHeadsDoNotDivide",
                  Replace(kLlama, "\"num_key_value_heads\": 8",
                          "\"num_key_value_heads\": 5"),
                  "num_key_value_heads 5 must divide num_attention_heads 32"},
        BadConfig{"ZeroVocab", Replace(kGpt2, "50257", "0"),
                  "vocab_size must be positive"},
        BadConfig{"UnknownActivation", Replace(kGpt2, "gelu_new", "relu"),
                  "\"activation_function\" = \"relu\" is not supported"},
        BadConfig{
            "UnknownPositions",
            Replace(kGpt2, "{", R"({"position_embedding_type": "alibi", )"),
            "\"position_embedding_type\" = \"alibi\" is not supported"},
        BadConfig{"UntiedGpt2",
                  Replace(kGpt2, "{", R"({"tie_word_embeddings": false, )"),
                  "\"tie_word_embeddings\" = \"false\" is not supported"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace textgen
