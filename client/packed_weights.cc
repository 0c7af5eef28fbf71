#include "client/packed_weights.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace textgen::client {
namespace {

// The sum of row_keys, or DATA_LOSS for a negative count or a row wider than
// width (width < 0: not checked).
absl::StatusOr<size_t> CountEntries(const v1::PackedWeights& packed,
                                    int width) {
  size_t total = 0;
  for (int r = 0; r < packed.row_keys_size(); ++r) {
    const int n = packed.row_keys(r);
    if (n < 0 || (width >= 0 && n > width)) {
      return absl::DataLossError(absl::StrCat(
          "row ", r, " has ", n, " keys; rows are ", width, " keys wide"));
    }
    total += static_cast<size_t>(n);
  }
  return total;
}

absl::Status CheckTopKSizes(const v1::PackedWeights& packed, size_t entries) {
  if (static_cast<size_t>(packed.top_keys_size()) != entries ||
      static_cast<size_t>(packed.top_weights_size()) != entries) {
    return absl::DataLossError(absl::StrCat(
        "top_k: ", packed.top_keys_size(), " keys and ",
        packed.top_weights_size(), " weights for ", entries, " entries"));
  }
  if (packed.remainders_size() != packed.row_keys_size()) {
    return absl::DataLossError(absl::StrCat("top_k: ", packed.remainders_size(),
                                            " remainders for ",
                                            packed.row_keys_size(), " rows"));
  }
  return absl::OkStatus();
}

// Little-endian, whatever the host's order.
uint16_t LoadU16(const std::string& bytes, size_t i) {
  return static_cast<uint16_t>(static_cast<uint8_t>(bytes[2 * i]) |
                               static_cast<uint8_t>(bytes[2 * i + 1]) << 8);
}

}  // namespace

float HalfToFloat(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  } else if (exponent == 0x1F) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

absl::StatusOr<std::vector<float>> DecodePackedWeights(
    const v1::PackedWeights& packed, int width, int key_step) {
  if (width < 0 || key_step < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("width ", width, " and key_step ", key_step));
  }
  absl::StatusOr<size_t> entries = CountEntries(packed, width);
  if (!entries.ok()) return entries.status();
  const size_t rows = static_cast<size_t>(packed.row_keys_size());
  std::vector<float> dense(rows * static_cast<size_t>(width), 0.0f);
  const v1::AttentionEncoding encoding = packed.encoding();
  const std::string& bytes = packed.packed();

  if (encoding == v1::ATTENTION_ENCODING_TOP_K) {
    if (absl::Status sizes = CheckTopKSizes(packed, *entries); !sizes.ok())
      return sizes;
    size_t e = 0;
    for (size_t r = 0; r < rows; ++r) {
      for (int i = 0; i < packed.row_keys(static_cast<int>(r)); ++i, ++e) {
        const int key = packed.top_keys(static_cast<int>(e));
        const int offset = key - packed.first_key();
        if (offset < 0 || offset % key_step != 0 ||
            offset / key_step >= width) {
          return absl::DataLossError(absl::StrCat(
              "top_k: row ", r, " names key ", key, ", not one of the ", width,
              " columns from key ", packed.first_key(), " by ", key_step));
        }
        dense[r * width + offset / key_step] =
            packed.top_weights(static_cast<int>(e));
      }
    }
    return dense;
  }

  size_t bytes_per_weight = 0;
  switch (encoding) {
    case v1::ATTENTION_ENCODING_UINT8:
      bytes_per_weight = 1;
      break;
    case v1::ATTENTION_ENCODING_UINT16:
    case v1::ATTENTION_ENCODING_FLOAT16:
      bytes_per_weight = 2;
      break;
    default:
      return absl::DataLossError(absl::StrCat(
          "packed weights in encoding ", v1::AttentionEncoding_Name(encoding),
          ", not a compact one (u8, u16, f16, top_k)"));
  }
  if (bytes.size() != *entries * bytes_per_weight) {
    return absl::DataLossError(
        absl::StrCat(v1::AttentionEncoding_Name(encoding), ": ", bytes.size(),
                     " bytes for ", *entries, " weights"));
  }
  const bool scaled = encoding != v1::ATTENTION_ENCODING_FLOAT16;
  if (scaled && static_cast<size_t>(packed.row_scales_size()) != rows) {
    return absl::DataLossError(absl::StrCat(
        v1::AttentionEncoding_Name(encoding), ": ", packed.row_scales_size(),
        " row scales for ", rows, " rows"));
  }
  size_t e = 0;
  for (size_t r = 0; r < rows; ++r) {
    float* row = dense.data() + r * width;
    const int n = packed.row_keys(static_cast<int>(r));
    for (int k = 0; k < n; ++k, ++e) {
      switch (encoding) {
        case v1::ATTENTION_ENCODING_UINT8:
          row[k] = static_cast<float>(static_cast<uint8_t>(bytes[e])) *
                   packed.row_scales(static_cast<int>(r));
          break;
        case v1::ATTENTION_ENCODING_UINT16:
          row[k] = static_cast<float>(LoadU16(bytes, e)) *
                   packed.row_scales(static_cast<int>(r));
          break;
        default:  // FLOAT16, the only other encoding that gets here.
          row[k] = HalfToFloat(LoadU16(bytes, e));
      }
    }
  }
  return dense;
}

