#include "client/heatmap.h"

#include <ft2build.h>
#include FT_FREETYPE_H
#include <png.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/utf8.h"

namespace textgen::client {
namespace {

// The ramp's dark end (weight 1): ColorBrewer's darkest "Blues".
constexpr Rgb kZeroColour{255, 255, 255};
constexpr Rgb kOneColour{8, 48, 107};
constexpr Rgb kInk{40, 40, 40};
constexpr Rgb kFrame{160, 160, 160};
constexpr int kMargin = 12;
constexpr int kGap = 16;
constexpr int kBarHeight = 12;
constexpr int kMaxLabelChars = 8;
// Labels are never smaller than this; below it, only every n-th token is
// labelled.
constexpr int kMinLabelPx = 8;

// ---- UTF-8
// -------------------------------------------------------------------------------

// Code points of `s`, made well-formed first (the server never sends half a
// character; anything invalid shows as U+FFFD).
std::vector<char32_t> DecodeUtf8(const std::string& s) {
  const std::string text = SanitizeUtf8(s);
  std::vector<char32_t> out;
  for (size_t pos = 0; pos < text.size();) {
    out.push_back(NextCodePoint(text, pos));
  }
  return out;
}

// ---- Pixels
// ------------------------------------------------------------------------------

class Canvas {
 public:
  Canvas(int width, int height)
      : width_(width), height_(height), rgb_(3 * width * height, 255) {}

  int width() const { return width_; }
  int height() const { return height_; }
  const uint8_t* data() const { return rgb_.data(); }

  void Fill(const PixelRect& r, Rgb c) {
    for (int y = std::max(r.y, 0); y < std::min(r.y + r.height, height_); ++y) {
      for (int x = std::max(r.x, 0); x < std::min(r.x + r.width, width_); ++x) {
        Set(x, y, c);
      }
    }
  }
  // A 1-pixel frame just outside r.
  void Frame(const PixelRect& r, Rgb c) {
    Fill({r.x - 1, r.y - 1, r.width + 2, 1}, c);
    Fill({r.x - 1, r.y + r.height, r.width + 2, 1}, c);
    Fill({r.x - 1, r.y, 1, r.height}, c);
    Fill({r.x + r.width, r.y, 1, r.height}, c);
  }
  // Copies `other` with its top-left at (x, y) (it must fit).
  void Paste(const Canvas& other, int x, int y) {
    for (int row = 0; row < other.height_; ++row) {
      std::copy_n(&other.rgb_[3 * static_cast<size_t>(row) * other.width_],
                  3 * other.width_,
                  &rgb_[3 * (static_cast<size_t>(y + row) * width_ + x)]);
    }
  }
  // Blends colour c over pixel (x, y) with coverage alpha (0..255).
  void Blend(int x, int y, Rgb c, int alpha) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_ || alpha <= 0) return;
    uint8_t* p = &rgb_[3 * (static_cast<size_t>(y) * width_ + x)];
    p[0] = static_cast<uint8_t>((p[0] * (255 - alpha) + c.r * alpha) / 255);
    p[1] = static_cast<uint8_t>((p[1] * (255 - alpha) + c.g * alpha) / 255);
    p[2] = static_cast<uint8_t>((p[2] * (255 - alpha) + c.b * alpha) / 255);
  }

 private:
  void Set(int x, int y, Rgb c) {
    uint8_t* p = &rgb_[3 * (static_cast<size_t>(y) * width_ + x)];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }

  int width_, height_;
  std::vector<uint8_t> rgb_;
};

absl::StatusOr<std::string> EncodePng(const Canvas& canvas) {
  // libpng's simplified API: no setjmp, errors come back in image.message.
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = canvas.width();
  image.height = canvas.height();
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, canvas.data(), 0,
                                 nullptr)) {
    return absl::InternalError(absl::StrCat("PNG encoding: ", image.message));
  }
  std::string png(size, '\0');
  if (!png_image_write_to_memory(&image, png.data(), &size, 0, canvas.data(), 0,
                                 nullptr)) {
    return absl::InternalError(absl::StrCat("PNG encoding: ", image.message));
  }
  png.resize(size);
  return png;
}

// ---- Text
// --------------------------------------------------------------------------------

// A line of text rendered to coverage values, origin at its top-left.
struct TextMask {
  int width = 0, height = 0;
  std::vector<uint8_t> alpha;
};

