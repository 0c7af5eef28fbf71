#include "client/attention_cli.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/attention_html.h"
#include "client/cli_exit.h"
#include "client/packed_weights.h"

namespace textgen::client {

namespace v1 = ::textgen::v1;

absl::StatusOr<std::string> TapRowLines(const v1::Token& token) {
  std::string lines;
  for (const v1::AttentionRow& row : token.attention()) {
    absl::StrAppend(&lines, "\t",
                    row.kind() == v1::ATTENTION_KIND_CROSS ? "cross " : "", "L",
                    row.layer(), " H", row.head(), "\t");
    if (row.compact().encoding() == v1::ATTENTION_ENCODING_TOP_K) {
      TEXTGEN_ASSIGN_OR_RETURN(const std::vector<TopKRow> top,
                               DecodeTopK(row.compact()));
      if (top.size() != 1) {
        return absl::DataLossError(absl::StrCat("a tap row L", row.layer(),
                                                " H", row.head(), " of ",
                                                top.size(), " rows"));
      }
      for (size_t i = 0; i < top[0].keys.size(); ++i) {
        absl::StrAppendFormat(&lines, "%d:%.4f ", top[0].keys[i],
                              top[0].weights[i]);
      }
      absl::StrAppendFormat(&lines, "rest:%.4f\n", top[0].remainder);
      continue;
    }
    // A tap row is whole (every key of the query), so its length is its width.
    const int width = row.has_compact() && row.compact().row_keys_size() == 1
                          ? row.compact().row_keys(0)
                          : row.weights_size();
    TEXTGEN_ASSIGN_OR_RETURN(const std::vector<float> weights,
                             DecodeTapRow(row, width));
    for (size_t k = 0; k < weights.size(); ++k) {
      absl::StrAppendFormat(&lines, "%s%.4f", k == 0 ? "" : " ", weights[k]);
    }
    lines += "\n";
  }
  return lines;
}

absl::StatusOr<v1::AttentionRange> ParseAttentionRange(const std::string& value,
                                                       absl::string_view flag) {
  const size_t colon = value.find(':');
  int begin = 0, end = 0;
  const bool ok =
      colon != std::string::npos &&
      absl::SimpleAtoi(value.substr(0, colon), &begin) && begin >= 0 &&
      (colon + 1 == value.size() ||
       (absl::SimpleAtoi(value.substr(colon + 1), &end) && end > begin));
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag,
                     " takes BEGIN:END positions (BEGIN < END) or "
                     "BEGIN:, got \"",
                     value, "\""));
  }
  v1::AttentionRange range;
  range.set_begin(begin);
  range.set_end(end);
  return range;
}

absl::StatusOr<v1::AttentionOverview> ParseAttentionOverview(
    const std::string& value) {
  const size_t colon = value.find(':');
  const std::string pooling =
      colon == std::string::npos ? "max" : value.substr(colon + 1);
  int cells = 0;
  if (!absl::SimpleAtoi(value.substr(0, colon), &cells) || cells < 1 ||
      (pooling != "max" && pooling != "mean")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--overview takes CELLS[:max|mean], got \"", value, "\""));
  }
  v1::AttentionOverview overview;
  overview.set_cells(cells);
  overview.set_pooling(pooling == "max" ? v1::POOLING_MAX : v1::POOLING_MEAN);
  return overview;
}

std::string SummaryTable(const AttentionReply& reply) {
  std::string table =
      "# layer\thead\tkind\tentropy\tsink\tmean_distance\tmax_weight\n";
  for (const v1::AttentionSummary& s : reply.summaries) {
    const char* kind = "decoder_self";
    if (s.kind() == v1::ATTENTION_KIND_ENCODER_SELF) kind = "encoder_self";
    if (s.kind() == v1::ATTENTION_KIND_CROSS) kind = "cross";
    absl::StrAppendFormat(&table, "%d\t%d\t%s\t%.4f\t%.4f\t%.4f\t%.4f\n",
                          s.layer(), s.head(), kind, s.entropy(), s.sink(),
                          s.mean_distance(), s.max_weight());
  }
  if (reply.rollout_size > 0) {
    absl::StrAppend(&table, "# rollout: ", reply.rollout_size, "x",
                    reply.rollout_size, "\n");
  } else {
    absl::StrAppend(&table, "# rollout: none\n");
  }
  return table;
}

namespace {

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::cerr << "textgen: cannot write " << path << ": "
              << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

}  // namespace

int WriteAttentionOutputs(const AttentionReply& reply,
                          const AttentionOutputs& outputs) {
  if (outputs.summary) std::fputs(SummaryTable(reply).c_str(), stdout);
  const std::string& out = outputs.png;
  const std::string& html = outputs.html;
  if (out.empty() && html.empty()) return kExitOk;
  const std::vector<AttentionMaps>* kinds = &reply.kinds;
  // The decoder's self-attention: the prompt's (or the target's) maps.
  const AttentionMaps* maps = &kinds->front();
  for (const AttentionMaps& kind : *kinds) {
    if (kind.kind == MapKind::kDecoderSelf) maps = &kind;
  }

  if (!out.empty()) {
    absl::StatusOr<HeatmapImage> image =
        RenderHeatmaps(*kinds, outputs.heatmap);
    if (!image.ok()) {
      std::cerr << "textgen: cannot draw the heatmap: "
                << image.status().message() << "\n";
      return kExitError;
    }
    for (const std::string& w : image->warnings)
      std::cerr << "textgen: warning: " << w << "\n";
    if (!WriteFile(out, image->png)) return kExitError;
    std::cerr << absl::StrFormat(
        "textgen: wrote %s (%dx%d px): %d layers x %d heads, %d of %d tokens\n",
        out, image->width, image->height, maps->layers.size(),
        maps->heads.size(), image->tokens_shown, maps->num_tokens());
    if (kinds->size() > 1) {
      std::string sections;
      for (const AttentionMaps& kind : *kinds) {
        absl::StrAppend(&sections, sections.empty() ? "" : ", ",
                        MapKindTitle(kind.kind), " ", kind.num_tokens(), "x",
                        kind.num_keys());
      }
      std::cerr << "textgen: sections (rows x columns): " << sections << "\n";
    }
  }
  if (!html.empty()) {
    const std::string title =
        kinds->size() > 1
            ? absl::StrCat("Attention of \"",
                           absl::StrJoin(kinds->back().key_tokens, ""),
                           "\" -> \"", absl::StrJoin(maps->tokens, ""), "\"")
            : absl::StrCat("Attention of \"", absl::StrJoin(maps->tokens, ""),
                           "\"");
    const std::string page = RenderAttentionHtml(*kinds, title);
    if (!WriteFile(html, page)) return kExitError;
    std::cerr << "textgen: wrote " << html << "\n";
  }
  return kExitOk;
}

}  // namespace textgen::client
