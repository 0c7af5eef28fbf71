#include "model/formats/hf_config.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

using nlohmann::json;

constexpr char kSupportedModelTypes[] = "gpt2, llama, mistral, qwen2, qwen3";

// Reads config keys with errors that name the file and the key.
class KeyReader {
 public:
  KeyReader(const json& object, const std::string& source)
      : object_(object), source_(source) {}

  absl::Status Int(const char* key, int& out) {
    auto it = object_.find(key);
    if (it == object_.end()) return Missing(key);
    if (!it->is_number_integer()) return WrongType(key, "an integer");
    const auto value = it->get<int64_t>();
    if (value < 0 || value > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": key \"", key, "\" = ", value, " is out of range"));
    }
    out = static_cast<int>(value);
    return absl::OkStatus();
  }

  // An optional integer; null or absent leaves `out` unchanged.
  absl::Status OptionalInt(const char* key, int& out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    return Int(key, out);
  }

  absl::Status OptionalFloat(const char* key, float& out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number()) return WrongType(key, "a number");
    out = it->get<float>();
    return absl::OkStatus();
  }

  absl::Status OptionalBool(const char* key, bool& out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_boolean()) return WrongType(key, "true or false");
    out = it->get<bool>();
    return absl::OkStatus();
  }

  absl::Status OptionalString(const char* key, std::string& out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return WrongType(key, "a string");
    out = it->get<std::string>();
    return absl::OkStatus();
  }

  absl::Status Unsupported(const char* key, const std::string& value,
                           const char* supported) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": key \"", key, "\" = \"", value,
                     "\" is not supported (supported: ", supported, ")"));
  }

 private:
  absl::Status Missing(const char* key) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": missing required key \"", key, "\""));
  }
  absl::Status WrongType(const char* key, const char* expected) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": key \"", key, "\" must be ", expected,
                     ", got ", object_.at(key).dump()));
  }

  const json& object_;
  const std::string& source_;
};

absl::Status ParseGpt2(KeyReader& keys, ModelConfig& c) {
  c.family = Family::kGpt2;
  c.norm = NormKind::kLayerNorm;
  c.feed_forward = FeedForwardKind::kGeluMlp;
  c.qkv_bias = c.attn_out_bias = c.mlp_bias = true;
  c.tied_lm_head = true;
  TEXTGEN_RETURN_IF_ERROR(keys.Int("vocab_size", c.vocab_size));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_positions", c.context_length));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_embd", c.d_model));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_layer", c.n_layers));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_head", c.n_heads));
  c.n_kv_heads = c.n_heads;
  c.d_ff = 4 * c.d_model;  // GPT-2's default when n_inner is null.
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalInt("n_inner", c.d_ff));
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalFloat("layer_norm_epsilon", c.norm_eps));
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalBool("tie_word_embeddings", c.tied_lm_head));
  if (!c.tied_lm_head) {
    return keys.Unsupported("tie_word_embeddings", "false", "true for gpt2");
  }

  std::string activation = "gelu_new";
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalString("activation_function", activation));
  // GPT-2 names the tanh approximation of GELU "gelu_new" (also
  // "gelu_pytorch_tanh").
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh") {
    return keys.Unsupported("activation_function", activation,
                            "gelu_new, gelu_pytorch_tanh");
  }

  std::string positions = "learned";
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalString("position_embedding_type", positions));
  if (positions == "learned" || positions == "absolute") {
    c.positions = PositionKind::kLearned;
  } else if (positions == "sinusoidal") {
    c.positions = PositionKind::kSinusoidal;
  } else {
    return keys.Unsupported("position_embedding_type", positions,
                            "learned, sinusoidal");
  }

  // Encoder–decoder: HF's is_encoder_decoder, plus encoder_layers (BART's
  // key) for the encoder's depth. add_cross_attention, if given, must agree.
  bool encoder_decoder = false, cross_attention = false;
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalBool("is_encoder_decoder", encoder_decoder));
  cross_attention = encoder_decoder;
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalBool("add_cross_attention", cross_attention));
  if (cross_attention != encoder_decoder) {
    return keys.Unsupported(
        "add_cross_attention", cross_attention ? "true" : "false",
        "the value of is_encoder_decoder (cross-attention reads the "
        "encoder's output)");
  }
  if (encoder_decoder) {
    TEXTGEN_RETURN_IF_ERROR(keys.Int("encoder_layers", c.encoder_layers));
    if (c.encoder_layers < 1) {
      return keys.Unsupported("encoder_layers", "0",
                              "at least 1 with is_encoder_decoder");
    }
  }
  return absl::OkStatus();
}

// rope_scaling: null, {"rope_type": "default"} or a "llama3" object (older
// configs spell rope_type "type"). Any other scheme is refused rather than
// served with the wrong positions.
absl::Status ParseRopeScaling(const json& root, const std::string& source,
                              RopeScaling& out) {
  auto it = root.find("rope_scaling");
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  const std::string where = absl::StrCat(source, ": rope_scaling");
  if (!it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " must be an object or null, got ", it->dump()));
  }
  KeyReader keys(*it, where);
  std::string type;
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalString("type", type));
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalString("rope_type", type));
  if (type == "default") return absl::OkStatus();
  if (type != "llama3") {
    return keys.Unsupported("rope_type", type, "llama3, default");
  }
  out.kind = RopeScaling::Kind::kLlama3;
  for (const auto& [key, field] :
       {std::pair<const char*, float*>{"factor", &out.factor},
        {"low_freq_factor", &out.low_freq_factor},
        {"high_freq_factor", &out.high_freq_factor}}) {
    if (!it->contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": missing required key \"", key, "\""));
    }
    TEXTGEN_RETURN_IF_ERROR(keys.OptionalFloat(key, *field));
  }
  TEXTGEN_RETURN_IF_ERROR(
      keys.Int("original_max_position_embeddings", out.original_context));
  if (!(out.factor >= 1.0f) || !(out.low_freq_factor > 0.0f) ||
      !(out.high_freq_factor > out.low_freq_factor) ||
      out.original_context < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": llama3 needs factor >= 1, 0 < low_freq_factor < "
        "high_freq_factor and original_max_position_embeddings > 0; got ",
        it->dump()));
  }
  return absl::OkStatus();
}

