#include "model/formats/gguf_checkpoint.h"

#include <malloc.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/formats/rope_row_order.h"
#include "model/kernels/ggml_blocks.h"
#include "model/weights.h"

namespace textgen {
namespace {

// Reads the `<arch>.*` keys with errors naming the file and key.
class ArchKeys {
 public:
  ArchKeys(const GgufFile& file, std::string arch)
      : file_(file), arch_(std::move(arch)) {}

  std::string Key(absl::string_view name) const {
    return absl::StrCat(arch_, ".", name);
  }

  // A positive size that fits an int comfortably: 1 .. kMaxSize.
  static constexpr int64_t kMaxSize = int64_t{1} << 30;
  absl::StatusOr<int> Size(absl::string_view name) const {
    const std::string key = Key(name);
    TEXTGEN_ASSIGN_OR_RETURN(const uint64_t v, file_.GetUint(key));
    if (v < 1 || v > static_cast<uint64_t>(kMaxSize)) {
      return absl::InvalidArgumentError(absl::StrCat(
          file_.source(), ": key '", key, "' = ", v, " is out of range"));
    }
    return static_cast<int>(v);
  }
  // Size(name), or `fallback` when the key is absent. A fallback derived from
  // other keys (4 × embedding_length) is held to the same range: computed in
  // int64, so it cannot overflow first.
  absl::StatusOr<int> OptionalSize(absl::string_view name,
                                   int64_t fallback) const {
    if (Has(name)) return Size(name);
    if (fallback < 1 || fallback > kMaxSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          file_.source(), ": key '", Key(name), "' is absent and its default, ",
          fallback, ", is out of range"));
    }
    return static_cast<int>(fallback);
  }
  absl::StatusOr<float> Float(absl::string_view name) const {
    TEXTGEN_ASSIGN_OR_RETURN(const double v, file_.GetFloat(Key(name)));
    return static_cast<float>(v);
  }
  absl::StatusOr<float> OptionalFloat(absl::string_view name,
                                      float fallback) const {
    if (!Has(name)) return fallback;
    return Float(name);
  }
  bool Has(absl::string_view name) const {
    return file_.FindKey(Key(name)) != nullptr;
  }
  absl::Status Unsupported(absl::string_view name,
                           const std::string& why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_.source(), ": key '", Key(name), "': ", why));
  }

 private:
  const GgufFile& file_;
  const std::string arch_;
};

constexpr char kRopeFreqs[] = "rope_freqs.weight";

absl::Status FileError(const GgufFile& file, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(file.source(), ": ", problem));
}

// Refuses the keys and tensors that change the computation in ways the decoder
// does not implement, rather than running a different model.
absl::Status RefuseUnsupported(const GgufFile& file, const ArchKeys& keys,
                               const ModelConfig& c) {
  if (keys.Has("rope.scaling.type")) {
    TEXTGEN_ASSIGN_OR_RETURN(const std::string type,
                             file.GetString(keys.Key("rope.scaling.type")));
    if (type != "none") {
      return keys.Unsupported(
          "rope.scaling.type",
          absl::StrCat("RoPE scaling '", type, "' is not supported"));
    }
  }
  for (const char* scale : {"rope.scale_linear", "rope.scale"}) {
    if (!keys.Has(scale)) continue;
    TEXTGEN_ASSIGN_OR_RETURN(const float s, keys.Float(scale));
    if (s != 1.0f) {
      return keys.Unsupported(
          scale, absl::StrCat("RoPE scale ", s, " is not supported"));
    }
  }
  if (keys.Has("expert_count")) {
    TEXTGEN_ASSIGN_OR_RETURN(const uint64_t experts,
                             file.GetUint(keys.Key("expert_count")));
    if (experts > 0) {
      return keys.Unsupported("expert_count",
                              absl::StrCat(experts,
                                           " experts: mixture-of-experts "
                                           "is not supported"));
    }
  }
  const int head_dim = c.head_dim();
  for (const char* length :
       {"attention.key_length", "attention.value_length"}) {
    TEXTGEN_ASSIGN_OR_RETURN(const int n, keys.OptionalSize(length, head_dim));
    if (n != head_dim) {
      return keys.Unsupported(
          length, absl::StrCat(n, " differs from the head size ", head_dim,
                               " (keys and values of different sizes are "
                               "not supported)"));
    }
  }
  if (c.positions == PositionKind::kRotary) {
    TEXTGEN_ASSIGN_OR_RETURN(
        const int rope_dims,
        keys.OptionalSize("rope.dimension_count", head_dim));
    if (rope_dims != head_dim) {
      return keys.Unsupported(
          "rope.dimension_count",
          absl::StrCat(rope_dims, " rotary dimensions of a ", head_dim,
                       "-wide head: partial rotary is not supported"));
    }
  }
  return absl::OkStatus();
}

