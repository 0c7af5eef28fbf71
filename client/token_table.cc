#include "client/token_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "client/attention_cli.h"
#include "client/heatmap.h"

namespace textgen::client {

absl::StatusOr<std::string> TokenTableLines(const v1::Token& token) {
  constexpr int kMaxShownChars = 24;
  std::string lines = absl::StrCat(token.position(), "\t", token.id(), "\t",
                                   DisplayToken(token.text(), kMaxShownChars));
  // A prompt token has a log-probability only when the prompt is scored
  // (--prompt_logprobs), and then always alternatives, but never the first.
  if (token.is_prompt() && token.top_logprobs().empty()) {
    absl::StrAppend(&lines, "\tprompt");
  } else {
    absl::StrAppendFormat(&lines, "\t%.4f", token.logprob());
  }
  for (const v1::TokenLogprob& alt : token.top_logprobs()) {
    absl::StrAppendFormat(&lines, "\t%s %.4f",
                          DisplayToken(alt.text(), kMaxShownChars),
                          alt.logprob());
  }
  lines += "\n";
  TEXTGEN_ASSIGN_OR_RETURN(const std::string rows, TapRowLines(token));
  lines += rows;
  return lines;
}

}  // namespace textgen::client
