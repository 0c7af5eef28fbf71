#include "model/formats/llama2c_checkpoint.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/formats/rope_row_order.h"
#include "model/weights.h"

namespace textgen {
namespace {

// "ak42" read as a little-endian uint32: the first field of llama2.c's
// version 1 and 2 exports.
constexpr uint32_t kVersionedMagic = 0x616b3432;

}  // namespace

uint64_t Llama2cHeader::ExpectedFileBytes() const {
  const uint64_t C = dim, F = hidden_dim, L = n_layers, V = vocab_size;
  const uint64_t D = dim / n_heads, KV = static_cast<uint64_t>(n_kv_heads) * D;
  uint64_t floats = V * C                               // tok_emb
                    + L * C                             // rms_att
                    + L * C * C                         // wq
                    + 2 * L * KV * C                    // wk, wv
                    + L * C * C                         // wo
                    + L * C                             // rms_ffn
                    + 3 * L * F * C                     // w1, w2, w3
                    + C                                 // rms_final
                    + 2 * uint64_t(seq_len) * (D / 2);  // freq_cis
  if (!shared_classifier) floats += V * C;              // wcls
  return kLlama2cHeaderBytes + 4 * floats;
}

absl::StatusOr<Llama2cHeader> ParseLlama2cHeader(std::string_view bytes,
                                                 const std::string& source) {
  auto fail = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a llama2.c checkpoint: ", parts...));
  };
  if (bytes.size() < kLlama2cHeaderBytes) {
    return fail(bytes.size(), " bytes is too short for the ",
                kLlama2cHeaderBytes, "-byte header");
  }
  int32_t v[7];
  std::memcpy(v, bytes.data(), sizeof(v));
  if (static_cast<uint32_t>(v[0]) == kVersionedMagic) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": llama2.c export version ", v[1],
        " (magic \"ak42\") is not supported; export the model with "
        "`export.py --version 0` (the legacy format)"));
  }
  const char* names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                          "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    // 2^24 keeps every size product far inside 64 bits and is far beyond any
    // model llama2.c runs. Only vocab_size may be negative.
    const int64_t limit = int64_t{1} << 24;
    if (v[i] == 0 || v[i] > limit || v[i] < (i == 5 ? -limit : 1)) {
      return fail("header ", names[i], " = ", v[i], " is out of range");
    }
  }
  Llama2cHeader h;
  h.dim = v[0];
  h.hidden_dim = v[1];
  h.n_layers = v[2];
  h.n_heads = v[3];
  h.n_kv_heads = v[4];
  h.shared_classifier = v[5] > 0;
  h.vocab_size = v[5] < 0 ? -v[5] : v[5];
  h.seq_len = v[6];
  if (h.dim % h.n_heads != 0) {
    return fail("header dim ", h.dim, " is not divisible by n_heads ",
                h.n_heads);
  }
  if (h.n_kv_heads > h.n_heads || h.n_heads % h.n_kv_heads != 0) {
    return fail("header n_kv_heads ", h.n_kv_heads, " must divide n_heads ",
                h.n_heads);
  }
  if ((h.dim / h.n_heads) % 2 != 0) {
    return fail("head size ", h.dim / h.n_heads,
                " (dim / n_heads) must be even for rotary positions");
  }
  return h;
}

absl::StatusOr<Llama2cFile> Llama2cFile::Open(const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  Llama2cFile file(path);
  file.mapped_ = std::move(mapped);
  TEXTGEN_RETURN_IF_ERROR(file.Parse());
  return file;
}

absl::StatusOr<Llama2cFile> Llama2cFile::FromBytes(std::string bytes,
                                                   std::string source) {
  Llama2cFile file(std::move(source));
  file.bytes_ = std::move(bytes);
  TEXTGEN_RETURN_IF_ERROR(file.Parse());
  return file;
}