// Maps GGUF tensors to Hugging Face names, checking them by their GGUF names.
class TensorMapper {
 public:
  explicit TensorMapper(const GgufFile& file) : file_(file) {}

  // How a tensor's stored rows become the Hugging Face tensor's.
  enum class Layout {
    kAsIs,
    kTranspose,  // [out, in] stored, GPT-2 Conv1D [in, out] wanted.
  };

  // Maps GGUF tensor `name`, which must have PyTorch shape `shape`, to
  // `hf_name`. `rows`: an order of its rows (empty: as stored).
  absl::Status Map(const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& hf_name, Layout layout = Layout::kAsIs,
                   const std::vector<int>& rows = {}) {
    TEXTGEN_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, shape));
    GgufTensors::Entry entry;
    entry.tensor = t;
    entry.transposed = layout == Layout::kTranspose;
    entry.shape =
        entry.transposed ? std::vector<int64_t>{shape[1], shape[0]} : shape;
    entry.rows = rows;
    mapped_.emplace_back(hf_name, std::move(entry));
    return absl::OkStatus();
  }

  bool Has(const std::string& name) const {
    return file_.FindTensor(name) != nullptr;
  }

  // The tensor, checked to exist with `shape`; marked as used.
  absl::StatusOr<const GgufTensorInfo*> Find(
      const std::string& name, const std::vector<int64_t>& shape) {
    const GgufTensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(file_.source(), ": missing tensor '", name, "'"));
    }
    if (t->Shape() != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          file_.source(), ": tensor '", name, "': shape ",
          ShapeToString(t->Shape()), ", expected ", ShapeToString(shape)));
    }
    used_.insert(name);
    return t;
  }

  // Fails on the first tensor that no Map or Find asked for.
  absl::Status CheckAllUsed(const ModelConfig& config) const {
    for (const GgufTensorInfo& t : file_.tensors()) {
      if (used_.count(t.name)) continue;
      return absl::InvalidArgumentError(
          absl::StrCat(file_.source(), ": unexpected tensor '", t.name, "' ",
                       ShapeToString(t.Shape()), "; the keys describe ",
                       DescribeConfig(config)));
    }
    return absl::OkStatus();
  }

  std::vector<std::pair<std::string, GgufTensors::Entry>> Take() {
    return std::move(mapped_);
  }

 private:
  const GgufFile& file_;
  std::vector<std::pair<std::string, GgufTensors::Entry>> mapped_;
  std::set<std::string> used_;
};

