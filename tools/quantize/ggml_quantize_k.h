// The K-quants' quantizers (ggml_quantize_k.cc), for ggml_quantize.cc's
// QuantizeRows: each quantizes `blocks` consecutive 256-value blocks of `x`
// into `y` as ggml's quantize_row_q*_K_ref does.
#ifndef TEXTGEN_TOOLS_QUANTIZE_GGML_QUANTIZE_K_H_
#define TEXTGEN_TOOLS_QUANTIZE_GGML_QUANTIZE_K_H_

#include <cstdint>

namespace textgen::quantize {

void QuantizeQ2K(const float* x, uint8_t* y, int64_t blocks);
void QuantizeQ3K(const float* x, uint8_t* y, int64_t blocks);
void QuantizeQ4K(const float* x, uint8_t* y, int64_t blocks);
void QuantizeQ5K(const float* x, uint8_t* y, int64_t blocks);
void QuantizeQ6K(const float* x, uint8_t* y, int64_t blocks);

}  // namespace textgen::quantize

#endif  // TEXTGEN_TOOLS_QUANTIZE_GGML_QUANTIZE_K_H_
