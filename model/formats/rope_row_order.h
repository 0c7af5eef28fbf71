// The two layouts of rotary-position pairs in q/k projection rows, and the
// row order that converts between them.
//
// Meta's LLaMA code (and llama2.c, and llama.cpp's GGUF `llama` tensors)
// rotates interleaved pairs: rows (2i, 2i+1) of each head. Hugging Face's
// rotate-half RoPE, which the decoder uses, pairs row i with row i + D/2.
// Hugging Face's converter and llama.cpp's `permute` move rows between the
// two; checkpoints stored interleaved are read through this order.
#ifndef TEXTGEN_MODEL_FORMATS_ROPE_ROW_ORDER_H_
#define TEXTGEN_MODEL_FORMATS_ROPE_ROW_ORDER_H_

#include <cstddef>
#include <vector>

namespace textgen {

// Row order turning the interleaved layout of a [heads · D, C] projection
// into the rotate-half layout: within each head, new row s · D/2 + i is old
// row 2i + s.
inline std::vector<int> RotateHalfRowOrder(int heads, int head_dim) {
  std::vector<int> rows;
  rows.reserve(static_cast<size_t>(heads) * head_dim);
  for (int h = 0; h < heads; ++h) {
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < head_dim / 2; ++i) {
        rows.push_back(h * head_dim + 2 * i + s);
      }
    }
  }
  return rows;
}

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_ROPE_ROW_ORDER_H_
