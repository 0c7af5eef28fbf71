#include "server/api/attention_encoding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/kernels/ggml_blocks.h"

namespace textgen {
namespace {

namespace pb = ::textgen::v1;

// A probability as sent: NaN and negatives (never a softmax's) as 0.
float Clean(float w) { return w > 0 ? w : 0.0f; }

// Bytes per code of the packed encodings.
int CodeBytes(pb::AttentionEncoding encoding) {
  return encoding == pb::ATTENTION_ENCODING_UINT8 ? 1 : 2;
}

// Per-row fixed point: code = round(w / scale), scale = max / levels, so a
// weight is off by at most scale / 2 = max / (2 levels).
void AppendFixedPoint(absl::Span<const float> row, int levels, int code_bytes,
                      pb::PackedWeights& out) {
  float max = 0;
  for (float w : row) max = std::max(max, Clean(w));
  const float scale = max > 0 ? max / levels : 0.0f;
  out.add_row_scales(scale);
  std::string& packed = *out.mutable_packed();
  const size_t at = packed.size();
  packed.resize(at + row.size() * code_bytes);
  char* p = packed.data() + at;
  for (float w : row) {
    const uint32_t code = scale > 0
                              ? static_cast<uint32_t>(std::min<long>(
                                    std::lround(Clean(w) / scale), levels))
                              : 0;
    for (int b = 0; b < code_bytes; ++b)
      *p++ = static_cast<char>(code >> (8 * b));
  }
}

void AppendHalf(absl::Span<const float> row, pb::PackedWeights& out) {
  std::string& packed = *out.mutable_packed();
  const size_t at = packed.size();
  packed.resize(at + row.size() * 2);
  char* p = packed.data() + at;
  for (float w : row) {
    const uint16_t half = kernels::FloatToHalf(Clean(w));
    *p++ = static_cast<char>(half & 0xFF);
    *p++ = static_cast<char>(half >> 8);
  }
}

// The k largest (ties: the lower key first), exact, and what the rest sum to.
void AppendTopK(absl::Span<const float> row, int first_key, int key_step, int k,
                pb::PackedWeights& out) {
  const int n = static_cast<int>(row.size());
  const int kept = std::min(k, n);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto larger = [&](int a, int b) {
    const float wa = Clean(row[a]), wb = Clean(row[b]);
    return wa != wb ? wa > wb : a < b;
  };
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), larger);
  std::vector<char> is_kept(n, 0);
  for (int i = 0; i < kept; ++i) {
    out.add_top_keys(first_key + order[i] * key_step);
    out.add_top_weights(Clean(row[order[i]]));
    is_kept[order[i]] = 1;
  }
  // Summed in key order, in double: the same rest however k cuts the row.
  double rest = 0;
  for (int i = 0; i < n; ++i) {
    if (!is_kept[i]) rest += Clean(row[i]);
  }
  out.add_remainders(static_cast<float>(rest));
  out.set_row_keys(out.row_keys_size() - 1, kept);
}

}  // namespace

bool AttentionEncodingSpec::compact() const {
  return encoding != pb::ATTENTION_ENCODING_FLOAT32 &&
         encoding != pb::ATTENTION_ENCODING_UNSPECIFIED;
}

absl::StatusOr<AttentionEncodingSpec> MakeEncodingSpec(
    pb::AttentionEncoding encoding, int top_k, absl::string_view field) {
  AttentionEncodingSpec spec;
  switch (encoding) {
    case pb::ATTENTION_ENCODING_UNSPECIFIED:
    case pb::ATTENTION_ENCODING_FLOAT32:
      spec.encoding = pb::ATTENTION_ENCODING_FLOAT32;
      break;
    case pb::ATTENTION_ENCODING_UINT8:
    case pb::ATTENTION_ENCODING_UINT16:
    case pb::ATTENTION_ENCODING_FLOAT16:
    case pb::ATTENTION_ENCODING_TOP_K:
      spec.encoding = encoding;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".encoding: unknown attention encoding ",
                       static_cast<int>(encoding)));
  }
  if (spec.encoding == pb::ATTENTION_ENCODING_TOP_K) {
    if (top_k < 1 || top_k > kMaxAttentionTopK) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".top_k: ", top_k, " is outside 1..",
                       kMaxAttentionTopK, " (the TOP_K encoding needs it)"));
    }
    spec.top_k = top_k;
  } else if (top_k != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".top_k: given with the ", EncodingName(spec.encoding),
        " encoding; it belongs to top_k"));
  }
  return spec;
}

void AppendPackedRow(const AttentionEncodingSpec& spec,
                     absl::Span<const float> row, int first_key,
                     pb::PackedWeights& out, int key_step) {
  out.set_encoding(spec.encoding);
  out.add_row_keys(static_cast<int>(row.size()));
  switch (spec.encoding) {
    case pb::ATTENTION_ENCODING_UINT8:
      return AppendFixedPoint(row, 255, 1, out);
    case pb::ATTENTION_ENCODING_UINT16:
      return AppendFixedPoint(row, 65535, 2, out);
    case pb::ATTENTION_ENCODING_FLOAT16:
      return AppendHalf(row, out);
    case pb::ATTENTION_ENCODING_TOP_K:
      return AppendTopK(row, first_key, key_step, spec.top_k, out);
    default:
      return;  // FLOAT32 is not packed.
  }
}

size_t EncodedRowBytes(const AttentionEncodingSpec& spec, int keys) {
  const size_t n = static_cast<size_t>(std::max(keys, 0));
  constexpr size_t kRowFraming = 8;  // row_keys' varint, a scale, a length.
  switch (spec.encoding) {
    case pb::ATTENTION_ENCODING_UINT8:
    case pb::ATTENTION_ENCODING_UINT16:
    case pb::ATTENTION_ENCODING_FLOAT16:
      return n * CodeBytes(spec.encoding) + kRowFraming;
    case pb::ATTENTION_ENCODING_TOP_K:
      // A key's varint (up to 5 bytes) and a float per entry, a remainder.
      return std::min<size_t>(n, spec.top_k) * 9 + kRowFraming;
    default:
      return n * sizeof(float);
  }
}

const char* EncodingName(pb::AttentionEncoding encoding) {
  switch (encoding) {
    case pb::ATTENTION_ENCODING_UINT8:
      return "u8";
    case pb::ATTENTION_ENCODING_UINT16:
      return "u16";
    case pb::ATTENTION_ENCODING_FLOAT16:
      return "f16";
    case pb::ATTENTION_ENCODING_TOP_K:
      return "top_k";
    default:
      return "json";
  }
}

bool ParseEncodingName(absl::string_view name,
                       pb::AttentionEncoding* encoding) {
  if (name == "json" || name == "f32") {
    *encoding = pb::ATTENTION_ENCODING_FLOAT32;
  } else if (name == "u8") {
    *encoding = pb::ATTENTION_ENCODING_UINT8;
  } else if (name == "u16") {
    *encoding = pb::ATTENTION_ENCODING_UINT16;
  } else if (name == "f16") {
    *encoding = pb::ATTENTION_ENCODING_FLOAT16;
  } else if (name == "top_k") {
    *encoding = pb::ATTENTION_ENCODING_TOP_K;
  } else {
    return false;
  }
  return true;
}

}  // namespace textgen