absl::Status MapLlama(const ModelConfig& c, TensorMapper& m) {
  const int64_t C = c.d_model, F = c.d_ff, V = c.vocab_size, D = c.head_dim();
  const int64_t Q = c.n_heads * D, KV = c.n_kv_heads * D;
  if (m.Has(kRopeFreqs)) {  // Read into the config by GgufModelConfig.
    TEXTGEN_RETURN_IF_ERROR(m.Find(kRopeFreqs, {D / 2}).status());
  }
  using L = TensorMapper::Layout;
  TEXTGEN_RETURN_IF_ERROR(
      m.Map("token_embd.weight", {V, C}, "model.embed_tokens.weight"));
  // Only llama.cpp's `llama` tensors are stored in interleaved RoPE order
  // (qwen2/qwen3 use NeoX's rotate-half, as the decoder does). A bias is a
  // column beside its weight's rows: permuted the same way.
  const bool interleaved = c.family == Family::kLlama;
  const std::vector<int> q_rows =
      interleaved ? RotateHalfRowOrder(c.n_heads, D) : std::vector<int>{};
  const std::vector<int> k_rows =
      interleaved ? RotateHalfRowOrder(c.n_kv_heads, D) : std::vector<int>{};
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string b = absl::StrCat("blk.", i, ".");
    const std::string p = absl::StrCat("model.layers.", i, ".");
    auto map = [&](const char* gguf, std::vector<int64_t> shape, const char* hf,
                   const std::vector<int>& rows = {}) {
      return m.Map(b + gguf, shape, p + hf, L::kAsIs, rows);
    };
    TEXTGEN_RETURN_IF_ERROR(
        map("attn_norm.weight", {C}, "input_layernorm.weight"));
    TEXTGEN_RETURN_IF_ERROR(
        map("attn_q.weight", {Q, C}, "self_attn.q_proj.weight", q_rows));
    TEXTGEN_RETURN_IF_ERROR(
        map("attn_k.weight", {KV, C}, "self_attn.k_proj.weight", k_rows));
    TEXTGEN_RETURN_IF_ERROR(
        map("attn_v.weight", {KV, C}, "self_attn.v_proj.weight"));
    if (c.qkv_bias) {
      TEXTGEN_RETURN_IF_ERROR(
          map("attn_q.bias", {Q}, "self_attn.q_proj.bias", q_rows));
      TEXTGEN_RETURN_IF_ERROR(
          map("attn_k.bias", {KV}, "self_attn.k_proj.bias", k_rows));
      TEXTGEN_RETURN_IF_ERROR(
          map("attn_v.bias", {KV}, "self_attn.v_proj.bias"));
    }
    if (c.qk_norm) {
      TEXTGEN_RETURN_IF_ERROR(
          map("attn_q_norm.weight", {D}, "self_attn.q_norm.weight"));
      TEXTGEN_RETURN_IF_ERROR(
          map("attn_k_norm.weight", {D}, "self_attn.k_norm.weight"));
    }
    TEXTGEN_RETURN_IF_ERROR(
        map("attn_output.weight", {C, Q}, "self_attn.o_proj.weight"));
    if (c.attn_out_bias) {
      TEXTGEN_RETURN_IF_ERROR(
          map("attn_output.bias", {C}, "self_attn.o_proj.bias"));
    }
    TEXTGEN_RETURN_IF_ERROR(
        map("ffn_norm.weight", {C}, "post_attention_layernorm.weight"));
    TEXTGEN_RETURN_IF_ERROR(
        map("ffn_gate.weight", {F, C}, "mlp.gate_proj.weight"));
    TEXTGEN_RETURN_IF_ERROR(map("ffn_up.weight", {F, C}, "mlp.up_proj.weight"));
    TEXTGEN_RETURN_IF_ERROR(
        map("ffn_down.weight", {C, F}, "mlp.down_proj.weight"));
    if (c.mlp_bias) {
      TEXTGEN_RETURN_IF_ERROR(map("ffn_gate.bias", {F}, "mlp.gate_proj.bias"));
      TEXTGEN_RETURN_IF_ERROR(map("ffn_up.bias", {F}, "mlp.up_proj.bias"));
      TEXTGEN_RETURN_IF_ERROR(map("ffn_down.bias", {C}, "mlp.down_proj.bias"));
    }
  }
  TEXTGEN_RETURN_IF_ERROR(
      m.Map("output_norm.weight", {C}, "model.norm.weight"));
  if (!c.tied_lm_head) {
    TEXTGEN_RETURN_IF_ERROR(m.Map("output.weight", {V, C}, "lm_head.weight"));
  }
  return absl::OkStatus();
}

