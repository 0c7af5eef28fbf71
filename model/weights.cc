#include "model/weights.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

// Packs a row-major [in, out] matrix for kernels::MatMul.
kernels::PackedWeights Pack(const Activations& w, kernels::WeightType type) {
  return kernels::PackedWeights(w.data(), static_cast<int>(w.rows()),
                                static_cast<int>(w.cols()),
                                static_cast<int>(w.cols()), type);
}

using ColMajorMap = Eigen::Map<const Eigen::MatrixXf>;
using RowMajorMap = Eigen::Map<const Activations>;

// Reads tensors by name, checking shapes, and remembers which names were used
// so that leftovers can be reported.
class TensorReader {
 public:
  // `files`: the checkpoint's shards (one for a single model.safetensors).
  TensorReader(absl::Span<const TensorSource* const> files, std::string prefix,
               kernels::WeightType type)
      : files_(files.begin(), files.end()),
        prefix_(std::move(prefix)),
        type_(type) {}

  // A vector of n values (a bias or a norm gain).
  absl::StatusOr<RowVector> Vector(const std::string& name, int64_t n) {
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> v, Read(name, {n}));
    return RowVector(Eigen::Map<const RowVector>(v.data(), n));
  }

  // A table with one row per index (embeddings, lm_head), stored [rows, cols].
  absl::StatusOr<Activations> Rows(const std::string& name, int64_t rows,
                                   int64_t cols) {
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> v, Read(name, {rows, cols}));
    return Activations(RowMajorMap(v.data(), rows, cols));
  }

  // A GPT-2 Conv1D weight, stored [in, out] row-major: the layout y = x · W
  // uses. Packed straight from the file's values: one tensor's floats are the
  // only temporary copy (none for blocks kept as stored).
  absl::StatusOr<kernels::PackedWeights> Conv1D(const std::string& name,
                                                int64_t in, int64_t out) {
    TEXTGEN_ASSIGN_OR_RETURN(StoredTensor t, ReadProjection(name, {in, out}));
    std::vector<StoredTensor> stored;
    stored.push_back(std::move(t));
    if (std::optional<kernels::PackedWeights> kept =
            KeepBlocks(stored, {out}, /*transposed=*/true, in)) {
      return *std::move(kept);
    }
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> v,
                             Floats(std::move(stored[0]), name, {in, out}));
    return kernels::PackedWeights(v.data(), static_cast<int>(in),
                                  static_cast<int>(out), static_cast<int>(out),
                                  type_);
  }

  // An untied embedding table stored [rows, cols] into `w`: as stored if the
  // file keeps it as ggml blocks, else as floats.
  absl::Status EmbeddingTable(const std::string& name, int64_t rows,
                              int64_t cols, ModelWeights& w) {
    TEXTGEN_ASSIGN_OR_RETURN(StoredTensor t,
                             ReadProjection(name, {rows, cols}));
    if (t.type() == StoredTensor::Type::kBlocks) {
      std::vector<StoredTensor> stored;
      stored.push_back(std::move(t));
      if (std::optional<kernels::PackedWeights> kept =
              KeepBlocks(stored, {rows}, /*transposed=*/false, cols,
                         /*own_q8_0=*/false)) {
        w.token_embedding_blocks = *std::move(kept);
        return absl::OkStatus();
      }
      t = std::move(stored[0]);
    }
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> v,
                             Floats(std::move(t), name, {rows, cols}));
    w.token_embedding = Activations(RowMajorMap(v.data(), rows, cols));
    return absl::OkStatus();
  }

  // A table stored [rows, cols] (an embedding, lm_head), packed as the LM
  // head's [cols, rows].
  absl::StatusOr<kernels::PackedWeights> Head(const std::string& name,
                                              int64_t rows, int64_t cols) {
    TEXTGEN_ASSIGN_OR_RETURN(StoredTensor t,
                             ReadProjection(name, {rows, cols}));
    std::vector<StoredTensor> stored;
    stored.push_back(std::move(t));
    if (std::optional<kernels::PackedWeights> kept =
            KeepBlocks(stored, {rows}, /*transposed=*/false, cols)) {
      return *std::move(kept);
    }
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> v,
                             Floats(std::move(stored[0]), name, {rows, cols}));
    return kernels::PackedWeights::FromTransposed(
        v.data(), static_cast<int>(rows), static_cast<int>(cols), type_);
  }

  // nn.Linear weights, each stored [out, in] row-major (the same bytes as
  // [in, out] column-major), fused side by side as [in, Σ out] and packed:
  // LLaMA's q | k | v and gate | up projections, or one projection alone.
  struct Linear {
    std::string name;
    int64_t out;
  };
  absl::StatusOr<kernels::PackedWeights> Linears(
      const std::vector<Linear>& parts, int64_t in) {
    std::vector<StoredTensor> stored;
    std::vector<int64_t> outs;
    int64_t cols = 0;
    for (const Linear& part : parts) {
      TEXTGEN_ASSIGN_OR_RETURN(StoredTensor t,
                               ReadProjection(part.name, {part.out, in}));
      stored.push_back(std::move(t));
      outs.push_back(part.out);
      cols += part.out;
    }
    if (std::optional<kernels::PackedWeights> kept =
            KeepBlocks(stored, outs, /*transposed=*/false, in)) {
      return *std::move(kept);
    }
    Activations fused(in, cols);
    int64_t col = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      TEXTGEN_ASSIGN_OR_RETURN(
          std::vector<float> v,
          Floats(std::move(stored[i]), parts[i].name, {parts[i].out, in}));
      fused.middleCols(col, parts[i].out) =
          ColMajorMap(v.data(), in, parts[i].out);
      col += parts[i].out;
    }
    return Pack(fused, type_);
  }

  bool Has(const std::string& name) const {
    return FileOf(prefix_ + name).FindShape(prefix_ + name) != nullptr;
  }

  // The file that holds tensor `full_name` (the first shard if none does, so
  // that the error for a missing tensor names a file).
  const TensorSource& FileOf(const std::string& full_name) const {
    for (const TensorSource* file : files_) {
      if (file->FindShape(full_name) != nullptr) return *file;
    }
    return *files_.front();
  }

  // Fails on the first tensor that was neither read nor `ignorable`.
  absl::Status CheckAllUsed(bool (*ignorable)(const std::string&),
                            const ModelConfig& config) const {
    for (const TensorSource* file : files_) {
      for (const std::string& name : file->TensorNames()) {
        if (used_.count(name) || ignorable(name)) continue;
        return absl::InvalidArgumentError(
            absl::StrCat(file->source(), ": unexpected tensor '", name, "' ",
                         ShapeToString(*file->FindShape(name)),
                         "; the config describes ", DescribeConfig(config)));
      }
    }
    return absl::OkStatus();
  }

 private:
  // A projection's tensor in the form the file stores it (ggml blocks, to be
  // kept), else its floats.
  absl::StatusOr<StoredTensor> ReadProjection(
      const std::string& name, const std::vector<int64_t>& shape) {
    const std::string full = prefix_ + name;
    used_.insert(full);
    const TensorSource& file = FileOf(full);
    TEXTGEN_ASSIGN_OR_RETURN(StoredTensor t, file.ReadStored(full, shape));
    if (t.type() == StoredTensor::Type::kF32) {
      TEXTGEN_RETURN_IF_ERROR(CheckFinite(file, full, t.floats()));
    }
    return t;
  }

  // The matrix whose columns are the rows of `parts` (`rows[i]` each), packed
  // as stored, if every part is ggml blocks that can be kept for a depth of
  // `depth`: rows running as asked (see StoredTensor), whole blocks, every
  // scale finite (a non-finite one is refused as floats, naming the element).
  // Q8_0 parts with int8 or w8a32 weights keep their own kernels
  // (FromQ8_0Rows); any other block types, Q8_0 among them, become kBlocks,
  // whose products are those of the dequantized floats (with int8 weights
  // asked for, of int8 activations). Otherwise nullopt:
  // the caller widens the parts to floats.
  std::optional<kernels::PackedWeights> KeepBlocks(
      const std::vector<StoredTensor>& parts, const std::vector<int64_t>& rows,
      bool transposed, int64_t depth, bool own_q8_0 = true) const {
    bool all_q8_0 = true;
    std::vector<kernels::PackedWeights::BlockRows> blocks;
    for (size_t i = 0; i < parts.size(); ++i) {
      const StoredTensor& t = parts[i];
      if (t.type() != StoredTensor::Type::kBlocks ||
          t.transposed() != transposed || t.rows() != rows[i] ||
          !t.BlockScalesFinite()) {
        return std::nullopt;
      }
      all_q8_0 = all_q8_0 && t.block_type() == kernels::BlockType::kQ8_0;
      blocks.push_back({t.block_type(),
                        reinterpret_cast<const uint8_t*>(t.blocks().data()),
                        static_cast<int>(rows[i])});
    }
    if (own_q8_0 && all_q8_0 && kernels::IsQ8_0(type_) &&
        depth % kernels::PackedWeights::kInt8Block == 0) {
      std::vector<kernels::PackedWeights::Q8_0Rows> q8;
      for (const auto& b : blocks) {
        q8.push_back({reinterpret_cast<const char*>(b.blocks), b.rows});
      }
      return kernels::PackedWeights::FromQ8_0Rows(q8, static_cast<int>(depth),
                                                  type_);
    }
    if (!kernels::PackedWeights::CanPackBlockRows(blocks,
                                                  static_cast<int>(depth))) {
      return std::nullopt;
    }
    // With int8 weights asked for, the products take int8 activations too
    // (the types that can: PackedWeights::FromBlockRows), as llama.cpp's;
    // an embedding table (`own_q8_0` false) is only ever read.
    return kernels::PackedWeights::FromBlockRows(
        blocks, static_cast<int>(depth),
        own_q8_0 && type_ == kernels::WeightType::kInt8);
  }

  // The floats of a tensor read by ReadProjection (read again as floats if it
  // came as blocks that could not be kept).
  absl::StatusOr<std::vector<float>> Floats(StoredTensor t,
                                            const std::string& name,
                                            const std::vector<int64_t>& shape) {
    if (t.type() == StoredTensor::Type::kF32) return t.TakeFloats();
    return Read(name, shape);
  }

  absl::StatusOr<std::vector<float>> Read(const std::string& name,
                                          const std::vector<int64_t>& shape) {
    const std::string full = prefix_ + name;
    used_.insert(full);
    const TensorSource& file = FileOf(full);
    TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> values,
                             file.ReadFloats(full, shape));
    TEXTGEN_RETURN_IF_ERROR(CheckFinite(file, full, values));
    return values;
  }

  // A NaN or infinite weight poisons every logit it reaches (the output is
  // garbage with NaN log-probabilities), so it is refused at load.
  static absl::Status CheckFinite(const TensorSource& file,
                                  const std::string& name,
                                  const std::vector<float>& values) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          file.source(), ": tensor '", file.DisplayName(name), "': element ", i,
          " is ", values[i], " (weights must be finite)"));
    }
    return absl::OkStatus();
  }

  const std::vector<const TensorSource*> files_;
  const std::string prefix_;
  const kernels::WeightType type_;
  std::set<std::string> used_;
};

