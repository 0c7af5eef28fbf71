// Attention weights in the wire's compact forms (textgen.proto's
// AttentionEncoding and PackedWeights): one row at a time, for the Generate
// tap's rows and DebugAttention's maps alike, over gRPC and, through
// PackedWeights, HTTP. Each form's error bound against the float row is
// stated in the proto; tests/server/api/attention_encoding_test.cc holds the
// encoder to it.
#ifndef TEXTGEN_SERVER_API_ATTENTION_ENCODING_H_
#define TEXTGEN_SERVER_API_ATTENTION_ENCODING_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen {

// TOP_K keeps at most this many entries per row.
inline constexpr int kMaxAttentionTopK = 1024;

// How a request wants its weights.
struct AttentionEncodingSpec {
  textgen::v1::AttentionEncoding encoding =
      textgen::v1::ATTENTION_ENCODING_FLOAT32;
  int top_k = 0;  // TOP_K only.

  // False for FLOAT32 (and UNSPECIFIED): weights go in `repeated float`.
  bool compact() const;
};

// The spec of (`encoding`, `top_k`), or INVALID_ARGUMENT naming `field`
// (e.g. "attention_tap"): an unknown encoding, top_k outside 1..1024 with
// TOP_K, or top_k given with another encoding.
absl::StatusOr<AttentionEncodingSpec> MakeEncodingSpec(
    textgen::v1::AttentionEncoding encoding, int top_k,
    absl::string_view field);

// Appends `row` to `out` in spec's compact encoding: row[i] is the weight of
// key first_key + i × key_step (a pooled row's cells are key_step keys
// apart), which TOP_K's entries name. Weights are probabilities: a NaN or
// negative one is written as 0.
void AppendPackedRow(const AttentionEncodingSpec& spec,
                     absl::Span<const float> row, int first_key,
                     textgen::v1::PackedWeights& out, int key_step = 1);

// At most this many bytes of a message for a row of `keys` weights in
// `spec`'s encoding (FLOAT32 included), framing aside: what paging budgets.
size_t EncodedRowBytes(const AttentionEncodingSpec& spec, int keys);

// The name of an encoding as the HTTP API spells it ("json" for FLOAT32,
// "u8", "u16", "f16", "top_k"), and back ("f32" also reads as FLOAT32; false
// for an unknown name).
const char* EncodingName(textgen::v1::AttentionEncoding encoding);
bool ParseEncodingName(absl::string_view name,
                       textgen::v1::AttentionEncoding* encoding);

}  // namespace textgen

#endif  // TEXTGEN_SERVER_API_ATTENTION_ENCODING_H_
