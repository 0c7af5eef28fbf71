// textgen's GGUF reader against an independent one: for every GGUF file the
// fixture gguf_files writes (models of every tensor type, a 64-byte
// alignment, GPT-2's 50,257-token vocabulary), the header, each metadata key
// (its type and value, arrays element by element) and the tensor table
// (name, dims, type, offset, data offset) equal what @huggingface/gguf
// (tests/npm, run by tests/npm/gguf_parse.js) parses from the same bytes.
// Skips, saying why, only where node or the npm packages are absent, and
// never under CI=true.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "model/formats/gguf.h"
#include "tests/testing/shared_data.h"

namespace textgen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The value textgen's reader decodes for `kv`, in gguf_parse.js's terms.
json OurValue(const GgufFile& file, const GgufKeyValue& kv) {
  auto scalar = [&](GgufValueType type, size_t offset) -> json {
    switch (type) {
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64:
        return file.FloatAt(type, offset);
      case GgufValueType::kBool:
        return file.IntAt(type, offset) != 0;
      case GgufValueType::kString:
        return std::string(file.StringAt(offset));
      case GgufValueType::kInt8:
      case GgufValueType::kInt16:
      case GgufValueType::kInt32:
      case GgufValueType::kInt64:
        return file.IntAt(type, offset);
      default:
        return file.UintAt(type, offset);
    }
  };
  if (kv.type != GgufValueType::kArray) return scalar(kv.type, kv.value_offset);
  json array = json::array();
  switch (kv.element_type) {
    case GgufValueType::kString: {
      const auto strings = file.GetStringArray(kv.key);
      for (absl::string_view s : *strings) array.push_back(std::string(s));
      break;
    }
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: {
      const auto floats = file.GetFloatArray(kv.key);
      for (double v : *floats) array.push_back(v);
      break;
    }
    case GgufValueType::kBool: {
      const auto bools = file.GetBoolArray(kv.key);
      for (bool v : *bools) array.push_back(v);
      break;
    }
    case GgufValueType::kArray:
      ADD_FAILURE() << kv.key << ": nested arrays are not compared";
      break;
    default: {
      const auto ints = file.GetIntArray(kv.key);
      for (int64_t v : *ints) array.push_back(v);
    }
  }
  return array;
}

bool Equal(const json& ours, const json& theirs) {
  // Numbers compare by value whatever their JSON kind (42 vs 42.0).
  if (ours.is_number() && theirs.is_number()) {
    return ours.get<double>() == theirs.get<double>();
  }
  if (ours.is_array() && theirs.is_array()) {
    if (ours.size() != theirs.size()) return false;
    for (size_t i = 0; i < ours.size(); ++i) {
      if (!Equal(ours[i], theirs[i])) return false;
    }
    return true;
  }
  return ours == theirs;
}

TEST(GgufNpmTest, ReaderAgreesWithHuggingfaceGguf) {
  const std::string script = testing::NpmDir() + "/gguf_parse.js";
  const bool have_npm =
      testing::Exists(testing::NpmDir() + "/node_modules/@huggingface/gguf") &&
      std::system("node --version > /dev/null 2>&1") == 0;
  if (!have_npm) {
    if (std::getenv("CI") != nullptr) FAIL() << "node or tests/npm missing";
    GTEST_SKIP() << "needs node and tests/npm's @huggingface/gguf "
                    "(scripts/test.sh runs npm ci)";
  }
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(TEXTGEN_GGUF_DIR, ec)) {
    if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 13u) << "run ctest: fixture gguf_files writes them";

  const std::string out = fs::path(::testing::TempDir()) / "gguf_npm.json";
  std::string command = absl::StrCat("node ", script, " ", out);
  for (const std::string& f : files) absl::StrAppend(&command, " ", f);
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto text = ReadFileToString(out);
  ASSERT_TRUE(text.ok()) << text.status();
  const json parsed = json::parse(*text);
  std::printf("[gguf] @huggingface/gguf %s\n",
              parsed["versions"]["@huggingface/gguf"].dump().c_str());

  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const json& theirs = parsed["files"][path];
    ASSERT_TRUE(theirs.is_object());
    EXPECT_EQ(theirs["little_endian"], true);
    EXPECT_EQ(theirs["version"], file->version());
    EXPECT_EQ(theirs["tensor_count"], file->tensors().size());
    EXPECT_EQ(theirs["kv_count"], file->metadata().size());
    EXPECT_EQ(theirs["tensor_data_offset"], file->data_offset());

    const json& metadata = theirs["metadata"];
    ASSERT_EQ(metadata.size(), file->metadata().size());
    size_t values = 0;
    for (size_t i = 0; i < metadata.size(); ++i) {
      const GgufKeyValue& kv = file->metadata()[i];
      SCOPED_TRACE(kv.key);
      EXPECT_EQ(metadata[i]["key"], kv.key);
      EXPECT_EQ(metadata[i]["type"], static_cast<uint32_t>(kv.type));
      if (kv.type == GgufValueType::kArray) {
        EXPECT_EQ(metadata[i]["sub_type"],
                  static_cast<uint32_t>(kv.element_type));
      }
      const json ours = OurValue(*file, kv);
      EXPECT_TRUE(Equal(ours, metadata[i]["value"]))
          << ours.dump().substr(0, 200) << " vs "
          << metadata[i]["value"].dump().substr(0, 200);
      values += ours.is_array() ? ours.size() : 1;
    }

    const json& tensors = theirs["tensors"];
    ASSERT_EQ(tensors.size(), file->tensors().size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const GgufTensorInfo& t = file->tensors()[i];
      EXPECT_EQ(tensors[i]["name"], t.name);
      EXPECT_EQ(tensors[i]["shape"], json(t.dims));
      EXPECT_EQ(tensors[i]["dtype"], static_cast<uint32_t>(t.type));
      EXPECT_EQ(tensors[i]["offset"], t.offset);
    }
    std::printf("[gguf] %s: %zu keys (%zu values), %zu tensors agree\n",
                fs::path(path).filename().c_str(), file->metadata().size(),
                values, file->tensors().size());
  }
}

}  // namespace
}  // namespace textgen
