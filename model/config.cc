#include "model/config.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/file_util.h"
#include "model/status_macros.h"

namespace textgen {
namespace {

using nlohmann::json;

// Reads config keys with errors that name the file and the key.
class KeyReader {
 public:
  KeyReader(const json& object, const std::string& source)
      : object_(object), source_(source) {}

  absl::Status Int(const char* key, int* out) {
    auto it = object_.find(key);
    if (it == object_.end()) return Missing(key);
    if (!it->is_number_integer()) return WrongType(key, "an integer");
    const auto value = it->get<int64_t>();
    if (value < 0 || value > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": key \"", key, "\" = ", value, " is out of range"));
    }
    *out = static_cast<int>(value);
    return absl::OkStatus();
  }

  // An optional integer; null or absent leaves *out unchanged.
  absl::Status OptionalInt(const char* key, int* out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    return Int(key, out);
  }

  absl::Status OptionalFloat(const char* key, float* out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number()) return WrongType(key, "a number");
    *out = it->get<float>();
    return absl::OkStatus();
  }

  absl::Status OptionalBool(const char* key, bool* out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_boolean()) return WrongType(key, "true or false");
    *out = it->get<bool>();
    return absl::OkStatus();
  }

  absl::Status OptionalString(const char* key, std::string* out) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return WrongType(key, "a string");
    *out = it->get<std::string>();
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
  c.has_bias = true;
  c.tied_lm_head = true;
  TEXTGEN_RETURN_IF_ERROR(keys.Int("vocab_size", &c.vocab_size));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_positions", &c.context_length));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_embd", &c.d_model));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_layer", &c.n_layers));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("n_head", &c.n_heads));
  c.n_kv_heads = c.n_heads;
  c.d_ff = 4 * c.d_model;  // GPT-2's default when n_inner is null.
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalInt("n_inner", &c.d_ff));
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalFloat("layer_norm_epsilon", &c.norm_eps));
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalBool("tie_word_embeddings", &c.tied_lm_head));
  if (!c.tied_lm_head) {
    return keys.Unsupported("tie_word_embeddings", "false", "true for gpt2");
  }

  std::string activation = "gelu_new";
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalString("activation_function", &activation));
  // GPT-2 names the tanh approximation of GELU "gelu_new" (also
  // "gelu_pytorch_tanh").
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh") {
    return keys.Unsupported("activation_function", activation,
                            "gelu_new, gelu_pytorch_tanh");
  }

  std::string positions = "learned";
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalString("position_embedding_type", &positions));
  if (positions == "learned" || positions == "absolute") {
    c.positions = PositionKind::kLearned;
  } else if (positions == "sinusoidal") {
    c.positions = PositionKind::kSinusoidal;
  } else {
    return keys.Unsupported("position_embedding_type", positions,
                            "learned, sinusoidal");
  }
  return absl::OkStatus();
}