bool IsGpt2Buffer(const std::string& name) {
  // Causal-mask buffers that old GPT-2 exports carry, and a saved copy of the
  // tied head.
  return absl::EndsWith(name, ".attn.bias") ||
         absl::EndsWith(name, ".attn.masked_bias") || name == "lm_head.weight";
}

bool IsLlamaBuffer(const std::string& name) {
  return absl::EndsWith(name, "rotary_emb.inv_freq");
}

absl::StatusOr<NormWeights> LoadNorm(TensorReader& r, const std::string& name,
                                     int d, bool with_bias) {
  NormWeights norm;
  TEXTGEN_ASSIGN_OR_RETURN(norm.gain, r.Vector(name + ".weight", d));
  if (with_bias) {
    TEXTGEN_ASSIGN_OR_RETURN(norm.bias, r.Vector(name + ".bias", d));
  }
  return norm;
}

// One GPT-2 block: "<h>ln_1", "<h>attn.*", "<h>ln_2", "<h>mlp.*".
absl::StatusOr<LayerWeights> LoadGpt2Block(TensorReader& r,
                                           const std::string& h,
                                           const ModelConfig& c) {
  const int C = c.d_model, I = c.d_ff;
  LayerWeights L;
  TEXTGEN_ASSIGN_OR_RETURN(L.attn_norm, LoadNorm(r, h + "ln_1", C, true));
  TEXTGEN_ASSIGN_OR_RETURN(L.qkv, r.Conv1D(h + "attn.c_attn.weight", C, 3 * C));
  TEXTGEN_ASSIGN_OR_RETURN(L.qkv_bias, r.Vector(h + "attn.c_attn.bias", 3 * C));
  TEXTGEN_ASSIGN_OR_RETURN(L.attn_out,
                           r.Conv1D(h + "attn.c_proj.weight", C, C));
  TEXTGEN_ASSIGN_OR_RETURN(L.attn_out_bias,
                           r.Vector(h + "attn.c_proj.bias", C));
  TEXTGEN_ASSIGN_OR_RETURN(L.ffn_norm, LoadNorm(r, h + "ln_2", C, true));
  TEXTGEN_ASSIGN_OR_RETURN(L.ff_in, r.Conv1D(h + "mlp.c_fc.weight", C, I));
  TEXTGEN_ASSIGN_OR_RETURN(L.ff_in_bias, r.Vector(h + "mlp.c_fc.bias", I));
  TEXTGEN_ASSIGN_OR_RETURN(L.ff_out, r.Conv1D(h + "mlp.c_proj.weight", I, C));
  TEXTGEN_ASSIGN_OR_RETURN(L.ff_out_bias, r.Vector(h + "mlp.c_proj.bias", C));
  return L;
}

