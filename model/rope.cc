#include "model/rope.h"

#include <cmath>

namespace textgen {

std::vector<double> RotaryInverseFrequencies(const ModelConfig& config) {
  const int d = config.head_dim();
  std::vector<double> inv_freq(d / 2);
  for (int i = 0; i < d / 2; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(config.rope_theta),
                           -2.0 * i / static_cast<double>(d));
  }
  const RopeScaling& s = config.rope_scaling;
  if (s.kind == RopeScaling::Kind::kFrequencyFactors) {
    for (int i = 0; i < d / 2; ++i) inv_freq[i] /= s.frequency_factors[i];
    return inv_freq;
  }
  if (s.kind != RopeScaling::Kind::kLlama3) return inv_freq;

  const double factor = s.factor, low = s.low_freq_factor,
               high = s.high_freq_factor, old_context = s.original_context;
  const double low_freq_wavelen = old_context / low;
  const double high_freq_wavelen = old_context / high;
  const double kPi = 3.14159265358979323846;
  for (double& f : inv_freq) {
    const double wavelen = 2.0 * kPi / f;
    if (wavelen > low_freq_wavelen) {
      f /= factor;  // Long wavelengths: interpolated.
    } else if (wavelen >= high_freq_wavelen) {
      // In between: a blend of the two.
      const double smooth = (old_context / wavelen - low) / (high - low);
      f = (1.0 - smooth) * f / factor + smooth * f;
    }  // Short wavelengths: unchanged.
  }
  return inv_freq;
}

}  // namespace textgen
