// attention_png_check: checks a PNG that `textgen attention` wrote against the
// maps the server serves. It fetches the same maps itself, lays them out as
// client/heatmap.h does, decodes the PNG with libpng and requires every cell to
// be exactly the colour of its weight (masked cells: the zero colour). Run by
// tests/client/cli_test.py.
//
//   attention_png_check --server 127.0.0.1:PORT --png FILE --prompt TEXT
//   [--source TEXT] [--layer 0 --head 1,2]
//
// With --source (an encoder-decoder model), every section (encoder self,
// decoder self, cross: client/heatmap.h RenderHeatmaps) is checked.
//
// Exit 0 and a "[attention_png] ..." line when it matches; 1 with the first
// mismatch.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/heatmap.h"
#include "client/textgen_client.h"
#include "tests/client/png_decode.h"

ABSL_FLAG(std::string, server, "", "The server the PNG's maps came from");
ABSL_FLAG(std::string, png, "", "The PNG to check");
ABSL_FLAG(std::string, prompt, "", "The prompt it was made for");
ABSL_FLAG(std::string, source, "",
          "The source it was made for (encoder-decoder models)");
ABSL_FLAG(std::vector<std::string>, layer, {}, "As given to textgen attention");
ABSL_FLAG(std::vector<std::string>, head, {}, "As given to textgen attention");
ABSL_FLAG(int, max_tokens_shown, 64, "As given to textgen attention");

namespace textgen::client {
namespace {

std::vector<int> Ints(const std::vector<std::string>& values) {
  std::vector<int> out;
  for (const std::string& v : values) {
    int i = 0;
    if (absl::SimpleAtoi(v, &i)) out.push_back(i);
  }
  return out;
}

int Fail(const std::string& message) {
  std::cerr << "[attention_png] FAIL: " << message << "\n";
  return 1;
}

int Run() {
  ClientOptions client_options;
  client_options.target = absl::GetFlag(FLAGS_server);
  absl::StatusOr<TextgenClient> client = TextgenClient::Create(client_options);
  if (!client.ok()) return Fail(client.status().ToString());
  v1::Prompt prompt, source;
  prompt.set_text(absl::GetFlag(FLAGS_prompt));
  source.set_text(absl::GetFlag(FLAGS_source));
  absl::StatusOr<std::vector<AttentionMaps>> kinds = client->AttentionByKind(
      prompt.text().empty() ? nullptr : &prompt,
      source.text().empty() ? nullptr : &source,
      Ints(absl::GetFlag(FLAGS_layer)), Ints(absl::GetFlag(FLAGS_head)));
  if (!kinds.ok()) return Fail(kinds.status().ToString());

  std::ifstream in(absl::GetFlag(FLAGS_png), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<DecodedPng> png = DecodePng(bytes.str());
  if (!png.ok()) return Fail(png.status().ToString());

  HeatmapOptions options;  // the CLI's defaults: DejaVu Sans Mono labels
  options.max_tokens = absl::GetFlag(FLAGS_max_tokens_shown);
  // Sections (an encoder-decoder model's kinds) one under the other.
  int width = 0, height = 0;
  for (const AttentionMaps& maps : *kinds) {
    const HeatmapLayout layout =
        LayoutHeatmap(maps, options, /*with_labels=*/true);
    width = std::max(width, layout.width());
    height += layout.height();
  }
  if (png->width != width || png->height != height) {
    return Fail(absl::StrCat("picture is ", png->width, "x", png->height,
                             ", layout says ", width, "x", height));
  }
  int top = 0;
  for (const AttentionMaps& maps : *kinds) {
    const HeatmapLayout layout =
        LayoutHeatmap(maps, options, /*with_labels=*/true);
    const bool causal = maps.kind == MapKind::kDecoderSelf;
    const int t = static_cast<int>(maps.num_tokens());
    const int keys = static_cast<int>(maps.num_keys());
    const int shown = layout.num_tokens();
    const int shown_keys = layout.num_keys();
    int cells = 0, masked = 0;
    for (size_t li = 0; li < maps.layers.size(); ++li) {
      for (size_t hi = 0; hi < maps.heads.size(); ++hi) {
        const int panel = static_cast<int>(li * maps.heads.size() + hi);
        const std::vector<float>& m = maps.map(li, hi);
        for (int q = 0; q < shown; ++q) {
          for (int k = 0; k < shown_keys; ++k) {
            const float w = m[q * keys + k];
            if (causal && k > q && w != 0.0f)
              return Fail("the server sent a weight above the diagonal");
            const Rgb want = WeightColor(w);
            PixelRect cell = layout.Cell(panel, q, k);
            cell.y += top;
            Rgb got;
            if (!RectIs(*png, cell, want, &got)) {
              return Fail(absl::StrCat(
                  PanelTitle(maps, maps.layers[li], maps.heads[hi]), " cell (",
                  q, ",", k, ") weight ", w, ": colour ", got.r, ",", got.g,
                  ",", got.b, " instead of ", want.r, ",", want.g, ",",
                  want.b));
            }
            ++cells;
            masked += causal && k > q;
          }
        }
      }
    }
    std::cout << "[attention_png] " << png->width << "x" << png->height
              << " px, " << MapKindTitle(maps.kind) << ": "
              << maps.layers.size() << " layers x " << maps.heads.size()
              << " heads, " << shown << "x" << shown_keys << " of " << t << "x"
              << keys << " tokens: " << cells << " cells match their weights ("
              << masked << " masked, all the zero colour)\n";
    top += layout.height();
  }
  return 0;
}

}  // namespace
}  // namespace textgen::client

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return textgen::client::Run();
}
