#include "model/formats/llama2c_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "model/formats/rope_row_order.h"
#include "model/formats/safetensors.h"
#include "model/formats/safetensors_writer.h"
#include "model/memory_budget.h"
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

absl::StatusOr<Checkpoint> LoadLlama2cCheckpoint(const std::string& path,
                                                 const LoadOptions& options) {
  // The whole file is read before its header says what it holds: refuse a
  // file larger than the memory budget before reading it.
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  const uint64_t budget = options.memory_budget_bytes == 0
                              ? PhysicalMemoryBytes()
                              : options.memory_budget_bytes;
  if (!ec && size > budget) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": a llama2.c checkpoint of ", size,
                     " bytes is over the memory budget of ", budget, " bytes"));
  }
  TEXTGEN_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return Llama2cCheckpointFromBytes(bytes, path, options);
}

absl::StatusOr<Checkpoint> Llama2cCheckpointFromBytes(
    std::string_view bytes, const std::string& source,
    const LoadOptions& options) {
  TEXTGEN_ASSIGN_OR_RETURN(const Llama2cHeader h,
                           ParseLlama2cHeader(bytes, source));
  const uint64_t expected = h.ExpectedFileBytes();
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": llama2.c checkpoint is ", bytes.size(),
        " bytes, but its "
        "header (dim ",
        h.dim, ", hidden_dim ", h.hidden_dim, ", n_layers ", h.n_layers,
        ", n_heads ", h.n_heads, ", n_kv_heads ", h.n_kv_heads, ", vocab_size ",
        h.shared_classifier ? "" : "-", h.vocab_size, ", seq_len ", h.seq_len,
        ") calls for exactly ", expected, " bytes",
        bytes.size() < expected ? " (truncated?)" : " (trailing data?)"));
  }

  Checkpoint checkpoint;
  ModelConfig& c = checkpoint.config;
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
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  // Before the converted copy below is allocated.
  TEXTGEN_RETURN_IF_ERROR(CheckMemoryBudget(
      c, options.weight_type, options.kv_dtype, options.kv_cache_slots,
      options.kv_cache_tokens, options.sequences(), options.memory_budget_bytes,
      source));

  const int64_t C = h.dim, F = h.hidden_dim, V = h.vocab_size;
  const int D = h.dim / h.n_heads;
  const int64_t KV = int64_t{h.n_kv_heads} * D;
  // Tensors are addressed as bytes: the data after the 28-byte header need
  // not be aligned for float, and SafetensorsWriter only copies bytes.
  const char* cursor = bytes.data() + kLlama2cHeaderBytes;
  auto take = [&](int64_t count) {
    const char* p = cursor;
    cursor += count * sizeof(float);
    return p;
  };
  const char* tok_emb = take(V * C);
  const char* rms_att = take(h.n_layers * C);
  const char* wq = take(h.n_layers * C * C);
  const char* wk = take(h.n_layers * KV * C);
  const char* wv = take(h.n_layers * KV * C);
  const char* wo = take(h.n_layers * C * C);
  const char* rms_ffn = take(h.n_layers * C);
  const char* w1 = take(h.n_layers * F * C);
  const char* w2 = take(h.n_layers * C * F);
  const char* w3 = take(h.n_layers * F * C);
  const char* rms_final = take(C);
  take(2 * int64_t{h.seq_len} * (D / 2));  // freq_cis_real, freq_cis_imag
  const char* wcls = h.shared_classifier ? nullptr : take(V * C);

  // Layer l's slice of a stacked tensor of `per_layer` floats per layer.
  auto Layer = [](const char* tensor, int l, int64_t per_layer) {
    return tensor + l * per_layer * static_cast<int64_t>(sizeof(float));
  };
  const std::vector<int> q_rows = RotateHalfRowOrder(h.n_heads, D);
  const std::vector<int> k_rows = RotateHalfRowOrder(h.n_kv_heads, D);
  SafetensorsWriter out(expected);
  out.Add("model.embed_tokens.weight", {V, C}, tok_emb);
  for (int l = 0; l < h.n_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    out.Add(p + "input_layernorm.weight", {C}, Layer(rms_att, l, C));
    out.Add(p + "self_attn.q_proj.weight", {C, C}, Layer(wq, l, C * C), q_rows);
    out.Add(p + "self_attn.k_proj.weight", {KV, C}, Layer(wk, l, KV * C),
            k_rows);
    out.Add(p + "self_attn.v_proj.weight", {KV, C}, Layer(wv, l, KV * C));
    out.Add(p + "self_attn.o_proj.weight", {C, C}, Layer(wo, l, C * C));
    out.Add(p + "post_attention_layernorm.weight", {C}, Layer(rms_ffn, l, C));
    out.Add(p + "mlp.gate_proj.weight", {F, C}, Layer(w1, l, F * C));
    out.Add(p + "mlp.down_proj.weight", {C, F}, Layer(w2, l, C * F));
    out.Add(p + "mlp.up_proj.weight", {F, C}, Layer(w3, l, F * C));
  }
  out.Add("model.norm.weight", {C}, rms_final);
  if (wcls) out.Add("lm_head.weight", {V, C}, wcls);

  TEXTGEN_ASSIGN_OR_RETURN(SafetensorsFile file,
                           SafetensorsFile::FromBytes(out.Finish(), source));
  TEXTGEN_ASSIGN_OR_RETURN(checkpoint.weights, LoadWeights(c, file, options));
  return checkpoint;
}

}  // namespace textgen