// One FreeType face; FT_Library and FT_Face released in reverse order.
class Font {
 public:
  static absl::StatusOr<std::unique_ptr<Font>> Load(const std::string& path) {
    auto font = std::unique_ptr<Font>(new Font());
    FT_Library library = nullptr;
    if (FT_Init_FreeType(&library) != 0) {
      return absl::InternalError("FreeType did not initialise");
    }
    font->library_.reset(library);
    FT_Face face = nullptr;
    if (FT_New_Face(library, path.c_str(), 0, &face) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot load font ", path));
    }
    font->face_.reset(face);
    return font;
  }

  bool HasGlyph(char32_t cp) const {
    return FT_Get_Char_Index(face_.get(), cp) != 0;
  }

  TextMask Render(const std::string& utf8, int px) {
    FT_Face face = face_.get();
    FT_Set_Pixel_Sizes(face, 0, px);
    const int ascender = static_cast<int>(face->size->metrics.ascender >> 6);
    const int descender = static_cast<int>(-face->size->metrics.descender >> 6);
    const std::vector<char32_t> cps = DecodeUtf8(utf8);
    int width = 0;
    for (char32_t cp : cps) {
      if (FT_Load_Char(face, cp, FT_LOAD_DEFAULT) == 0) {
        width += static_cast<int>(face->glyph->advance.x >> 6);
      }
    }
    TextMask mask;
    mask.width = width;
    mask.height = ascender + descender;
    mask.alpha.assign(static_cast<size_t>(mask.width) * mask.height, 0);
    int pen = 0;
    for (char32_t cp : cps) {
      if (FT_Load_Char(face, cp, FT_LOAD_RENDER) != 0) continue;
      const FT_GlyphSlot g = face->glyph;
      const FT_Bitmap& bm = g->bitmap;
      for (unsigned row = 0; row < bm.rows; ++row) {
        for (unsigned col = 0; col < bm.width; ++col) {
          const int x = pen + g->bitmap_left + static_cast<int>(col);
          const int y = ascender - g->bitmap_top + static_cast<int>(row);
          if (x < 0 || y < 0 || x >= mask.width || y >= mask.height) continue;
          uint8_t& a = mask.alpha[static_cast<size_t>(y) * mask.width + x];
          a = std::max(a, bm.buffer[row * bm.pitch + col]);
        }
      }
      pen += static_cast<int>(g->advance.x >> 6);
    }
    return mask;
  }

 private:
  struct LibraryDeleter {
    void operator()(FT_Library l) const { FT_Done_FreeType(l); }
  };
  struct FaceDeleter {
    void operator()(FT_Face f) const { FT_Done_Face(f); }
  };
  Font() = default;
  // Declared first so that it is destroyed last.
  std::unique_ptr<FT_LibraryRec_, LibraryDeleter> library_;
  std::unique_ptr<FT_FaceRec_, FaceDeleter> face_;
};

// Draws mask with its top-left at (x, y); rotated, it reads bottom to top and
// (x, y) is then the top-left of the rotated box (mask.height wide, mask.width
// tall).
void DrawText(Canvas* canvas, const TextMask& mask, int x, int y, Rgb colour,
              bool rotated) {
  for (int my = 0; my < mask.height; ++my) {
    for (int mx = 0; mx < mask.width; ++mx) {
      const int a = mask.alpha[static_cast<size_t>(my) * mask.width + mx];
      if (rotated) {
        canvas->Blend(x + my, y + (mask.width - 1 - mx), colour, a);
      } else {
        canvas->Blend(x + mx, y + my, colour, a);
      }
    }
  }
}

int AutoCellPx(int tokens) {
  return std::clamp(384 / std::max(tokens, 1), 4, 28);
}

int CharPx(int font_px) {
  return (font_px * 62 + 99) / 100;
}  // DejaVu Sans Mono: 0.602 em

struct LabelPlan {
  int font_px = 0;  // 0: no labels
  int stride = 1;   // label every stride-th token
  int extent = 0;   // room left of and above a matrix
};

