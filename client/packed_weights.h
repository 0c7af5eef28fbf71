// Attention weights off the wire, back to dense float rows, whatever their
// encoding (proto/textgen/v1/textgen.proto, AttentionEncoding and
// PackedWeights): the one decoder that every reader of maps and tap rows in the
// client goes through, so that heatmaps, the HTML page and the tap table work
// alike with FLOAT32, UINT8, UINT16, FLOAT16 and TOP_K.
//
// A PackedWeights block holds rows one after another; row r has row_keys[r]
// values. The dense forms (UINT8, UINT16, FLOAT16) hold the row's leading
// keys, from the block's first key on: a causal map leaves out the keys above
// its diagonal, which are 0, so a row may be shorter than the dense width and
// the rest of it decodes to 0. TOP_K holds row_keys[r] (key, weight) entries
// per row, largest first, and the weight left out as the row's remainder; the
// keys it does not name decode to 0 (where the remainder went is unknown), and
// DecodeTopK keeps the entries and remainders for whoever wants to show them.
//
//   absl::StatusOr<std::vector<float>> rows =
//       DecodePackedWeights(map.compact(), /*width=*/num_selected_keys);
//   // rows->size() == map.compact().row_keys_size() * width
//
// Every function checks the block against itself and against `width`
// (counts, byte lengths, scales, keys in range) and answers DATA_LOSS naming
// what does not fit, rather than reading past the end of a short message.
#ifndef TEXTGEN_CLIENT_PACKED_WEIGHTS_H_
#define TEXTGEN_CLIENT_PACKED_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

// IEEE binary16 bits to float, exactly (every half is a float): subnormals,
// infinities and NaN included. The client's own: it does not depend on model/
// (tests/layering_test.py), where the server's encoder keeps its twin.
float HalfToFloat(uint16_t bits);

// The block's rows as row_keys_size() × width floats, row-major; column c is
// key first_key + c × key_step (key_step: keys per column, > 1 for a pooled
// map's cells, whose TOP_K keys name a cell by its first key). Errors
// (DATA_LOSS): FLOAT32 or an unknown encoding (a PackedWeights carries only
// compact forms), a row longer than width, packed bytes, scales, entries or
// remainders not matching row_keys, a TOP_K key outside the row's columns.
absl::StatusOr<std::vector<float>> DecodePackedWeights(
    const v1::PackedWeights& packed, int width, int key_step = 1);

// One TOP_K row as sent: its kept keys (absolute positions) and weights,
// largest first, and the weight it left out.
struct TopKRow {
  std::vector<int> keys;
  std::vector<float> weights;
  float remainder = 0;
};

// A TOP_K block's rows as sent. Errors (DATA_LOSS): another encoding, or
// entries and remainders not matching row_keys.
absl::StatusOr<std::vector<TopKRow>> DecodeTopK(
    const v1::PackedWeights& packed);

// A map piece's rows as rows() × width floats: FLOAT32's `weights` (checked to
// be whole rows of width; rows() unset, as from servers before compact
// encodings, counts them) or the compact block decoded. key_step as above.
absl::StatusOr<std::vector<float>> DecodeMapRows(const v1::AttentionMap& map,
                                                 int width, int key_step = 1);

// A tap row (Generate's AttentionRow) as `width` floats: its weights, or its
// compact one-row block decoded. width: the row's keys (the token's position
// for decoder self-attention, the source's length for cross-attention).
absl::StatusOr<std::vector<float>> DecodeTapRow(const v1::AttentionRow& row,
                                                int width);

// "f32", "u8", "u16", "f16" or "top_k" as the encoding, as the command line
// and HTTP API name them; INVALID_ARGUMENT for any other name.
absl::StatusOr<v1::AttentionEncoding> ParseAttentionEncoding(
    const std::string& name);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_PACKED_WEIGHTS_H_
