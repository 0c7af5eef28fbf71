#include "model/config.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace textgen {

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
  if (explicit_head_dim == 0 && d_model % n_heads != 0) {
    return fail("model width ", d_model, " is not divisible by the ", n_heads,
                " heads");
  }
  if (explicit_head_dim < 0) {
    return fail("head_dim must be positive, got ", explicit_head_dim);
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
  if (rope_scaling.kind == RopeScaling::Kind::kFrequencyFactors) {
    const std::vector<float>& factors = rope_scaling.frequency_factors;
    if (positions != PositionKind::kRotary ||
        static_cast<int>(factors.size()) != head_dim() / 2) {
      return fail("RoPE frequency factors: ", factors.size(),
                  " given, the rotary head needs ", head_dim() / 2);
    }
    for (size_t i = 0; i < factors.size(); ++i) {
      if (!(factors[i] > 0.0f) || !std::isfinite(factors[i])) {
        return fail("RoPE frequency factor ", i, " is ", factors[i],
                    "; factors must be positive and finite");
      }
    }
  }
  if (encoder_layers < 0) {
    return fail("encoder_layers must not be negative, got ", encoder_layers);
  }
  if (is_encoder_decoder() &&
      (family != Family::kGpt2 || positions == PositionKind::kRotary)) {
    return fail(
        "encoder-decoder models are gpt2-shaped (LayerNorm, GELU, learned or "
        "sinusoidal positions), got ",
        FamilyName(family), " with ", PositionKindName(positions),
        " positions");
  }
  if (sliding_window > 0 && sliding_window < context_length) {
    return fail("sliding_window ", sliding_window,
                " is shorter than the served context of ", context_length,
                " positions: sliding-window attention is not implemented "
                "(serve at most ",
                sliding_window, " positions)");
  }
  return absl::OkStatus();
}

const char* FamilyName(Family family) {
  switch (family) {
    case Family::kGpt2:
      return "gpt2";
    case Family::kLlama:
      return "llama";
    case Family::kMistral:
      return "mistral";
    case Family::kQwen2:
      return "qwen2";
    case Family::kQwen3:
      return "qwen3";
  }
  return "";
}

const char* ArchitectureName(const ModelConfig& config) {
  return config.is_encoder_decoder() ? "encoder-decoder"
                                     : FamilyName(config.family);
}

std::string DescribeConfig(const ModelConfig& c) {
  const std::string encoder =
      c.is_encoder_decoder()
          ? absl::StrCat(" encoder-decoder: ", c.encoder_layers,
                         " encoder layers +")
          : "";
  return absl::StrCat(FamilyName(c.family), ":", encoder, " ", c.n_layers,
                      " layers, ", c.n_heads, " heads (", c.n_kv_heads,
                      " kv), d_model ", c.d_model, ", d_ff ", c.d_ff,
                      ", vocab ", c.vocab_size, ", context ", c.context_length,
                      ", ", PositionKindName(c.positions), " positions, ",
                      c.tied_lm_head ? "tied" : "separate", " head");
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
  const int64_t qkv = (c.n_heads + 2 * c.n_kv_heads) * hd;
  int64_t layer = 2 * norm + d * qkv + c.n_heads * hd * d;
  if (c.qkv_bias) layer += qkv;
  if (c.attn_out_bias) layer += d;
  if (c.qk_norm) layer += 2 * hd;  // Qwen3's q_norm and k_norm.
  const int64_t ff_in =
      c.feed_forward == FeedForwardKind::kSwiGlu ? 2 * c.d_ff : c.d_ff;
  layer += d * ff_in + c.d_ff * d;
  if (c.mlp_bias) layer += ff_in + d;
  int64_t total = c.vocab_size * d + c.n_layers * layer + norm;
  if (c.positions == PositionKind::kLearned) total += c.context_length * d;
  if (c.is_encoder_decoder()) {
    // Encoder: its blocks (the decoder's shape), final norm and positions;
    // each decoder block's cross-attention: a norm, q, [k | v] and out.
    total += c.encoder_layers * layer + norm;
    if (c.positions == PositionKind::kLearned) total += c.context_length * d;
    const int64_t cross =
        norm + (d * d + d) + (d * 2 * d + 2 * d) + (d * d + d);
    total += c.n_layers * cross;
  }
  if (!c.tied_lm_head) total += c.vocab_size * d;
  return total;
}

}  // namespace textgen