LabelPlan PlanLabels(const AttentionMaps& maps, int shown, int shown_keys,
                     int cell_px, const HeatmapOptions& options,
                     bool with_labels) {
  LabelPlan plan;
  if (!with_labels) {
    plan.extent = 3;  // room for the frame
    return plan;
  }
  plan.font_px = std::min(options.font_px, cell_px);
  if (plan.font_px < kMinLabelPx) {
    plan.font_px = kMinLabelPx;
    plan.stride = (kMinLabelPx + cell_px - 1) / cell_px;
  }
  size_t longest = 1;
  for (int t = 0; t < shown; ++t) {
    longest = std::max(
        longest,
        DecodeUtf8(DisplayToken(maps.tokens[t], kMaxLabelChars)).size());
  }
  for (int k = 0; k < shown_keys; ++k) {
    longest = std::max(
        longest,
        DecodeUtf8(DisplayToken(maps.key_token(k), kMaxLabelChars)).size());
  }
  plan.extent = static_cast<int>(longest) * CharPx(plan.font_px) + 6;
  return plan;
}

int TitlePx(const HeatmapOptions& options, bool with_labels) {
  return with_labels ? options.font_px + 8 : 4;
}

}  // namespace

Rgb WeightColor(float weight) {
  // NaN counts as 0, so a bad value can never look like attention.
  const float w = std::isnan(weight) ? 0.0f : std::clamp(weight, 0.0f, 1.0f);
  auto channel = [w](uint8_t zero, uint8_t one) {
    return static_cast<uint8_t>(std::lround(zero + (one - zero) * w));
  };
  return {channel(kZeroColour.r, kOneColour.r),
          channel(kZeroColour.g, kOneColour.g),
          channel(kZeroColour.b, kOneColour.b)};
}

HeatmapLayout::HeatmapLayout(int num_layers, int num_heads, int num_queries,
                             int num_keys, int cell_px, int label_px,
                             int title_px)
    : num_heads_(std::max(num_heads, 1)),
      num_tokens_(num_queries),
      num_keys_(num_keys),
      cell_px_(cell_px),
      label_px_(label_px),
      title_px_(title_px) {
  panel_width_ = label_px_ + num_keys_ * cell_px_;
  panel_height_ = title_px_ + label_px_ + num_tokens_ * cell_px_;
  width_ = 2 * kMargin + num_heads_ * panel_width_ + (num_heads_ - 1) * kGap;
  const int grid_height =
      num_layers * panel_height_ + std::max(num_layers - 1, 0) * kGap;
  // Below the grid: the colour bar and a line for its "0" and "1".
  height_ = 2 * kMargin + grid_height + kGap + kBarHeight + title_px_;
  // Wide enough for the colour bar and its caption.
  width_ = std::max(width_, 2 * kMargin + 420);
}

PixelRect HeatmapLayout::Matrix(int panel) const {
  const int row = panel / num_heads_;
  const int col = panel % num_heads_;
  const int x = kMargin + col * (panel_width_ + kGap) + label_px_;
  const int y = kMargin + row * (panel_height_ + kGap) + title_px_ + label_px_;
  return {x, y, num_keys_ * cell_px_, num_tokens_ * cell_px_};
}

PixelRect HeatmapLayout::Cell(int panel, int q, int k) const {
  const PixelRect m = Matrix(panel);
  return {m.x + k * cell_px_, m.y + q * cell_px_, cell_px_, cell_px_};
}

PixelRect HeatmapLayout::Title(int panel) const {
  const PixelRect m = Matrix(panel);
  return {m.x - label_px_, m.y - label_px_ - title_px_, m.width + label_px_,
          title_px_};
}

PixelRect HeatmapLayout::ColourBar() const {
  return {kMargin, height_ - kMargin - title_px_ - kBarHeight,
          std::min(width_ - 2 * kMargin, 256), kBarHeight};
}

HeatmapLayout LayoutHeatmap(const AttentionMaps& maps,
                            const HeatmapOptions& options, bool with_labels) {
  const int shown =
      std::min<int>(maps.num_tokens(), std::max(options.max_tokens, 1));
  const int shown_keys =
      std::min<int>(maps.num_keys(), std::max(options.max_tokens, 1));
  const int cell = options.cell_px > 0
                       ? options.cell_px
                       : AutoCellPx(std::max(shown, shown_keys));
  const LabelPlan labels =
      PlanLabels(maps, shown, shown_keys, cell, options, with_labels);
  return HeatmapLayout(static_cast<int>(maps.layers.size()),
                       static_cast<int>(maps.heads.size()), shown, shown_keys,
                       cell, labels.extent, TitlePx(options, with_labels));
}

