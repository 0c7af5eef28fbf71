#include "tools/quantize/llama_ftype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/kernels/ggml_blocks.h"

namespace textgen::quantize {
namespace {

using kernels::BlockType;

constexpr uint32_t T(BlockType type) { return static_cast<uint32_t>(type); }
constexpr uint32_t kQ4_0 = T(BlockType::kQ4_0), kQ4_1 = T(BlockType::kQ4_1),
                   kQ5_0 = T(BlockType::kQ5_0), kQ5_1 = T(BlockType::kQ5_1),
                   kQ8_0 = T(BlockType::kQ8_0), kQ2_K = T(BlockType::kQ2_K),
                   kQ3_K = T(BlockType::kQ3_K), kQ4_K = T(BlockType::kQ4_K),
                   kQ5_K = T(BlockType::kQ5_K), kQ6_K = T(BlockType::kQ6_K),
                   kIQ4_NL = T(BlockType::kIQ4_NL),
                   kIQ4_XS = T(BlockType::kIQ4_XS);

// llama_ftype values.
enum : uint32_t {
  kFtypeQ2_K = 10,
  kFtypeQ3_K_S = 11,
  kFtypeQ3_K_M = 12,
  kFtypeQ3_K_L = 13,
  kFtypeQ4_K_S = 14,
  kFtypeQ4_K_M = 15,
  kFtypeQ5_K_S = 16,
  kFtypeQ5_K_M = 17,
  kFtypeIQ4_NL = 25,
  kFtypeIQ4_XS = 30,
};

// llama-quantize's QUANT_OPTIONS that this tool writes, in its order (the
// aliases first, so FileTypeNames lists them as llama-quantize does). Q2_K_S
// is left out: llama-quantize requires an importance matrix for it.
constexpr FileType kFileTypes[] = {
    {"Q4_0", 2, kQ4_0},
    {"Q4_1", 3, kQ4_1},
    {"Q5_0", 8, kQ5_0},
    {"Q5_1", 9, kQ5_1},
    {"Q2_K", kFtypeQ2_K, kQ2_K},
    {"Q3_K", kFtypeQ3_K_M, kQ3_K},
    {"Q3_K_S", kFtypeQ3_K_S, kQ3_K},
    {"Q3_K_M", kFtypeQ3_K_M, kQ3_K},
    {"Q3_K_L", kFtypeQ3_K_L, kQ3_K},
    {"IQ4_NL", kFtypeIQ4_NL, kIQ4_NL},
    {"IQ4_XS", kFtypeIQ4_XS, kIQ4_XS},
    {"Q4_K", kFtypeQ4_K_M, kQ4_K},
    {"Q4_K_S", kFtypeQ4_K_S, kQ4_K},
    {"Q4_K_M", kFtypeQ4_K_M, kQ4_K},
    {"Q5_K", kFtypeQ5_K_M, kQ5_K},
    {"Q5_K_S", kFtypeQ5_K_S, kQ5_K},
    {"Q5_K_M", kFtypeQ5_K_M, kQ5_K},
    {"Q6_K", 18, kQ6_K},
    {"Q8_0", 7, kQ8_0},
    {"F16", 1, kGgmlF16},
    {"BF16", 32, kGgmlBF16},
    {"F32", 0, kGgmlF32},
};

int BlockValues(uint32_t type) {
  const kernels::BlockLayout* layout = kernels::FindBlockLayout(type);
  return layout != nullptr ? layout->values : 1;
}

// More bits for the first and last eighth of the layers and every third
// layer in between.
bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
         (i_layer - n_layers / 8) % 3 == 2;
}

bool Has(const std::string& name, absl::string_view part) {
  return absl::StrContains(name, part);
}

}  // namespace

std::string GgmlTypeName(uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlF32:
      return "F32";
    case kGgmlF16:
      return "F16";
    case kGgmlBF16:
      return "BF16";
  }
  const kernels::BlockLayout* layout = kernels::FindBlockLayout(ggml_type);
  return layout != nullptr ? layout->name : absl::StrCat("type ", ggml_type);
}

bool IsBlockType(uint32_t ggml_type) {
  return kernels::FindBlockLayout(ggml_type) != nullptr;
}

const FileType* FindFileType(absl::string_view name) {
  for (const FileType& t : kFileTypes) {
    if (absl::EqualsIgnoreCase(name, t.name)) return &t;
  }
  return nullptr;
}

std::string FileTypeNames() {
  std::string names;
  for (const FileType& t : kFileTypes) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", t.name);
  }
  return names;
}

bool IsQuantizable(const std::string& name, int n_dims,
                   const std::string& arch) {
  // llama_model_quantize_impl's filter: matrices named *weight, except
  // norms, expert gates, and small matrices of other architectures (Gemma
  // 3n's altup/laurel, Mamba's, LFM2's and RWKV's, T5's relative bias).
  if (!absl::EndsWith(name, "weight") || n_dims < 2) return false;
  for (absl::string_view part : {"_norm.weight",
                                 "ffn_gate_inp.weight",
                                 "altup",
                                 "laurel",
                                 "per_layer_model_proj",
                                 "ssm_conv1d.weight",
                                 "shortconv.conv.weight",
                                 "time_mix_first.weight",
                                 "time_mix_w0.weight",
                                 "time_mix_w1.weight",
                                 "time_mix_w2.weight",
                                 "time_mix_v0.weight",
                                 "time_mix_v1.weight",
                                 "time_mix_v2.weight",
                                 "time_mix_a0.weight",
                                 "time_mix_a1.weight",
                                 "time_mix_a2.weight",
                                 "time_mix_g1.weight",
                                 "time_mix_g2.weight",
                                 "time_mix_decay_w1.weight",
                                 "time_mix_decay_w2.weight",
                                 "time_mix_lerp_fused.weight",
                                 "attn_rel_b.weight"}) {
    if (Has(name, part)) return false;
  }
  // Only architectures with learned positions have a position_embd (its
  // name elsewhere is llama.cpp's "__missing__", matching nothing).
  if (arch == "gpt2" && name == "position_embd.weight") return false;
  return true;
}

