// Helpers shared by the tests: building safetensors bytes by hand, locating
// golden data, fresh temporary directories and loading a decoder.
#ifndef TEXTGEN_TESTS_TESTING_TEST_UTIL_H_
#define TEXTGEN_TESTS_TESTING_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/decoder.h"
#include "model/formats/hf_checkpoint.h"

namespace textgen::testing {

// Path of a directory under tests/golden/ in the source tree.
inline std::string GoldenDir(const std::string& name) {
  return absl::StrCat(TEXTGEN_SOURCE_DIR, "/tests/golden/", name);
}

// Builds a safetensors file: header entries are written exactly as given, so
// tests can make files that lie (wrong offsets, shapes, dtypes) as well as
// valid ones.
class SafetensorsBuilder {
 public:
  // Appends a tensor whose data_offsets are its true place in the data section.
  SafetensorsBuilder& Add(const std::string& name, const std::string& dtype,
                          const std::vector<int64_t>& shape,
                          const std::string& bytes) {
    const size_t begin = data_.size();
    data_ += bytes;
    return AddEntry(name, dtype, shape, begin, data_.size());
  }
  SafetensorsBuilder& AddF32(const std::string& name,
                             const std::vector<int64_t>& shape,
                             const std::vector<float>& values) {
    std::string bytes(values.size() * 4, '\0');
    // A zero-element tensor's vector may have no storage (memcpy from null is
    // UB).
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return Add(name, "F32", shape, bytes);
  }
  // Appends a header entry only, with any offsets.
  SafetensorsBuilder& AddEntry(const std::string& name,
                               const std::string& dtype,
                               const std::vector<int64_t>& shape,
                               uint64_t begin, uint64_t end) {
    entries_.push_back(absl::StrCat("\"", name, "\":{\"dtype\":\"", dtype,
                                    "\",\"shape\":[", absl::StrJoin(shape, ","),
                                    "],\"data_offsets\":[", begin, ",", end,
                                    "]}"));
    return *this;
  }
  SafetensorsBuilder& AddRawEntry(const std::string& json_member) {
    entries_.push_back(json_member);
    return *this;
  }
  SafetensorsBuilder& AppendData(const std::string& bytes) {
    data_ += bytes;
    return *this;
  }

  std::string Header() const {
    return absl::StrCat("{", absl::StrJoin(entries_, ","), "}");
  }
  std::string Build() const { return WithHeader(Header()); }
  std::string WithHeader(const std::string& header) const {
    std::string out(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(out.data(), &n, 8);
    return out + header + data_;
  }

 private:
  std::vector<std::string> entries_;
  std::string data_;
};

// Writes `dir`/char_vocab.json: 97 characters ("\n", the 95 printable ASCII
// characters and "é"), id = index — a character vocabulary for the golden
// checkpoints whose vocabulary size is 97 (gpt2_learned), so text tests can run
// on them.
inline void WriteCharVocab97(const std::filesystem::path& dir) {
  std::string chars = "[\"\\n\"";
  for (char c = ' '; c <= '~'; ++c) {
    const std::string s(1, c);
    chars += ",\"" + (c == '"' || c == '\\' ? "\\" + s : s) + "\"";
  }
  chars += ",\"\u00e9\"]";  // 1 + 95 + 1 = 97.
  std::ofstream(dir / "char_vocab.json")
      << "{\"type\": \"char\", \"chars\": " << chars << "}";
}

// A directory holding the gpt2_learned golden checkpoint with WriteCharVocab97
// beside it (a decoder-only model that takes text), made once per process
// under `name`: ctest runs each test in its own process, several at once.
inline std::string Gpt2LearnedWithCharVocab(const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) /
      absl::StrCat(name, "_", getpid());
  std::filesystem::create_directories(path);
  for (const char* file : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(
        std::filesystem::path(GoldenDir("gpt2_learned")) / file, path / file,
        std::filesystem::copy_options::overwrite_existing);
  }
  WriteCharVocab97(path);
  return path.string();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An empty directory under the test's temporary directory (whatever a
// previous run left there is removed); returns its path. The directory is
// named after `name`, the running test and the process: ctest runs a binary's
// tests as parallel processes, and two tests sharing one directory would
// remove each other's files.
inline std::string FreshTempDir(const std::string& name) {
  std::string unique = name;
  if (const ::testing::TestInfo* test =
          ::testing::UnitTest::GetInstance()->current_test_info()) {
    absl::StrAppend(&unique, "_", test->test_suite_name(), "_", test->name());
  }
  absl::StrAppend(&unique, "_", getpid());
  for (char& c : unique) {
    if (c == '/') c = '_';  // Parameterised tests' names hold slashes.
  }
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / unique;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// The decoder of the checkpoint in `dir`; null, with a test failure naming
// the error, if it does not load.
inline std::unique_ptr<Decoder> LoadDecoder(const std::string& dir) {
  auto checkpoint = LoadCheckpoint(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return nullptr;
  return std::make_unique<Decoder>(*std::move(checkpoint));
}

// The logits of every position of `ids`, one full pass from an empty cache
// (slot 0); a test failure if the pass fails.
inline Activations AllTokenLogits(Decoder& decoder,
                                  const std::vector<int>& ids) {
  KvCache cache(decoder.config(), 1);
  ForwardResult result;
  const SequenceChunk seq{0, ids};
  const absl::Status status =
      decoder.Forward({seq}, cache, {LogitsMode::kAllTokens, false}, result);
  EXPECT_TRUE(status.ok()) << status;
  return result.logits;
}

// Runs a shell command; returns its stdout, or nullopt if it failed.
inline std::optional<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  if (pclose(pipe) != 0) return std::nullopt;
  return out;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_TEST_UTIL_H_