// The cross-attention of decoder block "<h>" (HF GPT-2's add_cross_attention).
absl::Status LoadCrossAttention(TensorReader& r, const std::string& h, int C,
                                LayerWeights& L) {
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_norm,
                           LoadNorm(r, h + "ln_cross_attn", C, true));
  const std::string a = h + "crossattention.";
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_q, r.Conv1D(a + "q_attn.weight", C, C));
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_q_bias, r.Vector(a + "q_attn.bias", C));
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_kv, r.Conv1D(a + "c_attn.weight", C, 2 * C));
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_kv_bias, r.Vector(a + "c_attn.bias", 2 * C));
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_out, r.Conv1D(a + "c_proj.weight", C, C));
  TEXTGEN_ASSIGN_OR_RETURN(L.cross_out_bias, r.Vector(a + "c_proj.bias", C));
  return absl::OkStatus();
}

absl::StatusOr<ModelWeights> LoadGpt2(
    const ModelConfig& c, absl::Span<const TensorSource* const> files,
    kernels::WeightType type) {
  // GPT2LMHeadModel saves names under "transformer."; GPT2Model without a
  // prefix.
  const bool prefixed =
      TensorReader(files, "", type).Has("transformer.wte.weight");
  TensorReader r(files, prefixed ? "transformer." : "", type);
  const int C = c.d_model;
  ModelWeights w;
  if (c.tied_lm_head) {
    // The packed head is the embedding table.
    TEXTGEN_ASSIGN_OR_RETURN(w.head, r.Head("wte.weight", c.vocab_size, C));
  } else {
    // A GGUF file whose output.weight is quantized apart from token_embd.
    TEXTGEN_RETURN_IF_ERROR(r.EmbeddingTable("wte.weight", c.vocab_size, C, w));
    TEXTGEN_ASSIGN_OR_RETURN(w.head, r.Head("lm_head.weight", c.vocab_size, C));
  }
  if (c.positions == PositionKind::kLearned) {
    TEXTGEN_ASSIGN_OR_RETURN(w.position_embedding,
                             r.Rows("wpe.weight", c.context_length, C));
  } else {
    w.position_embedding = SinusoidalPositions(c.context_length, C);
  }
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string h = absl::StrCat("h.", i, ".");
    TEXTGEN_ASSIGN_OR_RETURN(LayerWeights layer, LoadGpt2Block(r, h, c));
    if (c.is_encoder_decoder()) {
      TEXTGEN_RETURN_IF_ERROR(LoadCrossAttention(r, h, C, layer));
    }
    w.layers.push_back(std::move(layer));
  }
  if (c.is_encoder_decoder()) {
    if (c.positions == PositionKind::kLearned) {
      TEXTGEN_ASSIGN_OR_RETURN(
          w.encoder_position_embedding,
          r.Rows("encoder.wpe.weight", c.context_length, C));
    } else {
      w.encoder_position_embedding = w.position_embedding;
    }
    for (int i = 0; i < c.encoder_layers; ++i) {
      TEXTGEN_ASSIGN_OR_RETURN(
          LayerWeights layer,
          LoadGpt2Block(r, absl::StrCat("encoder.h.", i, "."), c));
      w.encoder_layers.push_back(std::move(layer));
    }
    TEXTGEN_ASSIGN_OR_RETURN(w.encoder_final_norm,
                             LoadNorm(r, "encoder.ln_f", C, true));
  }
  TEXTGEN_ASSIGN_OR_RETURN(w.final_norm, LoadNorm(r, "ln_f", C, true));
  TEXTGEN_RETURN_IF_ERROR(r.CheckAllUsed(IsGpt2Buffer, c));
  return w;
}

