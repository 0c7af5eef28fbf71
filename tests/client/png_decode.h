// Test helper: a PNG file's bytes to RGB pixels, with libpng's simplified API.
#ifndef TEXTGEN_TESTS_CLIENT_PNG_DECODE_H_
#define TEXTGEN_TESTS_CLIENT_PNG_DECODE_H_

#include <png.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/heatmap.h"

namespace textgen::client {

struct DecodedPng {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes a pixel
  Rgb At(int x, int y) const {
    const uint8_t* p = &rgb[3 * (static_cast<size_t>(y) * width + x)];
    return {p[0], p[1], p[2]};
  }
};

inline absl::StatusOr<DecodedPng> DecodePng(const std::string& bytes) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PNG: ", image.message));
  }
  image.format = PNG_FORMAT_RGB;
  DecodedPng out;
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("bad PNG: ", image.message));
  }
  return out;
}

// Whether every pixel of r has colour c; on a mismatch, *seen is the first
// other colour.
inline bool RectIs(const DecodedPng& png, const PixelRect& r, Rgb c,
                   Rgb* seen = nullptr) {
  for (int y = r.y; y < r.y + r.height; ++y) {
    for (int x = r.x; x < r.x + r.width; ++x) {
      if (png.At(x, y) != c) {
        if (seen != nullptr) *seen = png.At(x, y);
        return false;
      }
    }
  }
  return true;
}

}  // namespace textgen::client

#endif  // TEXTGEN_TESTS_CLIENT_PNG_DECODE_H_
