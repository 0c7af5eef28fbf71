// llama-quantize's file types (Q4_K_M, Q5_K_M, Q8_0, ...) and its rules for
// which tensor of a model gets which ggml type (llama.cpp's
// src/llama-quant.cpp: the tensor filter in llama_model_quantize_impl and
// llama_tensor_get_type), ported so textgen_quantize writes the same mix:
//   - only 2-D+ tensors named *weight are quantized, never norms,
//     position_embd (GPT-2) or token_types; the rest keep their type;
//   - output.weight (or token_embd.weight when the model ties its output to
//     it) gets Q6_K, or Q8_0 when its rows are not a multiple of the type's
//     block;
//   - the K-quant mixes give attn_v, ffn_down, attn_output and attn_qkv more
//     bits in the layers use_more_bits picks (the first and last eighth and
//     every third in between) or by GQA ratio;
//   - a row length that is not a multiple of 256 falls back: Q2_K, Q3_K,
//     IQ4_XS to IQ4_NL, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and to F16
//     if even 32 does not divide it.
// Ported for the architectures textgen serves (llama, qwen2, qwen3, gpt2;
// gguf_quantize.h refuses others and mixture-of-experts models): the
// branches for Falcon, 8-expert models and the IQ1/IQ2/IQ3/TQ/MXFP4 file
// types (types not written here) are left out.
#ifndef TEXTGEN_TOOLS_QUANTIZE_LLAMA_FTYPE_H_
#define TEXTGEN_TOOLS_QUANTIZE_LLAMA_FTYPE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace textgen::quantize {

// ggml's numbers for the float types (the block types are
// kernels::BlockType's).
inline constexpr uint32_t kGgmlF32 = 0;
inline constexpr uint32_t kGgmlF16 = 1;
inline constexpr uint32_t kGgmlBF16 = 30;

// The name ggml gives type `ggml_type` ("Q4_K", "F16"), or "type N".
std::string GgmlTypeName(uint32_t ggml_type);
// Whether `ggml_type` is a block type (ggml_is_quantized).
bool IsBlockType(uint32_t ggml_type);

// A llama_ftype: what general.file_type says and what the mix starts from.
struct FileType {
  const char* name;       // llama-quantize's name: "Q4_K_M".
  uint32_t ftype;         // llama_ftype, written as general.file_type.
  uint32_t default_type;  // The ggml type most tensors get.
};

// The file type llama-quantize calls `name` (case-insensitive; "Q3_K",
// "Q4_K", "Q5_K" are its aliases for the _M mixes), or null.
const FileType* FindFileType(absl::string_view name);
// "Q4_0, Q4_1, ..." for usage messages.
std::string FileTypeNames();

// What the rules read of a model (llama.cpp's hparams and loader state).
struct ModelFacts {
  std::string arch;
  int n_layer = 0;
  int n_head = 0;     // Of layer 0.
  int n_head_kv = 0;  // Of layer 0.
  int n_expert = 0;
  bool is_70b = false;      // llama.cpp's LLM_TYPE_70B for this arch.
  bool has_output = false;  // An output.weight tensor.
  int n_attention_wv = 0;   // attn_v / attn_qkv / attn_kv_b weights.
};

// Whether llama-quantize quantizes tensor `name` of `n_dims` dimensions
// (ggml_n_dims: trailing dimensions of 1 not counted) in a model of `arch`.
bool IsQuantizable(const std::string& name, int n_dims,
                   const std::string& arch);

// llama_tensor_get_type, with its counters: call Choose for every
// quantizable tensor in llama-quantize's order (layers in order; see
// gguf_quantize.h), as the counters number attn_v and ffn_down by layer.
class TensorTypeChooser {
 public:
  TensorTypeChooser(ModelFacts facts, const FileType& file_type)
      : facts_(std::move(facts)), file_type_(file_type) {}

  // The type of tensor `name`, whose rows hold `row_values` values (ne[0]).
  // INVALID_ARGUMENT when no type fits the row length (as llama.cpp's
  // "Unsupported tensor size").
  absl::StatusOr<uint32_t> Choose(const std::string& name, int64_t row_values);

  // Tensors that fell back for their row length (llama.cpp's n_fallback).
  int fallbacks() const { return fallbacks_; }

 private:
  uint32_t MixType(const std::string& name, uint32_t type);

  const ModelFacts facts_;
  const FileType& file_type_;
  int i_attention_wv_ = 0;
  int i_ffn_down_ = 0;
  int fallbacks_ = 0;
};

}  // namespace textgen::quantize

#endif  // TEXTGEN_TOOLS_QUANTIZE_LLAMA_FTYPE_H_