absl::StatusOr<ModelWeights> LoadLlama(
    const ModelConfig& c, absl::Span<const TensorSource* const> files,
    kernels::WeightType type) {
  TensorReader r(files, "", type);
  const int C = c.d_model, I = c.d_ff, D = c.head_dim();
  const int q_cols = c.n_heads * D, kv_cols = c.n_kv_heads * D;
  ModelWeights w;
  const std::string embedding = "model.embed_tokens.weight";
  if (c.tied_lm_head) {
    // The head's packed copy stands for the table (ModelWeights::EmbeddingRow).
    TEXTGEN_ASSIGN_OR_RETURN(w.head, r.Head(embedding, c.vocab_size, C));
  } else {
    TEXTGEN_RETURN_IF_ERROR(r.EmbeddingTable(embedding, c.vocab_size, C, w));
  }
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LayerWeights& L = w.layers.emplace_back();
    TEXTGEN_ASSIGN_OR_RETURN(L.attn_norm,
                             LoadNorm(r, p + "input_layernorm", C, false));
    // [C, Q | K | V]
    TEXTGEN_ASSIGN_OR_RETURN(
        L.qkv, r.Linears({{p + "self_attn.q_proj.weight", q_cols},
                          {p + "self_attn.k_proj.weight", kv_cols},
                          {p + "self_attn.v_proj.weight", kv_cols}},
                         C));
    if (c.qkv_bias) {
      TEXTGEN_ASSIGN_OR_RETURN(RowVector q_bias,
                               r.Vector(p + "self_attn.q_proj.bias", q_cols));
      TEXTGEN_ASSIGN_OR_RETURN(RowVector k_bias,
                               r.Vector(p + "self_attn.k_proj.bias", kv_cols));
      TEXTGEN_ASSIGN_OR_RETURN(RowVector v_bias,
                               r.Vector(p + "self_attn.v_proj.bias", kv_cols));
      L.qkv_bias.resize(q_cols + 2 * kv_cols);
      L.qkv_bias << q_bias, k_bias, v_bias;
    }
    if (c.qk_norm) {
      TEXTGEN_ASSIGN_OR_RETURN(L.q_norm,
                               r.Vector(p + "self_attn.q_norm.weight", D));
      TEXTGEN_ASSIGN_OR_RETURN(L.k_norm,
                               r.Vector(p + "self_attn.k_norm.weight", D));
    }
    TEXTGEN_ASSIGN_OR_RETURN(
        L.attn_out, r.Linears({{p + "self_attn.o_proj.weight", C}}, q_cols));
    if (c.attn_out_bias) {
      TEXTGEN_ASSIGN_OR_RETURN(L.attn_out_bias,
                               r.Vector(p + "self_attn.o_proj.bias", C));
    }
    TEXTGEN_ASSIGN_OR_RETURN(
        L.ffn_norm, LoadNorm(r, p + "post_attention_layernorm", C, false));
    // [C, gate | up]
    TEXTGEN_ASSIGN_OR_RETURN(L.ff_in,
                             r.Linears({{p + "mlp.gate_proj.weight", I},
                                        {p + "mlp.up_proj.weight", I}},
                                       C));
    TEXTGEN_ASSIGN_OR_RETURN(L.ff_out,
                             r.Linears({{p + "mlp.down_proj.weight", C}}, I));
    if (c.mlp_bias) {
      TEXTGEN_ASSIGN_OR_RETURN(RowVector gate_bias,
                               r.Vector(p + "mlp.gate_proj.bias", I));
      TEXTGEN_ASSIGN_OR_RETURN(RowVector up_bias,
                               r.Vector(p + "mlp.up_proj.bias", I));
      L.ff_in_bias.resize(2 * I);
      L.ff_in_bias << gate_bias, up_bias;
      TEXTGEN_ASSIGN_OR_RETURN(L.ff_out_bias,
                               r.Vector(p + "mlp.down_proj.bias", C));
    }
  }
  TEXTGEN_ASSIGN_OR_RETURN(w.final_norm, LoadNorm(r, "model.norm", C, false));
  if (!c.tied_lm_head) {
    TEXTGEN_ASSIGN_OR_RETURN(w.head, r.Head("lm_head.weight", c.vocab_size, C));
  } else if (r.Has("lm_head.weight")) {
    // Some tied exports still save the head; it must then equal the embedding.
    TEXTGEN_ASSIGN_OR_RETURN(Activations head,
                             r.Rows("lm_head.weight", c.vocab_size, C));
    TEXTGEN_ASSIGN_OR_RETURN(Activations table,
                             r.Rows(embedding, c.vocab_size, C));
    if (head != table) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.FileOf("lm_head.weight").source(),
          ": tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' "
          "but config.json says tie_word_embeddings=true"));
    }
  }
  TEXTGEN_RETURN_IF_ERROR(r.CheckAllUsed(IsLlamaBuffer, c));
  return w;
}

}  // namespace