// The LLaMA-shaped families (llama, mistral, qwen2, qwen3): the same keys,
// with each model_type's transformers defaults and its bias/norm seams.
absl::Status ParseLlamaLike(const json& root, const std::string& source,
                            Family family, KeyReader& keys, ModelConfig& c) {
  c.family = family;
  c.norm = NormKind::kRmsNorm;
  c.feed_forward = FeedForwardKind::kSwiGlu;
  c.positions = PositionKind::kRotary;
  c.tied_lm_head = false;  // Every one of these configs' default.
  c.norm_eps = 1e-6f;      // Likewise.
  TEXTGEN_RETURN_IF_ERROR(keys.Int("vocab_size", c.vocab_size));
  TEXTGEN_RETURN_IF_ERROR(
      keys.Int("max_position_embeddings", c.context_length));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("hidden_size", c.d_model));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("intermediate_size", c.d_ff));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("num_hidden_layers", c.n_layers));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("num_attention_heads", c.n_heads));
  c.n_kv_heads = c.n_heads;
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalInt("num_key_value_heads", c.n_kv_heads));
  // Qwen3Config defaults head_dim to 128; the others to hidden / heads.
  c.explicit_head_dim = family == Family::kQwen3 ? 128 : 0;
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalInt("head_dim", c.explicit_head_dim));
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalFloat("rms_norm_eps", c.norm_eps));
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalFloat("rope_theta", c.rope_theta));
  TEXTGEN_RETURN_IF_ERROR(ParseRopeScaling(root, source, c.rope_scaling));
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalBool("tie_word_embeddings", c.tied_lm_head));
  std::string activation = "silu";
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalString("hidden_act", activation));
  if (activation != "silu")
    return keys.Unsupported("hidden_act", activation, "silu");

  // Biases and the q/k norm: the seams where these families differ.
  bool attention_bias = false, mlp_bias = false;
  switch (family) {
    case Family::kLlama:
      TEXTGEN_RETURN_IF_ERROR(
          keys.OptionalBool("attention_bias", attention_bias));
      TEXTGEN_RETURN_IF_ERROR(keys.OptionalBool("mlp_bias", mlp_bias));
      c.qkv_bias = c.attn_out_bias = attention_bias;
      c.mlp_bias = mlp_bias;
      break;
    case Family::kQwen2:  // Qwen2Attention: q/k/v with bias, o_proj without.
      c.qkv_bias = true;
      c.attn_out_bias = c.mlp_bias = false;
      break;
    case Family::kQwen3:
      TEXTGEN_RETURN_IF_ERROR(
          keys.OptionalBool("attention_bias", attention_bias));
      c.qkv_bias = c.attn_out_bias = attention_bias;
      c.mlp_bias = false;
      c.qk_norm = true;
      break;
    default:  // Mistral: no biases.
      c.qkv_bias = c.attn_out_bias = c.mlp_bias = false;
      break;
  }

  // Sliding windows. MistralConfig defaults to 4096 (null = none); Qwen2/3
  // use one only with use_sliding_window, and only from layer
  // max_window_layers on.
  if (family == Family::kMistral) {
    c.sliding_window = 4096;
    if (auto it = root.find("sliding_window");
        it != root.end() && it->is_null()) {
      c.sliding_window = 0;
    } else {
      TEXTGEN_RETURN_IF_ERROR(
          keys.OptionalInt("sliding_window", c.sliding_window));
    }
  } else if (family == Family::kQwen2 || family == Family::kQwen3) {
    bool use_sliding_window = false;
    TEXTGEN_RETURN_IF_ERROR(
        keys.OptionalBool("use_sliding_window", use_sliding_window));
    int window = 4096, first_layer = 28;  // Qwen2Config's defaults.
    TEXTGEN_RETURN_IF_ERROR(keys.OptionalInt("sliding_window", window));
    TEXTGEN_RETURN_IF_ERROR(keys.OptionalInt("max_window_layers", first_layer));
    if (use_sliding_window && first_layer < c.n_layers) {
      c.sliding_window = window;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text,
                                             const std::string& source) {
  const json root =
      json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object"));
  }
  KeyReader keys(root, source);
  std::string model_type;
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalString("model_type", model_type));

  ModelConfig config;
  if (model_type == "gpt2") {
    TEXTGEN_RETURN_IF_ERROR(ParseGpt2(keys, config));
  } else if (model_type.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": missing required key \"model_type\" (",
                     kSupportedModelTypes, ")"));
  } else {
    bool known = false;
    for (Family family :
         {Family::kLlama, Family::kMistral, Family::kQwen2, Family::kQwen3}) {
      if (model_type != FamilyName(family)) continue;
      TEXTGEN_RETURN_IF_ERROR(
          ParseLlamaLike(root, source, family, keys, config));
      known = true;
    }
    if (!known) {
      return keys.Unsupported("model_type", model_type, kSupportedModelTypes);
    }
  }
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  return ParseModelConfig(text, path);
}

}  // namespace textgen
