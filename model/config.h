// A model's configuration, and its validation. Each format reads it from its
// own keys: model/formats/hf_config.h from config.json (whose key names the
// fields follow), gguf_checkpoint.h from GGUF keys, llama2c_checkpoint.h from
// a header.
//
// Every family shares one decoder; each difference between them is one field
// here (a seam), so the decoder never asks "which family?", only "which norm?",
// "which positions?", "biases on q/k/v?":
//
//   gpt2     LayerNorm with bias; learned or sinusoidal positions; GELU (tanh)
//            MLP; fused QKV; biases everywhere; tied LM head.
//   llama    RMSNorm; rotary positions (rope_theta, optional "llama3"
//            rope_scaling); SwiGLU MLP; grouped-query attention; explicit
//            head_dim; attention_bias (q/k/v/o) and mlp_bias, default off.
//            SmolLM2 and TinyLlama are llama configs.
//   mistral  llama without biases; sliding_window must cover the served
//            context (sliding-window attention is not implemented).
//   qwen2    llama with q/k/v biases (always), no o_proj bias; sliding window
//            as mistral when use_sliding_window.
//   qwen3    qwen2 without the biases (attention_bias, default off), plus a
//            per-head RMSNorm of queries and keys before RoPE (q_norm/k_norm)
//            and an explicit head_dim (default 128, as Qwen3Config).
//
// Encoder–decoder models are the one other seam: a gpt2 config with
// "is_encoder_decoder": true and "encoder_layers": N (> 0) adds an encoder of
// N blocks (bidirectional self-attention, the same pre-LN block as the
// decoder's, a final LayerNorm) over a source sequence, and gives every
// decoder block a cross-attention sub-layer between self-attention and the
// feed-forward, as Hugging Face's GPT-2 with add_cross_attention:
//   x += CausalSelfAttention(LN_1(x));  x += CrossAttention(LN_cross(x),
//   context);  x += MLP(LN_2(x)).
// n_layer counts the decoder's blocks; n_positions bounds source and target
// alike. The tensor names are listed in model/weights.h.
#ifndef TEXTGEN_MODEL_CONFIG_H_
#define TEXTGEN_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace textgen {

enum class Family { kGpt2, kLlama, kMistral, kQwen2, kQwen3 };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kSinusoidal, kRotary };
enum class FeedForwardKind { kGeluMlp, kSwiGlu };

// How rotary frequencies are rescaled for long contexts (config.json's
// rope_scaling). kLlama3 is Llama 3.1's scheme: wavelengths longer than
// original_context / low_freq_factor are slowed by `factor`, shorter than
// original_context / high_freq_factor are kept, and those between are blended
// (model/rope.h computes it). kFrequencyFactors is the same kind of scheme
// given as one divisor per rotated pair: GGUF's `rope_freqs.weight` tensor
// (llama.cpp's freq_factors; its converter writes Llama 3.1's scaling so).
struct RopeScaling {
  enum class Kind { kNone, kLlama3, kFrequencyFactors };
  Kind kind = Kind::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 0;  // original_max_position_embeddings
  // kFrequencyFactors: head_dim / 2 positive divisors of inv_freq.
  std::vector<float> frequency_factors;
};

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
  RopeScaling rope_scaling;
  bool tied_lm_head = true;
  // Which projections carry biases. GPT-2: all; Qwen2: q/k/v only; LLaMA:
  // q/k/v/o with attention_bias, the MLP's with mlp_bias.
  bool qkv_bias = true;
  bool attn_out_bias = true;
  bool mlp_bias = true;
  // Qwen3: RMSNorm (weights [head_dim], eps norm_eps) over each query and key
  // head, before RoPE.
  bool qk_norm = false;
  // Width of one attention head; 0 means d_model / n_heads (config.json's
  // head_dim, which Qwen3 and some LLaMA/Mistral configs set explicitly).
  int explicit_head_dim = 0;
  // Mistral/Qwen2 sliding-window attention: keys further back than this are
  // not seen. 0 = none. Only a window that covers the whole context is
  // accepted (Validate), where it changes nothing.
  int sliding_window = 0;
  // Encoder blocks of an encoder–decoder model; 0 for a decoder-only one.
  int encoder_layers = 0;

  NormKind norm = NormKind::kLayerNorm;
  PositionKind positions = PositionKind::kLearned;
  FeedForwardKind feed_forward = FeedForwardKind::kGeluMlp;

  int head_dim() const {
    return explicit_head_dim > 0 ? explicit_head_dim : d_model / n_heads;
  }
  int queries_per_kv_head() const { return n_heads / n_kv_heads; }
  bool is_encoder_decoder() const { return encoder_layers > 0; }

  // Checks that the numbers fit together (positive sizes, heads dividing the
  // width, a sliding window no shorter than the context, ...).
  absl::Status Validate() const;
};

// A one-line human summary, e.g. "gpt2: 4 layers, 8 heads, d_model 256, ...".
std::string DescribeConfig(const ModelConfig& config);

// The family's name as config.json's model_type spells it: "gpt2", "llama",
// "mistral", "qwen2", "qwen3".
const char* FamilyName(Family family);

// The model's kind as ModelInfo.architecture reports it: "encoder-decoder",
// or for a decoder-only model its family's name (as before encoder–decoder
// models existed, so clients that read the family there keep working).
const char* ArchitectureName(const ModelConfig& config);

// "learned", "sinusoidal" or "rotary".
const char* PositionKindName(PositionKind positions);

// Parameters of a model of `config`, counted from its shapes (no weights
// needed). Tied heads count once; sinusoidal and rotary tables are not
// parameters.
int64_t CountParameters(const ModelConfig& config);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONFIG_H_