absl::StatusOr<std::vector<TopKRow>> DecodeTopK(
    const v1::PackedWeights& packed) {
  if (packed.encoding() != v1::ATTENTION_ENCODING_TOP_K) {
    return absl::DataLossError(
        absl::StrCat("expected top_k rows, got ",
                     v1::AttentionEncoding_Name(packed.encoding())));
  }
  absl::StatusOr<size_t> entries = CountEntries(packed, -1);
  if (!entries.ok()) return entries.status();
  if (absl::Status sizes = CheckTopKSizes(packed, *entries); !sizes.ok())
    return sizes;
  std::vector<TopKRow> rows(static_cast<size_t>(packed.row_keys_size()));
  int e = 0;
  for (int r = 0; r < packed.row_keys_size(); ++r) {
    TopKRow& row = rows[r];
    row.keys.assign(packed.top_keys().begin() + e,
                    packed.top_keys().begin() + e + packed.row_keys(r));
    row.weights.assign(packed.top_weights().begin() + e,
                       packed.top_weights().begin() + e + packed.row_keys(r));
    row.remainder = packed.remainders(r);
    e += packed.row_keys(r);
  }
  return rows;
}

absl::StatusOr<std::vector<float>> DecodeMapRows(const v1::AttentionMap& map,
                                                 int width, int key_step) {
  const bool compact =
      map.has_compact() &&
      map.compact().encoding() != v1::ATTENTION_ENCODING_UNSPECIFIED &&
      map.compact().encoding() != v1::ATTENTION_ENCODING_FLOAT32;
  if (compact) {
    if (map.rows() != 0 && map.rows() != map.compact().row_keys_size()) {
      return absl::DataLossError(absl::StrCat("a map piece of ", map.rows(),
                                              " rows holds ",
                                              map.compact().row_keys_size()));
    }
    return DecodePackedWeights(map.compact(), width, key_step);
  }
  if (width <= 0) return absl::DataLossError("a map piece with no keys");
  const size_t n = static_cast<size_t>(map.weights_size());
  const size_t rows = map.rows() != 0 ? static_cast<size_t>(map.rows())
                                      : n / static_cast<size_t>(width);
  if (n != rows * static_cast<size_t>(width)) {
    return absl::DataLossError(absl::StrCat(n, " weights are not ", rows,
                                            " whole rows of ", width, " keys"));
  }
  return std::vector<float>(map.weights().begin(), map.weights().end());
}

absl::StatusOr<std::vector<float>> DecodeTapRow(const v1::AttentionRow& row,
                                                int width) {
  if (!row.has_compact()) {
    if (row.weights_size() != width) {
      return absl::DataLossError(absl::StrCat("a row of ", row.weights_size(),
                                              " weights, not ", width));
    }
    return std::vector<float>(row.weights().begin(), row.weights().end());
  }
  if (row.compact().row_keys_size() != 1) {
    return absl::DataLossError(absl::StrCat(
        "a tap row's block holds ", row.compact().row_keys_size(), " rows"));
  }
  return DecodePackedWeights(row.compact(), width);
}

absl::StatusOr<v1::AttentionEncoding> ParseAttentionEncoding(
    const std::string& name) {
  if (name == "f32") return v1::ATTENTION_ENCODING_FLOAT32;
  if (name == "u8") return v1::ATTENTION_ENCODING_UINT8;
  if (name == "u16") return v1::ATTENTION_ENCODING_UINT16;
  if (name == "f16") return v1::ATTENTION_ENCODING_FLOAT16;
  if (name == "top_k") return v1::ATTENTION_ENCODING_TOP_K;
  return absl::InvalidArgumentError(absl::StrCat(
      "encoding must be f32, u8, u16, f16 or top_k, got \"", name, "\""));
}

}  // namespace textgen::client