absl::Status MapGpt2(const ModelConfig& c, TensorMapper& m) {
  const int64_t C = c.d_model, F = c.d_ff, V = c.vocab_size;
  using L = TensorMapper::Layout;
  TEXTGEN_RETURN_IF_ERROR(m.Map("token_embd.weight", {V, C}, "wte.weight"));
  TEXTGEN_RETURN_IF_ERROR(
      m.Map("position_embd.weight", {c.context_length, C}, "wpe.weight"));
  struct Part {
    const char* gguf;
    const char* hf;
    int64_t out, in;  // 0 for a norm.
  };
  const Part parts[] = {{"attn_norm", "ln_1", 0, 0},
                        {"attn_qkv", "attn.c_attn", 3 * C, C},
                        {"attn_output", "attn.c_proj", C, C},
                        {"ffn_norm", "ln_2", 0, 0},
                        {"ffn_up", "mlp.c_fc", F, C},
                        {"ffn_down", "mlp.c_proj", C, F}};
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string b = absl::StrCat("blk.", i, ".");
    const std::string h = absl::StrCat("h.", i, ".");
    for (const Part& part : parts) {
      const std::string g = b + part.gguf, hf = h + part.hf;
      if (part.out == 0) {
        TEXTGEN_RETURN_IF_ERROR(m.Map(g + ".weight", {C}, hf + ".weight"));
        TEXTGEN_RETURN_IF_ERROR(m.Map(g + ".bias", {C}, hf + ".bias"));
      } else {
        TEXTGEN_RETURN_IF_ERROR(m.Map(g + ".weight", {part.out, part.in},
                                      hf + ".weight", L::kTranspose));
        TEXTGEN_RETURN_IF_ERROR(m.Map(g + ".bias", {part.out}, hf + ".bias"));
      }
    }
  }
  TEXTGEN_RETURN_IF_ERROR(m.Map("output_norm.weight", {C}, "ln_f.weight"));
  TEXTGEN_RETURN_IF_ERROR(m.Map("output_norm.bias", {C}, "ln_f.bias"));
  if (!c.tied_lm_head) {
    // A head quantized apart from the embedding (GgufModelConfig).
    TEXTGEN_RETURN_IF_ERROR(m.Map("output.weight", {V, C}, "lm_head.weight"));
  } else if (m.Has("output.weight")) {
    // llama.cpp's converter writes GPT-2's tied head out as a copy: the same
    // bytes, not read.
    TEXTGEN_RETURN_IF_ERROR(m.Find("output.weight", {V, C}).status());
  }
  return absl::OkStatus();
}

}  // namespace

