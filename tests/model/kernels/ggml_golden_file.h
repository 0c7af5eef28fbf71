// Reads tests/model/kernels/testdata/ggml_blocks.golden, the ggml block
// goldens made by llama.cpp's own quantizers and dequantizers
// (tools/make_ggml_block_goldens.c documents the format and how to remake
// the file; ggml_golden_rows.h computes the rows it was made from).
#ifndef TEXTGEN_TESTS_MODEL_KERNELS_GGML_GOLDEN_FILE_H_
#define TEXTGEN_TESTS_MODEL_KERNELS_GGML_GOLDEN_FILE_H_

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace textgen::testing {

struct GgmlGoldenRecord {
  enum Kind : uint32_t { kQuantized = 1, kRandom = 2, kHashed = 3 };
  Kind kind = kQuantized;
  uint32_t type = 0;          // ggml_type.
  uint32_t block_values = 0;  // ggml_blck_size(type).
  uint32_t block_bytes = 0;   // ggml_type_size(type).
  uint32_t first_row = 0;     // Of GoldenRow (kQuantized, kHashed).
  uint32_t rows = 0;          // kRandom: blocks.
  uint32_t row_values = 0;

  // kQuantized, kRandom: the blocks, and ggml's floats from them (bits).
  std::vector<uint8_t> blocks;
  std::vector<uint32_t> floats;
  // kHashed: per row, FNV-1a of ggml's quantized bytes and of its floats.
  std::vector<uint64_t> block_hashes;
  std::vector<uint64_t> float_hashes;

  size_t RowBytes() const {
    return size_t{row_values} / block_values * block_bytes;
  }
};

inline std::string GgmlGoldenPath() {
  return std::string(TEXTGEN_SOURCE_DIR) +
         "/tests/model/kernels/testdata/ggml_blocks.golden";
}

inline absl::StatusOr<std::vector<GgmlGoldenRecord>> ReadGgmlGoldens(
    const std::string& path = GgmlGoldenPath()) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  size_t at = 0;
  bool short_read = false;
  auto take = [&](void* out, size_t n) {
    if (bytes.size() - at < n) {
      short_read = true;
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, bytes.data() + at, n);
    at += n;
  };
  auto u32 = [&] {
    uint32_t v;
    take(&v, 4);
    return v;
  };
  char magic[8];
  take(magic, 8);
  if (std::memcmp(magic, "GGMLGOLD", 8) != 0 || u32() != 1) {
    return absl::InvalidArgumentError(path + ": not a version-1 golden file");
  }
  const uint32_t count = u32();
  std::vector<GgmlGoldenRecord> records;
  for (uint32_t r = 0; r < count && !short_read; ++r) {
    GgmlGoldenRecord g;
    g.kind = static_cast<GgmlGoldenRecord::Kind>(u32());
    g.type = u32();
    g.block_values = u32();
    g.block_bytes = u32();
    g.first_row = u32();
    g.rows = u32();
    g.row_values = u32();
    if (g.block_values == 0 || g.row_values % g.block_values != 0 ||
        g.rows > 4096 || g.row_values > 65536) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": record ", r, " has a bad shape"));
    }
    if (g.kind == GgmlGoldenRecord::kHashed) {
      for (uint32_t i = 0; i < g.rows; ++i) {
        uint64_t h[2];
        take(h, sizeof(h));
        g.block_hashes.push_back(h[0]);
        g.float_hashes.push_back(h[1]);
      }
    } else {
      g.blocks.resize(g.rows * g.RowBytes());
      g.floats.resize(size_t{g.rows} * g.row_values);
      take(g.blocks.data(), g.blocks.size());
      take(g.floats.data(), g.floats.size() * 4);
    }
    records.push_back(std::move(g));
  }
  if (short_read || at != bytes.size()) {
    return absl::InvalidArgumentError(path + ": truncated or trailing bytes");
  }
  return records;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_MODEL_KERNELS_GGML_GOLDEN_FILE_H_
