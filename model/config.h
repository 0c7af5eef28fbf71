// Model configuration read from a Hugging Face style `config.json`.
//
// Two families share one decoder; each difference between them is one field
// here (a seam), so the decoder never asks "which family?", only "which norm?",
// "which positions?":
//
//   GPT-2  (model_type "gpt2"):  LayerNorm with bias; learned or sinusoidal
//   positions;
//                                 GELU (tanh form) MLP; fused QKV with bias;
//                                 tied LM head.
//   LLaMA  (model_type "llama"): RMSNorm; rotary positions (RoPE); SwiGLU MLP;
//   grouped-query
//                                 attention; no biases; tied or separate LM
//                                 head.
//
// GPT-2 keys: vocab_size, n_positions, n_embd, n_layer, n_head, n_inner,
// layer_norm_epsilon, activation_function, plus textgen's one extra key
// `position_embedding_type`
// ("learned", the default, or "sinusoidal").
// LLaMA keys: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, max_position_embeddings,
// rms_norm_eps, rope_theta, tie_word_embeddings, hidden_act.
#ifndef TEXTGEN_MODEL_CONFIG_H_
#define TEXTGEN_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace textgen {

enum class Family { kGpt2, kLlama };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kSinusoidal, kRotary };
enum class FeedForwardKind { kGeluMlp, kSwiGlu };

struct ModelConfig {
  Family family = Family::kGpt2;
  int vocab_size = 0;
  int context_length = 0;  // Longest sequence the model accepts (n_positions).
  int d_model = 0;  // Width of the residual stream (n_embd / hidden_size).
  int n_layers = 0;
  int n_heads = 0;  // Query heads.
  int n_kv_heads =
      0;         // Key/value heads; < n_heads means grouped-query attention.
  int d_ff = 0;  // Hidden width of the feed-forward block.
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool tied_lm_head = true;
  bool has_bias = true;  // Projections carry biases (GPT-2) or not (LLaMA).

  NormKind norm = NormKind::kLayerNorm;
  PositionKind positions = PositionKind::kLearned;
  FeedForwardKind feed_forward = FeedForwardKind::kGeluMlp;

  int head_dim() const { return d_model / n_heads; }
  int queries_per_kv_head() const { return n_heads / n_kv_heads; }

  // Checks that the numbers fit together (positive sizes, heads dividing the
  // width, ...).
  absl::Status Validate() const;
};

// Parses the text of a config.json. `source` names it in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text,
                                             const std::string& source);

// Reads and parses a config.json file.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

// A one-line human summary, e.g. "gpt2: 4 layers, 8 heads, d_model 256, ...".
std::string DescribeConfig(const ModelConfig& config);

// The family's name as config.json's model_type spells it: "gpt2", "llama".
const char* FamilyName(Family family);

// "learned", "sinusoidal" or "rotary".
const char* PositionKindName(PositionKind positions);

// Parameters of a model of `config`, counted from its shapes (no weights
// needed). Tied heads count once; sinusoidal and rotary tables are not
// parameters.
int64_t CountParameters(const ModelConfig& config);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONFIG_H_