bool IsGgufFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& file) {
  TEXTGEN_ASSIGN_OR_RETURN(const std::string arch,
                           file.GetString("general.architecture"));
  ArchKeys keys(file, arch);
  ModelConfig c;
  // Optional biases are seen in the tensor table, as llama.cpp does.
  auto has = [&](const char* tensor) {
    return file.FindTensor(absl::StrCat("blk.0.", tensor)) != nullptr;
  };
  if (arch == "gpt2") {
    c.family = Family::kGpt2;
    c.norm = NormKind::kLayerNorm;
    c.feed_forward = FeedForwardKind::kGeluMlp;
    c.positions = PositionKind::kLearned;
    c.qkv_bias = c.attn_out_bias = c.mlp_bias = true;
  } else if (arch == "llama" || arch == "qwen2" || arch == "qwen3") {
    c.family = arch == "llama"   ? Family::kLlama
               : arch == "qwen2" ? Family::kQwen2
                                 : Family::kQwen3;
    c.norm = NormKind::kRmsNorm;
    c.feed_forward = FeedForwardKind::kSwiGlu;
    c.positions = PositionKind::kRotary;
    c.qkv_bias = arch == "qwen2" || has("attn_q.bias");
    c.attn_out_bias = has("attn_output.bias");
    c.mlp_bias = has("ffn_up.bias");
    c.qk_norm = arch == "qwen3";
  } else {
    return FileError(file,
                     absl::StrCat("key 'general.architecture' = '", arch,
                                  "' is not supported (llama, qwen2, qwen3, "
                                  "gpt2)"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(c.context_length, keys.Size("context_length"));
  TEXTGEN_ASSIGN_OR_RETURN(c.d_model, keys.Size("embedding_length"));
  TEXTGEN_ASSIGN_OR_RETURN(c.n_layers, keys.Size("block_count"));
  TEXTGEN_ASSIGN_OR_RETURN(c.n_heads, keys.Size("attention.head_count"));
  TEXTGEN_ASSIGN_OR_RETURN(
      c.n_kv_heads, keys.OptionalSize("attention.head_count_kv", c.n_heads));
  if (c.family == Family::kGpt2) {
    TEXTGEN_ASSIGN_OR_RETURN(c.d_ff, keys.OptionalSize("feed_forward_length",
                                                       int64_t{4} * c.d_model));
    TEXTGEN_ASSIGN_OR_RETURN(c.norm_eps,
                             keys.Float("attention.layer_norm_epsilon"));
    if (c.n_kv_heads != c.n_heads) {
      return keys.Unsupported("attention.head_count_kv",
                              "gpt2 has no grouped-query attention");
    }
  } else {
    // An explicit head size (Qwen3, some Llamas): key_length, which
    // value_length must equal.
    if (keys.Has("attention.key_length")) {
      TEXTGEN_ASSIGN_OR_RETURN(c.explicit_head_dim,
                               keys.Size("attention.key_length"));
    }
    TEXTGEN_ASSIGN_OR_RETURN(c.d_ff, keys.Size("feed_forward_length"));
    TEXTGEN_ASSIGN_OR_RETURN(c.norm_eps,
                             keys.Float("attention.layer_norm_rms_epsilon"));
    TEXTGEN_ASSIGN_OR_RETURN(c.rope_theta,
                             keys.OptionalFloat("rope.freq_base", 10000.0f));
  }
  // The vocabulary is the embedding's row count.
  const GgufTensorInfo* embedding = file.FindTensor("token_embd.weight");
  if (embedding == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(file.source(), ": missing tensor 'token_embd.weight'"));
  }
  if (embedding->dims.size() != 2 || embedding->dims[1] > (uint64_t{1} << 30)) {
    return FileError(file, absl::StrCat("tensor 'token_embd.weight': shape ",
                                        ShapeToString(embedding->Shape()),
                                        " is not [vocab, embedding_length]"));
  }
  c.vocab_size = static_cast<int>(embedding->dims[1]);
  TEXTGEN_ASSIGN_OR_RETURN(const int vocab,
                           keys.OptionalSize("vocab_size", c.vocab_size));
  if (vocab != c.vocab_size) {
    return keys.Unsupported(
        "vocab_size", absl::StrCat(vocab, " differs from the ", c.vocab_size,
                                   " rows of tensor 'token_embd.weight'"));
  }
  // A separate output.weight unties the head, as in llama.cpp, except
  // GPT-2's copy of the embedding that llama.cpp's converter writes (the same
  // type and bytes; quantizing the file gives the two their own types).
  const GgufTensorInfo* output = file.FindTensor("output.weight");
  c.tied_lm_head =
      output == nullptr ||
      (c.family == Family::kGpt2 && output->type == embedding->type &&
       file.RawData(*output) == file.RawData(*embedding));
  // Per-frequency RoPE divisors: how llama.cpp's converter stores Llama 3.1's
  // rope_scaling (the keys carry no scaling type then).
  if (const GgufTensorInfo* t = file.FindTensor(kRopeFreqs)) {
    if (t->dims.size() != 1) {
      return FileError(file, absl::StrCat("tensor '", kRopeFreqs, "': shape ",
                                          ShapeToString(t->Shape()),
                                          " is not [head_dim / 2]"));
    }
    c.rope_scaling.kind = RopeScaling::Kind::kFrequencyFactors;
    c.rope_scaling.frequency_factors = file.ReadFloats(*t);
  }
  if (absl::Status s = c.Validate(); !s.ok()) {
    return FileError(file, std::string(s.message()));
  }
  TEXTGEN_RETURN_IF_ERROR(RefuseUnsupported(file, keys, c));
  return c;
}

absl::StatusOr<GgufTensors> GgufTensors::Map(const GgufFile& file,
                                             const ModelConfig& config) {
  TensorMapper mapper(file);
  TEXTGEN_RETURN_IF_ERROR(config.family == Family::kGpt2
                              ? MapGpt2(config, mapper)
                              : MapLlama(config, mapper));
  TEXTGEN_RETURN_IF_ERROR(mapper.CheckAllUsed(config));
  GgufTensors tensors(file);
  for (auto& [name, entry] : mapper.Take()) {
    tensors.names_.push_back(name);
    tensors.entries_.emplace(name, std::move(entry));
  }
  return tensors;
}

const GgufTensors::Entry* GgufTensors::FindEntry(
    const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const std::vector<int64_t>* GgufTensors::FindShape(
    const std::string& name) const {
  const Entry* entry = FindEntry(name);
  return entry == nullptr ? nullptr : &entry->shape;
}

absl::StatusOr<const GgufTensors::Entry*> GgufTensors::Get(
    const std::string& name, const std::vector<int64_t>& shape) const {
  const Entry* entry = FindEntry(name);
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(source(), ": missing tensor '", name, "'"));
  }
  if (entry->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        source(), ": tensor '", name, "': shape ", ShapeToString(entry->shape),
        ", expected ", ShapeToString(shape)));
  }
  return entry;
}