Activations SinusoidalPositions(int context, int d_model) {
  Activations table(context, d_model);
  for (int p = 0; p < context; ++p) {
    for (int i = 0; 2 * i < d_model; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / d_model);
      table(p, 2 * i) = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < d_model)
        table(p, 2 * i + 1) = static_cast<float>(std::cos(angle));
    }
  }
  return table;
}

absl::StatusOr<kernels::WeightType> ParseWeightType(absl::string_view name) {
  if (absl::EqualsIgnoreCase(name, "f32")) return kernels::WeightType::kF32;
  if (absl::EqualsIgnoreCase(name, "bf16")) return kernels::WeightType::kBF16;
  if (absl::EqualsIgnoreCase(name, "int8")) return kernels::WeightType::kInt8;
  if (absl::EqualsIgnoreCase(name, "w8a32")) return kernels::WeightType::kW8A32;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown weight type '", name, "' (expected f32, bf16, int8 or w8a32)"));
}

void ModelWeights::EmbeddingRow(int token, float* out) const {
  if (token_embedding.size()) {
    const float* row = token_embedding.row(token).data();
    std::copy(row, row + token_embedding.cols(), out);
  } else if (token_embedding_blocks.cols() > 0) {
    token_embedding_blocks.Column(token, out);
  } else {
    head.Column(token, out);
  }
}