absl::Status ParseLlama(KeyReader& keys, ModelConfig& c) {
  c.family = Family::kLlama;
  c.norm = NormKind::kRmsNorm;
  c.feed_forward = FeedForwardKind::kSwiGlu;
  c.positions = PositionKind::kRotary;
  c.has_bias = false;
  c.tied_lm_head = false;  // LlamaConfig's default.
  c.norm_eps = 1e-6f;      // LlamaConfig's default.
  TEXTGEN_RETURN_IF_ERROR(keys.Int("vocab_size", &c.vocab_size));
  TEXTGEN_RETURN_IF_ERROR(
      keys.Int("max_position_embeddings", &c.context_length));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("hidden_size", &c.d_model));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("intermediate_size", &c.d_ff));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("num_hidden_layers", &c.n_layers));
  TEXTGEN_RETURN_IF_ERROR(keys.Int("num_attention_heads", &c.n_heads));
  c.n_kv_heads = c.n_heads;
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalInt("num_key_value_heads", &c.n_kv_heads));
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalFloat("rms_norm_eps", &c.norm_eps));
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalFloat("rope_theta", &c.rope_theta));
  TEXTGEN_RETURN_IF_ERROR(
      keys.OptionalBool("tie_word_embeddings", &c.tied_lm_head));
  std::string activation = "silu";
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalString("hidden_act", &activation));
  if (activation != "silu")
    return keys.Unsupported("hidden_act", activation, "silu");
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  auto fail = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (vocab_size < 1)
    return fail("vocab_size must be positive, got ", vocab_size);
  if (context_length < 1)
    return fail("context length must be positive, got ", context_length);
  if (d_model < 1) return fail("model width must be positive, got ", d_model);
  if (n_layers < 1)
    return fail("number of layers must be positive, got ", n_layers);
  if (n_heads < 1)
    return fail("number of heads must be positive, got ", n_heads);
  if (d_ff < 1) return fail("feed-forward width must be positive, got ", d_ff);
  if (d_model % n_heads != 0) {
    return fail("model width ", d_model, " is not divisible by the ", n_heads,
                " heads");
  }
  if (n_kv_heads < 1 || n_heads % n_kv_heads != 0) {
    return fail("num_key_value_heads ", n_kv_heads,
                " must divide num_attention_heads ", n_heads);
  }
  if (positions == PositionKind::kSinusoidal && d_model % 2 != 0) {
    return fail("sinusoidal positions need an even width, got ", d_model);
  }
  if (positions == PositionKind::kRotary && head_dim() % 2 != 0) {
    return fail("rotary positions need an even head size, got ", head_dim());
  }
  if (!(norm_eps > 0.0f))
    return fail("norm epsilon must be positive, got ", norm_eps);
  if (!(rope_theta > 0.0f))
    return fail("rope_theta must be positive, got ", rope_theta);
  return absl::OkStatus();
}

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
  TEXTGEN_RETURN_IF_ERROR(keys.OptionalString("model_type", &model_type));

  ModelConfig config;
  if (model_type == "gpt2") {
    TEXTGEN_RETURN_IF_ERROR(ParseGpt2(keys, config));
  } else if (model_type == "llama") {
    TEXTGEN_RETURN_IF_ERROR(ParseLlama(keys, config));
  } else if (model_type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": missing required key \"model_type\" (gpt2 or llama)"));
  } else {
    return keys.Unsupported("model_type", model_type, "gpt2, llama");
  }
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseModelConfig(*text, path);
}

std::string DescribeConfig(const ModelConfig& c) {
  return absl::StrCat(FamilyName(c.family), ": ", c.n_layers, " layers, ",
                      c.n_heads, " heads (", c.n_kv_heads, " kv), d_model ",
                      c.d_model, ", d_ff ", c.d_ff, ", vocab ", c.vocab_size,
                      ", context ", c.context_length, ", ",
                      PositionKindName(c.positions), " positions, ",
                      c.tied_lm_head ? "tied" : "separate", " head");
}

const char* FamilyName(Family family) {
  switch (family) {
    case Family::kGpt2:
      return "gpt2";
    case Family::kLlama:
      return "llama";
  }
  return "";
}

const char* PositionKindName(PositionKind positions) {
  switch (positions) {
    case PositionKind::kLearned:
      return "learned";
    case PositionKind::kSinusoidal:
      return "sinusoidal";
    case PositionKind::kRotary:
      return "rotary";
  }
  return "";
}

int64_t CountParameters(const ModelConfig& c) {
  const int64_t d = c.d_model, hd = c.head_dim();
  const int64_t norm = c.norm == NormKind::kLayerNorm ? 2 * d : d;
  const int64_t bias = c.has_bias ? 1 : 0;
  const int64_t qkv = (c.n_heads + 2 * c.n_kv_heads) * hd;
  int64_t layer =
      2 * norm + d * qkv + bias * qkv + c.n_heads * hd * d + bias * d;
  layer += c.feed_forward == FeedForwardKind::kSwiGlu
               ? d * 2 * c.d_ff + c.d_ff * d
               : d * c.d_ff + bias * c.d_ff + c.d_ff * d + bias * d;
  int64_t total = c.vocab_size * d + c.n_layers * layer + norm;
  if (c.positions == PositionKind::kLearned) total += c.context_length * d;
  if (!c.tied_lm_head) total += c.vocab_size * d;
  return total;
}

}  // namespace textgen