std::string DisplayToken(const std::string& text, int max_chars) {
  std::vector<char32_t> shown;
  for (char32_t cp : DecodeUtf8(text)) {
    switch (cp) {
      case '\n':
        shown.insert(shown.end(), {'\\', 'n'});
        break;
      case '\t':
        shown.insert(shown.end(), {'\\', 't'});
        break;
      case '\r':
        shown.insert(shown.end(), {'\\', 'r'});
        break;
      case ' ':
        shown.push_back(U'\u2423');
        break;  // OPEN BOX, the visible space
      default:
        if (cp < 0x20 || cp == 0x7F) {
          for (char c : absl::StrFormat("\\x%02x", static_cast<unsigned>(cp))) {
            shown.push_back(static_cast<unsigned char>(c));
          }
        } else {
          shown.push_back(cp);
        }
    }
  }
  if (shown.empty()) shown = {'"', '"'};
  if (static_cast<int>(shown.size()) > max_chars) {
    shown.resize(std::max(max_chars - 1, 1));
    shown.push_back(U'\u2026');
  }
  std::string out;
  for (char32_t cp : shown) AppendUtf8(cp, out);
  return out;
}

std::string PanelTitle(const AttentionMaps& maps, int layer, int head) {
  return absl::StrCat(
      maps.encoder_decoder ? absl::StrCat(MapKindTitle(maps.kind), " ") : "",
      "L", layer, " H", head);
}

namespace {

// One section of RenderHeatmaps: maps as RenderHeatmap draws them. `font`
// may be null (no labels).
absl::StatusOr<Canvas> DrawHeatmap(const AttentionMaps& maps,
                                   const HeatmapOptions& options, Font* font,
                                   HeatmapImage& result) {
  const size_t t = maps.num_tokens();
  const size_t keys = maps.num_keys();
  if (t == 0 || keys == 0 || maps.layers.empty() || maps.heads.empty()) {
    return absl::InvalidArgumentError("no attention maps to draw");
  }
  if (maps.maps.size() != maps.layers.size() * maps.heads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(maps.maps.size(), " maps for ", maps.layers.size(),
                     " layers x ", maps.heads.size(), " heads"));
  }
  for (const std::vector<float>& m : maps.maps) {
    if (m.size() != t * keys) {
      return absl::InvalidArgumentError(
          absl::StrCat("a map has ", m.size(), " weights, not ", t, "x", keys));
    }
  }

  const HeatmapLayout layout = LayoutHeatmap(maps, options, font != nullptr);
  const int shown = layout.num_tokens();
  const int shown_keys = layout.num_keys();
  const bool causal = maps.kind == MapKind::kDecoderSelf;
  if (static_cast<size_t>(shown) < t ||
      static_cast<size_t>(shown_keys) < keys) {
    result.warnings.push_back(
        causal ? absl::StrCat(
                     "the prompt has ", t, " tokens; drawing the first ", shown,
                     " (--max_tokens_shown), which is exactly the attention of "
                     "that prefix")
               : absl::StrCat(MapKindTitle(maps.kind), " maps of ", t, "x",
                              keys, " tokens: drawing the first ", shown, "x",
                              shown_keys, " (--max_tokens_shown)"));
  }

  Canvas canvas(layout.width(), layout.height());
  for (size_t li = 0; li < maps.layers.size(); ++li) {
    for (size_t hi = 0; hi < maps.heads.size(); ++hi) {
      const int panel = static_cast<int>(li * maps.heads.size() + hi);
      const std::vector<float>& m = maps.map(li, hi);
      for (int q = 0; q < shown; ++q) {
        for (int k = 0; k < shown_keys; ++k) {
          // Above the diagonal is the causal mask: drawn as weight 0 whatever
          // the data says.
          const float w = maps.masked(q, k) ? 0.0f : m[q * keys + k];
          canvas.Fill(layout.Cell(panel, q, k), WeightColor(w));
        }
      }
      canvas.Frame(layout.Matrix(panel), kFrame);
    }
  }
  // Colour bar: the ramp from 0 to 1, framed.
  const PixelRect bar = layout.ColourBar();
  for (int x = 0; x < bar.width; ++x) {
    canvas.Fill(
        {bar.x + x, bar.y, 1, bar.height},
        WeightColor(static_cast<float>(x) / std::max(bar.width - 1, 1)));
  }
  canvas.Frame(bar, kFrame);