std::string GgufTensors::DisplayName(const std::string& name) const {
  const Entry* entry = FindEntry(name);
  if (entry == nullptr || entry->tensor->name == name) return name;
  return absl::StrCat(entry->tensor->name, " (", name, ")");
}

absl::StatusOr<std::vector<float>> GgufTensors::ReadFloats(
    const std::string& name, const std::vector<int64_t>& shape) const {
  TEXTGEN_ASSIGN_OR_RETURN(const Entry* entry, Get(name, shape));
  std::vector<float> values = file_->ReadFloats(*entry->tensor);
  if (entry->transposed) {
    using RowMajor =
        Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    // Stored [shape[1], shape[0]].
    RowMajor transposed =
        Eigen::Map<const RowMajor>(values.data(), shape[1], shape[0])
            .transpose();
    std::memcpy(values.data(), transposed.data(),
                values.size() * sizeof(float));
  } else if (!entry->rows.empty()) {
    // A row is one index along the first dimension (one value of a vector).
    const size_t row = values.size() / entry->rows.size();
    std::vector<float> ordered(values.size());
    for (size_t r = 0; r < entry->rows.size(); ++r) {
      std::copy_n(values.begin() + entry->rows[r] * row, row,
                  ordered.begin() + r * row);
    }
    values = std::move(ordered);
  }
  return values;
}

absl::StatusOr<StoredTensor> GgufTensors::ReadStored(
    const std::string& name, const std::vector<int64_t>& shape) const {
  TEXTGEN_ASSIGN_OR_RETURN(const Entry* entry, Get(name, shape));
  const GgufTensorInfo& t = *entry->tensor;
  if (kernels::FindBlockLayout(static_cast<uint32_t>(t.type)) == nullptr ||
      t.dims.size() != 2) {
    return TensorSource::ReadStored(name, shape);
  }
  // ggml rows (dims[1] of them) run along the innermost dimension, dims[0]:
  // the PyTorch shape's last, or its first when the mapping transposes.
  const int64_t rows = static_cast<int64_t>(t.dims[1]);
  const absl::string_view bytes = file_->RawData(t);
  std::string ordered;
  if (!entry->rows.empty()) {
    const size_t row = bytes.size() / rows;
    ordered.reserve(bytes.size());
    for (int r : entry->rows) ordered.append(bytes.data() + r * row, row);
  }
  const GgufFile* file = file_;
  const GgufTensorInfo* info = &t;
  return StoredTensor::Blocks(static_cast<kernels::BlockType>(t.type), bytes,
                              rows, entry->transposed, std::move(ordered),
                              [file, info] { file->DropPages(*info); });
}

double GgufHeldWeightBytes(const GgufFile& file,
                           kernels::WeightType weight_type) {
  double bytes = 0;
  bool blocks = false;
  const double per_weight = weight_type == kernels::WeightType::kBF16 ? 2
                            : kernels::IsQ8_0(weight_type)            ? 1.125
                                                                      : 4;
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name == "position_embd.weight") continue;
    const kernels::BlockLayout* layout =
        kernels::FindBlockLayout(static_cast<uint32_t>(t.type));
    if (layout != nullptr) {
      blocks = true;
      bytes +=
          static_cast<double>(t.bytes) * (layout->code_bits < 4 ? 2 : 1.05);
    } else {
      bytes += static_cast<double>(t.num_elements) *
               (t.dims.size() == 2 ? per_weight : 4);
    }
  }
  return blocks ? bytes : 0;
}

absl::StatusOr<Checkpoint> LoadGgufCheckpoint(const GgufFile& file,
                                              const LoadOptions& options) {
  Checkpoint checkpoint;
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.config, GgufModelConfig(file));
  TEXTGEN_ASSIGN_OR_RETURN(const GgufTensors tensors,
                           GgufTensors::Map(file, checkpoint.config));
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.weights,
                           LoadWeights(checkpoint.config, tensors, options));
  malloc_trim(0);  // As LoadCheckpoint: resident memory is the weights.
  return checkpoint;
}

}  // namespace textgen