absl::Status Llama2cFile::Parse() {
  const std::string_view bytes(base(), size());
  TEXTGEN_ASSIGN_OR_RETURN(const Llama2cHeader h,
                           ParseLlama2cHeader(bytes, source_));
  const uint64_t expected = h.ExpectedFileBytes();
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": llama2.c checkpoint is ", bytes.size(),
        " bytes, but its "
        "header (dim ",
        h.dim, ", hidden_dim ", h.hidden_dim, ", n_layers ", h.n_layers,
        ", n_heads ", h.n_heads, ", n_kv_heads ", h.n_kv_heads, ", vocab_size ",
        h.shared_classifier ? "" : "-", h.vocab_size, ", seq_len ", h.seq_len,
        ") calls for exactly ", expected, " bytes",
        bytes.size() < expected ? " (truncated?)" : " (trailing data?)"));
  }

  ModelConfig& c = config_;
  c.family = Family::kLlama;
  c.vocab_size = h.vocab_size;
  c.context_length = h.seq_len;
  c.d_model = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.d_ff = h.hidden_dim;
  c.norm_eps = 1e-5f;       // llama2.c's RMSNorm.
  c.rope_theta = 10000.0f;  // llama2.c's precompute_freqs_cis.
  c.tied_lm_head = h.shared_classifier;
  c.qkv_bias = c.attn_out_bias = c.mlp_bias = false;
  c.norm = NormKind::kRmsNorm;
  c.positions = PositionKind::kRotary;
  c.feed_forward = FeedForwardKind::kSwiGlu;
  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", s.message()));
  }

  const int64_t C = h.dim, F = h.hidden_dim, V = h.vocab_size;
  const int D = h.dim / h.n_heads;
  const int64_t KV = int64_t{h.n_kv_heads} * D;
  // Offsets of the stacked tensors, in file order.
  uint64_t cursor = kLlama2cHeaderBytes;
  auto take = [&](int64_t count) {
    const uint64_t offset = cursor;
    cursor += count * sizeof(float);
    return offset;
  };
  const uint64_t tok_emb = take(V * C);
  const uint64_t rms_att = take(h.n_layers * C);
  const uint64_t wq = take(h.n_layers * C * C);
  const uint64_t wk = take(h.n_layers * KV * C);
  const uint64_t wv = take(h.n_layers * KV * C);
  const uint64_t wo = take(h.n_layers * C * C);
  const uint64_t rms_ffn = take(h.n_layers * C);
  const uint64_t w1 = take(h.n_layers * F * C);
  const uint64_t w2 = take(h.n_layers * C * F);
  const uint64_t w3 = take(h.n_layers * F * C);
  const uint64_t rms_final = take(C);
  take(2 * int64_t{h.seq_len} * (D / 2));  // freq_cis_real, freq_cis_imag
  const uint64_t wcls = h.shared_classifier ? 0 : take(V * C);

  auto add = [&](const std::string& name, std::vector<int64_t> shape,
                 uint64_t offset, std::vector<int> rows = {}) {
    names_.push_back(name);
    entries_[name] = Entry{offset, std::move(shape), std::move(rows)};
  };
  // Layer l's slice of a stacked tensor of `per_layer` floats per layer.
  auto layer = [](uint64_t tensor, int l, int64_t per_layer) {
    return tensor + l * per_layer * sizeof(float);
  };
  const std::vector<int> q_rows = RotateHalfRowOrder(h.n_heads, D);
  const std::vector<int> k_rows = RotateHalfRowOrder(h.n_kv_heads, D);
  add("model.embed_tokens.weight", {V, C}, tok_emb);
  for (int l = 0; l < h.n_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", {C}, layer(rms_att, l, C));
    add(p + "self_attn.q_proj.weight", {C, C}, layer(wq, l, C * C), q_rows);
    add(p + "self_attn.k_proj.weight", {KV, C}, layer(wk, l, KV * C), k_rows);
    add(p + "self_attn.v_proj.weight", {KV, C}, layer(wv, l, KV * C));
    add(p + "self_attn.o_proj.weight", {C, C}, layer(wo, l, C * C));
    add(p + "post_attention_layernorm.weight", {C}, layer(rms_ffn, l, C));
    add(p + "mlp.gate_proj.weight", {F, C}, layer(w1, l, F * C));
    add(p + "mlp.down_proj.weight", {C, F}, layer(w2, l, C * F));
    add(p + "mlp.up_proj.weight", {F, C}, layer(w3, l, F * C));
  }
  add("model.norm.weight", {C}, rms_final);
  if (!h.shared_classifier) add("lm_head.weight", {V, C}, wcls);
  return absl::OkStatus();
}

const std::vector<int64_t>* Llama2cFile::FindShape(
    const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.shape;
}

absl::StatusOr<std::vector<float>> Llama2cFile::ReadFloats(
    const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat(source_, ": missing tensor '", name, "'"));
  }
  const Entry& entry = it->second;
  if (entry.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": tensor '", name, "': shape ", ShapeToString(entry.shape),
        ", expected ", ShapeToString(shape)));
  }
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> values(count);
  // The floats after the 28-byte header need not be aligned: copied as bytes.
  const char* data = base() + entry.offset;
  const size_t row_bytes = count / shape.front() * sizeof(float);
  if (entry.rows.empty()) {
    std::memcpy(values.data(), data, count * sizeof(float));
  } else {
    char* out = reinterpret_cast<char*>(values.data());
    for (size_t r = 0; r < entry.rows.size(); ++r) {
      std::memcpy(out + r * row_bytes, data + entry.rows[r] * row_bytes,
                  row_bytes);
    }
  }
  mapped_.DropPages(entry.offset, entry.offset + count * sizeof(float));
  return values;
}

absl::StatusOr<Checkpoint> LoadLlama2cCheckpoint(const std::string& path,
                                                 const LoadOptions& options) {
  TEXTGEN_ASSIGN_OR_RETURN(const Llama2cFile file, Llama2cFile::Open(path));
  return LoadLlama2cCheckpoint(file, options);
}

absl::StatusOr<Checkpoint> Llama2cCheckpointFromBytes(
    std::string_view bytes, const std::string& source,
    const LoadOptions& options) {
  TEXTGEN_ASSIGN_OR_RETURN(const Llama2cFile file,
                           Llama2cFile::FromBytes(std::string(bytes), source));
  return LoadLlama2cCheckpoint(file, options);
}

absl::StatusOr<Checkpoint> LoadLlama2cCheckpoint(const Llama2cFile& file,
                                                 const LoadOptions& options) {
  Checkpoint checkpoint;
  checkpoint.config = file.config();
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.weights,
                           LoadWeights(checkpoint.config, file, options));
  return checkpoint;
}

}  // namespace textgen
