// A ModelConfig (model/config.h) read from a Hugging Face `config.json`.
//
// GPT-2 keys: vocab_size, n_positions, n_embd, n_layer, n_head, n_inner,
// layer_norm_epsilon, activation_function, plus textgen's one extra key
// `position_embedding_type` ("learned", the default, or "sinusoidal"), and
// for an encoder–decoder model "is_encoder_decoder": true with
// "encoder_layers": N.
// LLaMA-like keys (llama, mistral, qwen2, qwen3): vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps,
// rope_theta, rope_scaling, tie_word_embeddings, hidden_act, attention_bias,
// mlp_bias, sliding_window, use_sliding_window, max_window_layers. Defaults
// are transformers' for each model_type.
#ifndef TEXTGEN_MODEL_FORMATS_HF_CONFIG_H_
#define TEXTGEN_MODEL_FORMATS_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/config.h"

namespace textgen {

// Parses the text of a config.json. `source` names it in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text,
                                             const std::string& source);

// Reads and parses a config.json file.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_HF_CONFIG_H_
