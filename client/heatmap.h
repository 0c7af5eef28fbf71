// Attention heatmaps as PNG: one panel per (layer, head), laid out as a grid
// with a row per layer and a column per head, each panel titled "L<layer>
// H<head>" with the prompt's tokens along both axes (queries down the left,
// keys across the top), and a colour bar.
//
// An encoder–decoder model's maps come in three kinds
// (client/attention_maps.h), drawn as sections one under the other
// (RenderHeatmaps), each panel titled with its kind ("cross L1 H0"): encoder
// self-attention (source × source), decoder self-attention (target × target)
// and cross-attention, whose rows are the target's tokens and whose columns are
// the source's.
//
// Colour: one monotone ramp from white (weight 0) to dark blue (weight 1),
// linear in the weight, so a darker cell always means more attention. Cells
// above the diagonal (the causal mask) are exactly the weight-0 colour.
//
// Labels are drawn with FreeType in DejaVu Sans Mono; if the font cannot be
// loaded the picture is drawn without labels and a warning says so. Whitespace
// tokens are shown as escapes ("\n", "\t", "␣" for a space). A prompt longer
// than max_tokens is drawn as its first max_tokens tokens: with a causal mask
// that square is exactly the attention of that prefix (no query in it can see a
// later key), and a warning says how many were left out.
//
//   HeatmapOptions options;
//   absl::StatusOr<HeatmapImage> image = RenderHeatmap(maps, options);
//   // image->png is a PNG file's bytes; image->warnings are for the user.
#ifndef TEXTGEN_CLIENT_HEATMAP_H_
#define TEXTGEN_CLIENT_HEATMAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/attention_maps.h"

namespace textgen::client {

inline constexpr char kDefaultHeatmapFont[] =
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";

struct HeatmapOptions {
  // Cells per side at most; longer prompts show their first max_tokens tokens.
  int max_tokens = 64;
  // Side of one cell in pixels; 0 picks one from the number of tokens (larger
  // for short prompts, at least 4).
  int cell_px = 0;
  // TrueType font for titles and token labels; empty draws no text at all.
  std::string font_path = kDefaultHeatmapFont;
  // Text height in pixels.
  int font_px = 12;
};

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const {
    return r == o.r && g == o.g && b == o.b;
  }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

// The colour of a cell with this weight (clamped to [0, 1]). WeightColor(0) is
// white, the colour of masked cells; each channel falls linearly as the weight
// grows.
Rgb WeightColor(float weight);

struct PixelRect {
  int x = 0, y = 0, width = 0, height = 0;
};

// Where everything is in the picture. Panels are numbered like
// AttentionMaps::maps (layer-major). Public so that tests and other renderers
// can find cells.
class HeatmapLayout {
 public:
  // num_tokens: tokens drawn per side (already capped). label_px: room for
  // token labels left of and above each panel (0 without a font). title_px:
  // room for a panel's title.
  HeatmapLayout(int num_layers, int num_heads, int num_tokens, int cell_px,
                int label_px, int title_px)
      : HeatmapLayout(num_layers, num_heads, num_tokens, num_tokens, cell_px,
                      label_px, title_px) {}
  // Panels of num_queries rows and num_keys columns (cross-attention).
  HeatmapLayout(int num_layers, int num_heads, int num_queries, int num_keys,
                int cell_px, int label_px, int title_px);

  int width() const { return width_; }
  int height() const { return height_; }
  // Rows (queries) drawn per panel; num_keys() columns.
  int num_tokens() const { return num_tokens_; }
  int num_keys() const { return num_keys_; }
  int cell_px() const { return cell_px_; }
  int label_px() const { return label_px_; }

  // The matrix area of a panel (all its cells), and one cell: query q's row,
  // key k's column.
  PixelRect Matrix(int panel) const;
  PixelRect Cell(int panel, int q, int k) const;
  // The panel's title line, above its key labels.
  PixelRect Title(int panel) const;
  // The colour bar under the grid, weight 0 at its left end and 1 at its right.
  PixelRect ColourBar() const;

 private:
  int num_heads_, num_tokens_, num_keys_, cell_px_, label_px_, title_px_;
  int panel_width_, panel_height_;
  int width_, height_;
};

// The layout RenderHeatmap uses for these maps and options, given whether
// labels will be drawn (they are when the font loads).
HeatmapLayout LayoutHeatmap(const AttentionMaps& maps,
                            const HeatmapOptions& options, bool with_labels);

// How a token is written on an axis: whitespace and control characters as
// escapes, and at most max_chars characters (longer ones end in "…").
std::string DisplayToken(const std::string& text, int max_chars = 8);

struct HeatmapImage {
  std::string png;                    // the PNG file's bytes
  int width = 0, height = 0;          // pixels
  int tokens_shown = 0;               // cells per side (rows, first section)
  std::vector<std::string> warnings;  // no font, prompt capped
  // RenderHeatmaps: where each section starts (its LayoutHeatmap's y = 0).
  std::vector<int> section_top;
};

// The title of a panel: "L<layer> H<head>", after the kind's name ("cross
// L0 H1") for an encoder–decoder model's maps.
std::string PanelTitle(const AttentionMaps& maps, int layer, int head);

// Draws the maps. Errors: no maps, a map of the wrong size, PNG encoding
// failure.
absl::StatusOr<HeatmapImage> RenderHeatmap(const AttentionMaps& maps,
                                           const HeatmapOptions& options);

// Draws several sets of maps (an encoder–decoder model's kinds) one under
// the other, each as RenderHeatmap draws it alone, left-aligned. Errors as
// RenderHeatmap's, or none to draw.
absl::StatusOr<HeatmapImage> RenderHeatmaps(
    const std::vector<AttentionMaps>& sections, const HeatmapOptions& options);

}  // namespace textgen::client

#endif  // TEXTGEN_CLIENT_HEATMAP_H_