namespace {

size_t FloatBytes(std::initializer_list<const RowVector*> vectors) {
  size_t floats = 0;
  for (const RowVector* v : vectors) floats += v->size();
  return floats * sizeof(float);
}

size_t NormBytes(const NormWeights& norm) {
  return FloatBytes({&norm.gain, &norm.bias});
}

// A layer's weight matrices (those the model does not use are empty).
std::array<const kernels::PackedWeights*, 7> Matrices(const LayerWeights& l) {
  return {&l.qkv,     &l.attn_out, &l.ff_in,    &l.ff_out,
          &l.cross_q, &l.cross_kv, &l.cross_out};
}

size_t LayerBytes(const LayerWeights& l) {
  size_t bytes = 0;
  for (const kernels::PackedWeights* w : Matrices(l)) bytes += w->MemoryBytes();
  return bytes + NormBytes(l.attn_norm) + NormBytes(l.ffn_norm) +
         NormBytes(l.cross_norm) +
         FloatBytes({&l.qkv_bias, &l.attn_out_bias, &l.ff_in_bias,
                     &l.ff_out_bias, &l.q_norm, &l.k_norm, &l.cross_q_bias,
                     &l.cross_kv_bias, &l.cross_out_bias});
}

}  // namespace

size_t ModelWeights::MemoryBytes() const {
  size_t bytes = (token_embedding.size() + position_embedding.size() +
                  encoder_position_embedding.size()) *
                     sizeof(float) +
                 NormBytes(final_norm) + NormBytes(encoder_final_norm) +
                 head.MemoryBytes() + token_embedding_blocks.MemoryBytes();
  for (const LayerWeights& l : layers) bytes += LayerBytes(l);
  for (const LayerWeights& l : encoder_layers) bytes += LayerBytes(l);
  return bytes;
}