  if (font != nullptr) {
    const LabelPlan labels =
        PlanLabels(maps, shown, shown_keys, layout.cell_px(), options, true);
    for (size_t li = 0; li < maps.layers.size(); ++li) {
      for (size_t hi = 0; hi < maps.heads.size(); ++hi) {
        const int panel = static_cast<int>(li * maps.heads.size() + hi);
        const PixelRect title = layout.Title(panel);
        const TextMask text = font->Render(
            PanelTitle(maps, maps.layers[li], maps.heads[hi]), options.font_px);
        DrawText(&canvas, text, title.x + layout.label_px(), title.y + 2, kInk,
                 false);
        const PixelRect m = layout.Matrix(panel);
        // Query labels right-aligned left of row i; key labels above column
        // k, rotated.
        for (int i = 0; i < shown; i += labels.stride) {
          const TextMask label = font->Render(
              DisplayToken(maps.tokens[i], kMaxLabelChars), labels.font_px);
          const int centre = i * layout.cell_px() + layout.cell_px() / 2;
          DrawText(&canvas, label, m.x - 4 - label.width,
                   m.y + centre - label.height / 2, kInk, false);
        }
        for (int k = 0; k < shown_keys; k += labels.stride) {
          const TextMask label = font->Render(
              DisplayToken(maps.key_token(k), kMaxLabelChars), labels.font_px);
          const int centre = k * layout.cell_px() + layout.cell_px() / 2;
          DrawText(&canvas, label, m.x + centre - label.height / 2,
                   m.y - 4 - label.width, kInk, true);
        }
      }
    }
    const TextMask zero = font->Render("0", options.font_px);
    const TextMask one = font->Render("1  attention weight", options.font_px);
    DrawText(&canvas, zero, bar.x, bar.y + bar.height + 3, kInk, false);
    DrawText(&canvas, one, bar.x + bar.width - CharPx(options.font_px) / 2,
             bar.y + bar.height + 3, kInk, false);
  }

  // The figure the summary reports: the decoder's (the prompt's) own maps,
  // or the first section's.
  if (causal || result.section_top.empty()) result.tokens_shown = shown;
  return canvas;
}

}  // namespace

absl::StatusOr<HeatmapImage> RenderHeatmap(const AttentionMaps& maps,
                                           const HeatmapOptions& options) {
  return RenderHeatmaps({maps}, options);
}

absl::StatusOr<HeatmapImage> RenderHeatmaps(
    const std::vector<AttentionMaps>& sections, const HeatmapOptions& options) {
  if (sections.empty()) {
    return absl::InvalidArgumentError("no attention maps to draw");
  }
  HeatmapImage result;
  std::unique_ptr<Font> font;
  if (!options.font_path.empty()) {
    absl::StatusOr<std::unique_ptr<Font>> loaded =
        Font::Load(options.font_path);
    if (loaded.ok()) {
      font = std::move(*loaded);
    } else {
      result.warnings.push_back(
          absl::StrCat(loaded.status().message(), ": drawing without labels"));
    }
  }
  std::vector<Canvas> drawn;
  int width = 0, height = 0;
  for (const AttentionMaps& maps : sections) {
    absl::StatusOr<Canvas> canvas =
        DrawHeatmap(maps, options, font.get(), result);
    if (!canvas.ok()) return canvas.status();
    result.section_top.push_back(height);
    width = std::max(width, canvas->width());
    height += canvas->height();
    drawn.push_back(*std::move(canvas));
  }
  // One section is the picture itself; more are stacked, left-aligned, on
  // white.
  Canvas whole =
      drawn.size() == 1 ? std::move(drawn[0]) : Canvas(width, height);
  if (drawn.size() > 1) {
    for (size_t i = 0; i < drawn.size(); ++i)
      whole.Paste(drawn[i], 0, result.section_top[i]);
  }
  absl::StatusOr<std::string> png = EncodePng(whole);
  if (!png.ok()) return png.status();
  result.png = std::move(*png);
  result.width = whole.width();
  result.height = whole.height();
  return result;
}

}  // namespace textgen::client
