// How `textgen generate` prints a stream whose tokens carry more than text
// (top log-probabilities, prompt scores, attention rows): a table.
//
// kTokenTableHeader, then one line per token (TokenTableLines),
//   position  id  token  logprob  [token logprob]...   (tab-separated)
// where the bracketed pairs are the top alternatives, most likely first, and
// logprob is "prompt" for echoed prompt tokens (not scored); then one line per
// attention row: an empty first cell, "L<layer> H<head>", and its weights over
// keys 0..position-1, space-separated; an encoder-decoder model's cross rows
// then follow as "cross L<layer> H<head>", one weight per source token.
// Rows in u8, u16 or f16 are decoded to those weights; top_k rows show what
// was sent, "key:weight" largest first and then "rest:<remainder>", since
// the weights left out are not known one by one.
// Tokens are shown escaped (\n, a visible space), so no token holds a tab or
// a space. Errors: DATA_LOSS for a row that does not decode.
#ifndef TEXTGEN_CLIENT_TOKEN_TABLE_H_
#define TEXTGEN_CLIENT_TOKEN_TABLE_H_

#include <string>

#include "absl/status/statusor.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

inline constexpr char kTokenTableHeader[] =
    "# position\tid\ttoken\tlogprob\ttop_logprobs (token logprob)...\n";

// One token's lines of the table: its own, then its attention rows.
absl::StatusOr<std::string> TokenTableLines(const textgen::v1::Token& token);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_TOKEN_TABLE_H_