std::string ModelWeights::StorageName() const {
  std::set<uint32_t> block_types;
  std::set<std::string> others;
  bool int8_activations = false;
  auto add = [&](const kernels::PackedWeights& w) {
    if (w.cols() == 0) return;
    if (w.type() != kernels::WeightType::kBlocks) {
      others.insert(kernels::WeightTypeName(w.type()));
      return;
    }
    int8_activations = int8_activations || w.int8_activations();
    for (int p = 0; p < w.panels(); ++p) {
      block_types.insert(static_cast<uint32_t>(w.panel_block_type(p)));
    }
  };
  add(head);
  add(token_embedding_blocks);
  for (const auto* stack : {&layers, &encoder_layers}) {
    for (const LayerWeights& l : *stack) {
      for (const kernels::PackedWeights* w : Matrices(l)) add(*w);
    }
  }
  if (block_types.empty()) {
    return kernels::WeightTypeName(head.type());
  }
  std::vector<std::string> names;
  for (uint32_t t : block_types) {
    names.push_back(kernels::LayoutOf(static_cast<kernels::BlockType>(t)).name);
  }
  names.insert(names.end(), others.begin(), others.end());
  return absl::StrJoin(names, "+") +
         (int8_activations ? " (int8 activations)" : "");
}

absl::StatusOr<ModelWeights> LoadWeights(const ModelConfig& config,
                                         const TensorSource& file,
                                         const LoadOptions& options) {
  const TensorSource* files[] = {&file};
  return LoadWeights(config, files, options);
}

absl::StatusOr<ModelWeights> LoadWeights(
    const ModelConfig& config, absl::Span<const TensorSource* const> files,
    const LoadOptions& options) {
  TEXTGEN_RETURN_IF_ERROR(config.Validate());
  if (files.empty()) {
    return absl::InvalidArgumentError("a checkpoint needs at least one file");
  }
  switch (config.family) {
    case Family::kGpt2:
      return LoadGpt2(config, files, options.weight_type);
    case Family::kLlama:
    case Family::kMistral:
    case Family::kQwen2:
    case Family::kQwen3:
      return LoadLlama(config, files, options.weight_type);
  }
  return absl::InternalError("unknown model family");
}

}  // namespace textgen
