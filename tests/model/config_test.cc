// config.json parsing: both families' Hugging Face keys, their defaults, and
// clear errors.
#include "model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/formats/hf_config.h"

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
  EXPECT_TRUE(c->qkv_bias && c->attn_out_bias && c->mlp_bias);
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
  EXPECT_FALSE(c->qkv_bias || c->attn_out_bias || c->mlp_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kNone);
}

std::string Replace(std::string s, const std::string& from,
                    const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

// Real configs, abridged to the keys we read (values as published).
constexpr char kLlama32[] = R"({"model_type": "llama", "vocab_size": 128256,
  "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": true,
  "attention_bias": false, "mlp_bias": false,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
    "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
    "rope_type": "llama3"}})";

constexpr char kQwen25[] = R"({"model_type": "qwen2", "vocab_size": 151936,
  "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
  "num_attention_heads": 14, "num_key_value_heads": 2,
  "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": true,
  "use_sliding_window": false, "sliding_window": 32768,
  "max_window_layers": 21, "rope_scaling": null})";

constexpr char kQwen3[] = R"({"model_type": "qwen3", "vocab_size": 151936,
  "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
  "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000, "hidden_act": "silu", "tie_word_embeddings": true,
  "attention_bias": false, "use_sliding_window": false,
  "sliding_window": null, "max_window_layers": 28, "rope_scaling": null})";

constexpr char kMistral[] = R"({"model_type": "mistral", "vocab_size": 32768,
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "hidden_act": "silu", "sliding_window": null})";

TEST(ConfigTest, ParsesLlama3WithRopeScalingAndHeadDim) {
  auto c = ParseModelConfig(kLlama32, "llama3.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kLlama);
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_TRUE(c->tied_lm_head);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_context, 8192);
  EXPECT_FALSE(c->qkv_bias || c->attn_out_bias || c->mlp_bias);
}

TEST(ConfigTest, LlamaAttentionAndMlpBiasesAreSeparateSeams) {
  auto c =
      ParseModelConfig(Replace(Replace(kLlama32, "\"attention_bias\": false",
                                       "\"attention_bias\": true"),
                               "\"mlp_bias\": false", "\"mlp_bias\": true"),
                       "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qkv_bias && c->attn_out_bias && c->mlp_bias);
  auto d = ParseModelConfig(Replace(kLlama32, "\"attention_bias\": false",
                                    "\"attention_bias\": true"),
                            "c.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->qkv_bias && d->attn_out_bias);
  EXPECT_FALSE(d->mlp_bias);
}

TEST(ConfigTest, ParsesQwen2WithQkvBiasesOnly) {
  auto c = ParseModelConfig(kQwen25, "qwen2.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kQwen2);
  EXPECT_EQ(c->head_dim(), 64);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->attn_out_bias || c->mlp_bias || c->qk_norm);
  EXPECT_EQ(c->sliding_window, 0);  // use_sliding_window is false.
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
}

TEST(ConfigTest, ParsesQwen3WithQkNormAndExplicitHeadDim) {
  auto c = ParseModelConfig(kQwen3, "qwen3.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kQwen3);
  EXPECT_EQ(c->head_dim(), 128);  // != 1024 / 16
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias || c->attn_out_bias || c->mlp_bias);
  // Qwen3Config's head_dim default is 128, not hidden / heads.
  auto d =
      ParseModelConfig(Replace(kQwen3, "\"head_dim\": 128,", ""), "c.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->head_dim(), 128);
}

TEST(ConfigTest, ParsesMistralWithoutSlidingWindow) {
  auto c = ParseModelConfig(kMistral, "mistral.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, Family::kMistral);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->head_dim(), 128);
  // A window as long as the context changes nothing, so it is served.
  auto d = ParseModelConfig(Replace(kMistral, "\"sliding_window\": null",
                                    "\"sliding_window\": 32768"),
                            "c.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sliding_window, 32768);
}

TEST(ConfigTest, QwenWindowAppliesOnlyWhenUsedAndBelowTheLayerCount) {
  const std::string on = Replace(kQwen25, "\"use_sliding_window\": false",
                                 "\"use_sliding_window\": true");
  // max_window_layers 21 < 24 layers: layers 21.. would slide over 32768
  // positions, which covers the context: accepted.
  auto c = ParseModelConfig(on, "c.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 32768);
  // Every layer full-attention (max_window_layers >= layers): no window.
  auto d = ParseModelConfig(
      Replace(
          Replace(on, "\"max_window_layers\": 21", "\"max_window_layers\": 24"),
          "\"sliding_window\": 32768", "\"sliding_window\": 4096"),
      "c.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sliding_window, 0);
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
                  "\"tie_word_embeddings\" = \"false\" is not supported"},
        BadConfig{"OtherRopeScaling",
                  Replace(kLlama32, "\"rope_type\": \"llama3\"",
                          "\"rope_type\": \"yarn\""),
                  "rope_scaling: key \"rope_type\" = \"yarn\" is not supported "
                  "(supported: llama3, default)"},
        BadConfig{
            "OldStyleLinearRopeScaling",
            Replace(kQwen25, "\"rope_scaling\": null",
                    R"("rope_scaling": {"type": "linear", "factor": 2.0})"),
            "\"linear\" is not supported"},
        BadConfig{"Llama3ScalingWithoutFactor",
                  Replace(kLlama32, "\"factor\": 32.0,", ""),
                  "rope_scaling: missing required key \"factor\""},
        BadConfig{
            "RopeScalingNotAnObject",
            Replace(kQwen25, "\"rope_scaling\": null", "\"rope_scaling\": 2"),
            "rope_scaling must be an object or null"},
        BadConfig{"MistralDefaultWindowBelowContext",
                  Replace(kMistral, ", \"sliding_window\": null", ""),
                  "sliding_window 4096 is shorter than the served context of "
                  "32768 positions: sliding-window attention is not "
                  "implemented"},
        BadConfig{
            "QwenSlidingWindowBelowContext",
            Replace(Replace(kQwen25, "\"use_sliding_window\": false",
                            "\"use_sliding_window\": true"),
                    "\"sliding_window\": 32768", "\"sliding_window\": 4096"),
            "sliding_window 4096 is shorter than the served context"},
        BadConfig{"UnknownLlamaLikeType", R"({"model_type": "gemma"})",
                  "(supported: gpt2, llama, mistral, qwen2, qwen3)"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace textgen
