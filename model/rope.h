// Rotary position embedding (RoPE) frequencies, from a model's config.
//
// Pair i of a head (dimensions i and i + head_dim/2, Hugging Face's "rotate
// half" layout) turns by position × inv_freq[i], with
//   inv_freq[i] = rope_theta^(-2i / head_dim)
// and, for rope_scaling type "llama3" (Llama 3.1 and later), the long
// wavelengths slowed down, as transformers' _compute_llama3_parameters does:
//   wavelen = 2π / inv_freq[i]
//   wavelen > original_context / low_freq_factor   →  inv_freq[i] / factor
//   wavelen < original_context / high_freq_factor  →  inv_freq[i]
//   between: (1 - s) · inv_freq[i] / factor + s · inv_freq[i],
//            s = (original_context / wavelen - low_freq_factor)
//                / (high_freq_factor - low_freq_factor).
// For kFrequencyFactors (GGUF's rope_freqs tensor), inv_freq[i] is divided by
// frequency_factors[i], as llama.cpp does.
// Computed in double: the tables built from it are rounded to float once.
#ifndef TEXTGEN_MODEL_ROPE_H_
#define TEXTGEN_MODEL_ROPE_H_

#include <vector>

#include "model/config.h"

namespace textgen {

// head_dim / 2 inverse frequencies, one per rotated pair.
std::vector<double> RotaryInverseFrequencies(const ModelConfig& config);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_ROPE_H_
