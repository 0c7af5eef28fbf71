// client/heatmap.h: the PNG is decoded (libpng) and checked against the maps
// drawn — cell colours follow the weights monotonically, the masked upper
// triangle is exactly the zero colour, and the picture's size and cells are
// where HeatmapLayout says.
#include "client/heatmap.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <utility>

#include "client/attention_html.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/png_decode.h"

namespace textgen::client {
namespace {

using ::testing::HasSubstr;

// Darkness of a colour: 0 for white, larger for darker (sum of the channels'
// distance from 255).
int Darkness(Rgb c) { return 3 * 255 - c.r - c.g - c.b; }

// Causal maps with distinct weights below the diagonal: row q spreads its mass
// over keys 0..q unevenly (key k gets a share growing with k and varying by
// panel), rows sum to 1. If garbage_above, the masked entries hold large values
// instead of 0.
AttentionMaps MakeMaps(int layers, int heads, int t,
                       bool garbage_above = false) {
  AttentionMaps maps;
  const char* texts[] = {"R", "O", " ", "\n", "M", "E", "O", ":", "ab", "\t"};
  for (int i = 0; i < t; ++i) {
    maps.tokens.push_back(texts[i % 10]);
    maps.token_ids.push_back(i);
  }
  for (int l = 0; l < layers; ++l) maps.layers.push_back(l);
  for (int h = 0; h < heads; ++h) maps.heads.push_back(2 * h + 1);
  for (int p = 0; p < layers * heads; ++p) {
    std::vector<float> m(t * t, 0.0f);
    for (int q = 0; q < t; ++q) {
      double sum = 0;
      for (int k = 0; k <= q; ++k) sum += std::pow(k + 1.0 + p, 1.5);
      for (int k = 0; k < t; ++k) {
        m[q * t + k] =
            k <= q ? static_cast<float>(std::pow(k + 1.0 + p, 1.5) / sum)
                   : (garbage_above ? 0.9f : 0.0f);
      }
    }
    maps.maps.push_back(std::move(m));
  }
  return maps;
}

DecodedPng Render(const AttentionMaps& maps, const HeatmapOptions& options,
                  HeatmapImage* image_out = nullptr) {
  absl::StatusOr<HeatmapImage> image = RenderHeatmap(maps, options);
  EXPECT_TRUE(image.ok()) << image.status();
  absl::StatusOr<DecodedPng> png = DecodePng(image->png);
  EXPECT_TRUE(png.ok()) << png.status();
  if (image_out != nullptr) *image_out = *image;
  return *png;
}

TEST(WeightColorTest, ZeroIsWhiteAndDarknessGrowsWithWeight) {
  EXPECT_EQ(WeightColor(0.0f), (Rgb{255, 255, 255}));
  EXPECT_EQ(WeightColor(-1.0f), WeightColor(0.0f));
  EXPECT_EQ(WeightColor(NAN), WeightColor(0.0f));
  EXPECT_EQ(WeightColor(2.0f), WeightColor(1.0f));
  for (int i = 1; i <= 100; ++i) {
    const Rgb lighter = WeightColor((i - 1) / 100.0f),
              darker = WeightColor(i / 100.0f);
    EXPECT_GT(Darkness(darker), Darkness(lighter)) << i;
    EXPECT_LE(darker.r, lighter.r);
    EXPECT_LE(darker.g, lighter.g);
    EXPECT_LE(darker.b, lighter.b);
  }
}

class HeatmapTest : public ::testing::TestWithParam<bool> {
 protected:
  // With labels (the DejaVu font) or without (no font): cells must not change.
  HeatmapOptions Options() const {
    HeatmapOptions options;
    if (!GetParam()) options.font_path = "";
    return options;
  }
};

TEST_P(HeatmapTest, CellsFollowTheWeightsAndTheMaskIsZero) {
  const AttentionMaps maps = MakeMaps(2, 3, 9);
  HeatmapImage image;
  const DecodedPng png = Render(maps, Options(), &image);
  EXPECT_TRUE(image.warnings.empty()) << image.warnings[0];
  const HeatmapLayout layout = LayoutHeatmap(maps, Options(), GetParam());
  ASSERT_EQ(png.width, layout.width());
  ASSERT_EQ(png.height, layout.height());
  EXPECT_EQ(image.tokens_shown, 9);

  const Rgb zero = WeightColor(0.0f);
  int masked = 0;
  for (int panel = 0; panel < 6; ++panel) {
    const std::vector<float>& m = maps.maps[panel];
    // (weight, darkness) of every visible cell; each cell is one solid colour.
    std::vector<std::pair<float, int>> seen;
    for (int q = 0; q < 9; ++q) {
      for (int k = 0; k < 9; ++k) {
        const PixelRect cell = layout.Cell(panel, q, k);
        const Rgb centre =
            png.At(cell.x + cell.width / 2, cell.y + cell.height / 2);
        Rgb other;
        ASSERT_TRUE(RectIs(png, cell, centre, &other))
            << "panel " << panel << " cell " << q << "," << k
            << " is not solid";
        if (k > q) {
          EXPECT_EQ(centre, zero) << "masked cell " << q << "," << k;
          ++masked;
        } else {
          EXPECT_NE(centre, zero)
              << "a weight > 0 drawn as zero at " << q << "," << k;
          seen.emplace_back(m[q * 9 + k], Darkness(centre));
        }
      }
    }
    // Monotone: sorted by weight, darkness never falls, and rises whenever the
    // weight rises by more than one colour step (1/247 of the ramp's widest
    // channel).
    std::sort(seen.begin(), seen.end());
    for (size_t i = 1; i < seen.size(); ++i) {
      EXPECT_GE(seen[i].second, seen[i - 1].second)
          << "weight " << seen[i].first;
      if (seen[i].first - seen[i - 1].first > 2.0f / 247) {
        EXPECT_GT(seen[i].second, seen[i - 1].second)
            << "weights " << seen[i - 1].first << " < " << seen[i].first;
      }
    }
  }
  EXPECT_EQ(masked, 6 * 36);
}

TEST_P(HeatmapTest, MaskIsDrawnAsZeroWhateverTheData) {
  const AttentionMaps maps = MakeMaps(1, 2, 6, /*garbage_above=*/true);
  const DecodedPng png = Render(maps, Options());
  const HeatmapLayout layout = LayoutHeatmap(maps, Options(), GetParam());
  for (int panel = 0; panel < 2; ++panel) {
    for (int q = 0; q < 6; ++q) {
      for (int k = q + 1; k < 6; ++k) {
        EXPECT_TRUE(RectIs(png, layout.Cell(panel, q, k), WeightColor(0.0f)));
      }
    }
  }
}

TEST_P(HeatmapTest, LayoutIsAGridOfLayersByHeadsThatFitsThePicture) {
  const AttentionMaps maps = MakeMaps(3, 2, 5);
  const HeatmapLayout layout = LayoutHeatmap(maps, Options(), GetParam());
  const DecodedPng png = Render(maps, Options());
  EXPECT_EQ(png.width, layout.width());
  EXPECT_EQ(png.height, layout.height());
  // Panel p is layer p / heads (rows), head p % heads (columns).
  EXPECT_EQ(layout.Matrix(0).y, layout.Matrix(1).y);
  EXPECT_LT(layout.Matrix(0).x, layout.Matrix(1).x);
  EXPECT_EQ(layout.Matrix(0).x, layout.Matrix(2).x);
  EXPECT_LT(layout.Matrix(1).y + layout.Matrix(1).height, layout.Matrix(3).y);
  for (int panel = 0; panel < 6; ++panel) {
    const PixelRect last = layout.Cell(panel, 4, 4);
    EXPECT_LE(last.x + last.width, png.width);
    EXPECT_LE(last.y + last.height, png.height);
    EXPECT_EQ(layout.Cell(panel, 1, 0).y - layout.Cell(panel, 0, 0).y,
              layout.cell_px());
    EXPECT_EQ(layout.Cell(panel, 0, 1).x - layout.Cell(panel, 0, 0).x,
              layout.cell_px());
  }
  // The colour bar runs from the zero colour to the one colour.
  const PixelRect bar = layout.ColourBar();
  EXPECT_EQ(png.At(bar.x, bar.y + bar.height / 2), WeightColor(0.0f));
  EXPECT_EQ(png.At(bar.x + bar.width - 1, bar.y + bar.height / 2),
            WeightColor(1.0f));
}

INSTANTIATE_TEST_SUITE_P(LabelsOrNot, HeatmapTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Labels" : "NoFont";
                         });

TEST(HeatmapRenderTest, LabelsAreDrawnOutsideTheCells) {
  const AttentionMaps maps = MakeMaps(1, 1, 6);
  HeatmapOptions options;
  HeatmapOptions no_font;
  no_font.font_path = "";
  const DecodedPng with = Render(maps, options);
  const HeatmapLayout layout = LayoutHeatmap(maps, options, true);
  // Some ink left of the matrix (query labels) and above it (key labels and the
  // title).
  const PixelRect m = layout.Matrix(0);
  int ink = 0;
  for (int y = m.y; y < m.y + m.height; ++y) {
    for (int x = m.x - layout.label_px(); x < m.x - 2; ++x)
      ink += with.At(x, y) != WeightColor(0);
  }
  EXPECT_GT(ink, 20) << "no query labels";
  EXPECT_GT(layout.label_px(), LayoutHeatmap(maps, no_font, false).label_px());
}

TEST(HeatmapRenderTest, MissingFontDrawsWithoutLabelsAndWarns) {
  const AttentionMaps maps = MakeMaps(1, 1, 4);
  HeatmapOptions options;
  options.font_path = "/nonexistent/font.ttf";
  HeatmapImage image;
  const DecodedPng png = Render(maps, options, &image);
  ASSERT_EQ(image.warnings.size(), 1u);
  EXPECT_THAT(image.warnings[0], HasSubstr("/nonexistent/font.ttf"));
  EXPECT_EQ(png.width, LayoutHeatmap(maps, options, false).width());
}

TEST(HeatmapRenderTest, LongPromptsShowTheirFirstTokensAndSaySo) {
  const AttentionMaps maps = MakeMaps(1, 1, 30);
  HeatmapOptions options;
  options.max_tokens = 12;
  HeatmapImage image;
  const DecodedPng png = Render(maps, options, &image);
  EXPECT_EQ(image.tokens_shown, 12);
  ASSERT_EQ(image.warnings.size(), 1u);
  EXPECT_THAT(image.warnings[0], HasSubstr("30 tokens"));
  const HeatmapLayout layout = LayoutHeatmap(maps, options, true);
  EXPECT_EQ(layout.num_tokens(), 12);
  // Cell (11, 3) shows the map's (11, 3) even though rows are 30 wide.
  const PixelRect cell = layout.Cell(0, 11, 3);
  EXPECT_TRUE(RectIs(png, cell, WeightColor(maps.maps[0][11 * 30 + 3])));
}

TEST(HeatmapRenderTest, BadInputIsAnError) {
  AttentionMaps maps = MakeMaps(1, 2, 4);
  maps.maps[1].pop_back();
  EXPECT_FALSE(RenderHeatmap(maps, HeatmapOptions()).ok());
  EXPECT_FALSE(RenderHeatmap(AttentionMaps(), HeatmapOptions()).ok());
}

TEST(DisplayTokenTest, WhitespaceIsEscapedAndLongTokensCut) {
  EXPECT_EQ(DisplayToken("\n"), "\\n");
  EXPECT_EQ(DisplayToken("\t"), "\\t");
  EXPECT_EQ(DisplayToken(" "), "\u2423");
  EXPECT_EQ(DisplayToken(" the"), "\u2423the");
  EXPECT_EQ(DisplayToken("\x01"), "\\x01");
  EXPECT_EQ(DisplayToken(""), "\"\"");
  EXPECT_EQ(DisplayToken("abcdefghijk", 5), "abcd\u2026");
  EXPECT_EQ(DisplayToken("é", 5), "é");
}

TEST(AttentionHtmlTest, SelfContainedWithTheDataInlined) {
  AttentionMaps maps = MakeMaps(1, 2, 3);
  maps.tokens[0] = "</script><b>";
  const std::string html = RenderAttentionHtml(maps, "Attention of <x>");
  // The server's explorer page, the maps embedded in its JSON form.
  EXPECT_THAT(html, HasSubstr("<title>textgen attention explorer</title>"));
  EXPECT_THAT(html,
              HasSubstr("<script type=\"application/json\" id=\"data\">"));
  EXPECT_THAT(html, HasSubstr("\"model\":\"Attention of \\u003cx>\""));
  EXPECT_THAT(html, HasSubstr("\"head\":1,"));
  EXPECT_THAT(html, HasSubstr("\"head\":3,"));
  // The token cannot close the data's <script> early; nothing is fetched from
  // elsewhere.
  EXPECT_THAT(html, HasSubstr("\\u003c/script>\\u003cb>"));
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
}

// A window's or pooled map's cell is masked only when its first key comes
// after its last query, in positions of the whole map.
TEST(AttentionMapsTest, MaskedCellsOfWindowsAndPooledMaps) {
  AttentionMaps window;
  window.first_query = 4;             // rows: queries 4, 5, ...
  window.first_key = 2;               // columns: keys 2, 3, ...
  EXPECT_FALSE(window.masked(0, 2));  // query 4, key 4
  EXPECT_TRUE(window.masked(0, 3));   // query 4, key 5
  EXPECT_FALSE(window.masked(1, 3));  // query 5, key 5

  AttentionMaps pooled;
  pooled.query_step = 4;  // row r: queries 4r .. 4r + 3
  pooled.key_step = 4;
  EXPECT_FALSE(pooled.masked(0, 0));
  EXPECT_TRUE(pooled.masked(0, 1));  // keys 4..7 after queries 0..3
  EXPECT_FALSE(pooled.masked(1, 1));

  AttentionMaps cross = pooled;
  cross.kind = MapKind::kCross;
  EXPECT_FALSE(cross.masked(0, 1));
}

}  // namespace
}  // namespace textgen::client
