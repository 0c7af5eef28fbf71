// How the CLI reads attention's flags and prints what comes back: the tap's
// rows in `textgen generate`'s table, an encoding flag into a request, the
// --queries / --keys / --overview values of `textgen attention`, and its
// --summary table, and what the attention command writes from a reply. The
// flags themselves live in client/main.cc.
#ifndef TEXTGEN_CLIENT_ATTENTION_CLI_H_
#define TEXTGEN_CLIENT_ATTENTION_CLI_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/heatmap.h"
#include "client/packed_weights.h"
#include "client/textgen_client.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::client {

// A token's tap rows, one line each: "\t[cross ]L<layer> H<head>\t" then its
// weights (u8/u16/f16 decoded) or, for top_k, "key:weight ... rest:R".
// DATA_LOSS for a row that does not decode.
absl::StatusOr<std::string> TapRowLines(const textgen::v1::Token& token);

// An encoding flag's name (empty: unset, FLOAT32) and its top-k into a
// request (an AttentionTap or a DebugAttentionRequest: the same two fields).
// A top-k without the top_k encoding is a usage error (INVALID_ARGUMENT)
// rather than silently dropped; the server checks its range.
template <typename Request>
absl::Status SetEncodingFromFlags(const std::string& name, int top_k,
                                  absl::string_view encoding_flag,
                                  absl::string_view top_k_flag,
                                  Request& request) {
  if (!name.empty()) {
    absl::StatusOr<textgen::v1::AttentionEncoding> encoding =
        ParseAttentionEncoding(name);
    if (!encoding.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", encoding_flag, ": ", encoding.status().message()));
    }
    request.set_encoding(*encoding);
  }
  if (top_k != 0 &&
      request.encoding() != textgen::v1::ATTENTION_ENCODING_TOP_K) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", top_k_flag, " goes with --", encoding_flag, " top_k"));
  }
  request.set_top_k(top_k);
  return absl::OkStatus();
}

// "BEGIN:END" (END exclusive) or "BEGIN:" (to the last) as a range of
// positions; INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<textgen::v1::AttentionRange> ParseAttentionRange(
    const std::string& value, absl::string_view flag);

// "CELLS" or "CELLS:max" or "CELLS:mean"; INVALID_ARGUMENT otherwise.
absl::StatusOr<textgen::v1::AttentionOverview> ParseAttentionOverview(
    const std::string& value);

// The --summary table: a header, then one tab-separated line per map,
//   layer  head  kind  entropy  sink  mean_distance  max_weight
// (kind as the HTTP API names it: decoder_self, encoder_self, cross), then
// "# rollout: NxN" or "# rollout: none".
std::string SummaryTable(const AttentionReply& reply);

// What `textgen attention` makes of a reply (its --summary, --out, --html).
struct AttentionOutputs {
  bool summary = false;  // The SummaryTable on stdout.
  std::string png;       // The heatmaps (RenderHeatmaps) here, if not empty.
  HeatmapOptions heatmap;
  std::string html;  // The interactive page here, if not empty.
};

// Prints and writes `outputs` of `reply`, progress on stderr; the CLI's exit
// status (client/cli_exit.h): kExitOk, or kExitError when a file cannot be
// drawn or written.
int WriteAttentionOutputs(const AttentionReply& reply,
                          const AttentionOutputs& outputs);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_ATTENTION_CLI_H_
