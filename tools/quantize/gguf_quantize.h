// textgen_quantize's work: a GGUF model with F32 / F16 / BF16 tensors in,
// the same model quantized to one of llama-quantize's file types out, byte
// for byte the file llama.cpp's llama-quantize writes for the same input and
// type (without an importance matrix):
//   - metadata: every key copied as stored, in order, except split.* (a
//     shard's bookkeeping) and general.quantization_version /
//     general.file_type, which move to the end with ggml's quantization
//     version (2) and the file type's llama_ftype;
//   - tensors in llama.cpp's loader order (non-layer tensors first, then
//     blk.0, blk.1, ... numerically; by name within each), each with
//     llama.cpp's n_dims (trailing dimensions of 1 dropped);
//   - types from llama_ftype.h's rules; values quantized by ggml_quantize.h
//     (widened exactly from F16 / BF16 first, as llama.cpp does);
//   - data padded to the alignment (32; an input's general.alignment is kept
//     and honoured, where llama-quantize would keep the key but pad to 32).
// Refused, naming the reason: tensors holding NaN or infinity (llama.cpp's
// loader checks them too), architectures other than llama / qwen2 / qwen3 /
// gpt2, mixture-of-experts models, split files, and quantized input
// tensors that would need requantizing.
#ifndef TEXTGEN_TOOLS_QUANTIZE_GGUF_QUANTIZE_H_
#define TEXTGEN_TOOLS_QUANTIZE_GGUF_QUANTIZE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "tools/quantize/llama_ftype.h"

namespace textgen::quantize {

struct QuantizeOptions {
  // Every quantizable tensor gets the file type's default type, no mix
  // (llama-quantize --pure); a row length that does not fit is an error.
  bool pure = false;
  // Threads quantizing a tensor's rows (the bytes do not depend on it);
  // 0: one per CPU.
  int threads = 0;
  // Called with one line per tensor ("[  3/ 25] blk.0.attn_v.weight
  // [320, 64] F32 -> Q6_K"); may be empty.
  std::function<void(const std::string&)> log;
};

// Writes `output` from `input` quantized to `file_type`. The output is
// written beside itself first and renamed into place, so a failure leaves
// no partial file.
absl::Status QuantizeGguf(const std::string& input, const std::string& output,
                          const FileType& file_type,
                          const QuantizeOptions& options);

}  // namespace textgen::quantize

#endif  // TEXTGEN_TOOLS_QUANTIZE_GGUF_QUANTIZE_H_