absl::StatusOr<uint32_t> TensorTypeChooser::Choose(const std::string& name,
                                                   int64_t row_values) {
  uint32_t type = file_type_.default_type;
  // The output (or the embedding it is tied to): Q6_K, or Q8_0 when the
  // rows do not fit the file type's block.
  if (name == "output.weight" ||
      (!facts_.has_output && name == "token_embd.weight")) {
    if (row_values % BlockValues(type) != 0) {
      type = kQ8_0;
    } else if (type != kQ8_0) {
      type = kQ6_K;
    }
  } else if (name != "token_embd.weight") {
    type = MixType(name, type);
  }
  if (row_values % BlockValues(type) == 0) return type;
  // The row length does not fit: a type with 32-value blocks, else F16.
  switch (type) {
    case kQ2_K:
    case kQ3_K:
    case kIQ4_XS:
      type = kIQ4_NL;
      break;
    case kQ4_K:
      type = kQ5_0;
      break;
    case kQ5_K:
      type = kQ5_1;
      break;
    case kQ6_K:
      type = kQ8_0;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, ": rows of ", row_values,
                       " values do not fit ", GgmlTypeName(type),
                       " blocks (llama-quantize: unsupported tensor "
                       "size)"));
  }
  if (row_values % BlockValues(type) != 0) type = kGgmlF16;
  ++fallbacks_;
  return type;
}

uint32_t TensorTypeChooser::MixType(const std::string& name, uint32_t type) {
  const uint32_t ftype = file_type_.ftype;
  const int n_gqa =
      facts_.n_head_kv == 0 ? 0 : facts_.n_head / facts_.n_head_kv;
  if (Has(name, "attn_v.weight")) {
    if (ftype == kFtypeQ2_K) {
      type = n_gqa >= 4 ? kQ4_K : kQ3_K;
    } else if (ftype == kFtypeQ3_K_M) {
      type = i_attention_wv_ < 2 ? kQ5_K : kQ4_K;
    } else if (ftype == kFtypeQ3_K_L) {
      type = kQ5_K;
    } else if ((ftype == kFtypeIQ4_NL || ftype == kFtypeIQ4_XS) && n_gqa >= 4) {
      type = kQ5_K;
    } else if ((ftype == kFtypeQ4_K_M || ftype == kFtypeQ5_K_M) &&
               UseMoreBits(i_attention_wv_, facts_.n_attention_wv)) {
      type = kQ6_K;
    } else if (ftype == kFtypeQ4_K_S && i_attention_wv_ < 4) {
      type = kQ5_K;
    }
    if (facts_.is_70b && (type == kQ3_K || type == kQ4_K)) type = kQ5_K;
    ++i_attention_wv_;
  } else if (Has(name, "attn_k.weight") || Has(name, "attn_q.weight")) {
    // Changed only for mixture-of-experts models and IQ3 file types.
  } else if (Has(name, "ffn_down")) {
    const int i_layer = i_ffn_down_, n_layer = facts_.n_layer;
    if (ftype == kFtypeQ2_K) {
      type = kQ3_K;
    } else if (ftype == kFtypeQ3_K_M) {
      type = i_layer < n_layer / 16 ? kQ5_K : kQ4_K;
    } else if (ftype == kFtypeQ3_K_L) {
      type = kQ5_K;
    } else if (ftype == kFtypeQ4_K_M) {
      if (UseMoreBits(i_layer, n_layer)) type = kQ6_K;
    } else if (i_layer < n_layer / 8 &&
               (ftype == kFtypeIQ4_NL || ftype == kFtypeIQ4_XS)) {
      type = kQ5_K;
    } else if (ftype == kFtypeQ5_K_M && UseMoreBits(i_layer, n_layer)) {
      type = kQ6_K;
    } else if (ftype == kFtypeQ4_K_S && i_layer < n_layer / 8) {
      type = kQ5_K;
    }
    ++i_ffn_down_;
  } else if (Has(name, "attn_output.weight")) {
    if (ftype == kFtypeQ2_K) {
      type = kQ3_K;
    } else if (ftype == kFtypeQ3_K_M) {
      type = kQ4_K;
    } else if (ftype == kFtypeQ3_K_L) {
      type = kQ5_K;
    }
  } else if (Has(name, "attn_qkv.weight")) {
    if (ftype == kFtypeQ3_K_M || ftype == kFtypeQ3_K_L) {
      type = kQ4_K;
    } else if (ftype == kFtypeQ4_K_M) {
      type = kQ5_K;
    } else if (ftype == kFtypeQ5_K_M) {
      type = kQ6_K;
    }
  }
  return type;
}

}  // namespace textgen::quantize
