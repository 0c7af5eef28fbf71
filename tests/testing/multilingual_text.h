// Real text in many languages for tokenizer tests: the translations in the
// gettext catalogs Debian installs (/usr/share/locale/<lang>/LC_MESSAGES/*.mo:
// coreutils, apt, glib, iso-codes...), read where present (`texts` is empty
// otherwise: each machine has the catalogs of its packages, so callers print
// what they read). Deterministic for a given set of catalogs: languages in the
// order given, catalogs by name, messages in file order.
#ifndef TEXTGEN_TESTS_TESTING_MULTILINGUAL_TEXT_H_
#define TEXTGEN_TESTS_TESTING_MULTILINGUAL_TEXT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/utf8.h"

namespace textgen::testing {

// Languages whose tokenization differs most between BPE implementations
// (cases, scripts, combining marks), then a spread of others.
inline std::vector<std::string> CatalogLanguages() {
  return {"tr", "uk", "cs", "ru", "de", "fr", "es", "pl", "ja",    "zh_CN",
          "ko", "ar", "he", "hi", "el", "vi", "th", "fa", "pt_BR", "it",
          "nl", "sv", "fi", "hu", "ro", "bg", "sr", "ka", "hy",    "ta",
          "bn", "da", "sk", "sl", "hr", "lt", "lv", "et", "id",    "eu"};
}

struct CatalogText {
  std::vector<std::string> texts;  // Messages joined into texts of <= 2 KB.
  size_t bytes = 0;
  int languages = 0;  // With at least one catalog.
  int catalogs = 0;
};

// The translated messages of one .mo file (GNU gettext's format: magic,
// revision, count, offsets of the original and translated string tables, each
// entry a 32-bit length and offset), skipping the header entry and anything
// that is not UTF-8.
inline std::vector<std::string> MoTranslations(const std::string& bytes) {
  std::vector<std::string> out;
  auto u32 = [&](size_t at) -> uint32_t {
    uint32_t v = 0;
    if (at + 4 <= bytes.size()) std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  if (bytes.size() < 28 || u32(0) != 0x950412de) return out;  // LE only.
  const uint32_t n = u32(8), originals = u32(12), translations = u32(16);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t key_length = u32(originals + 8 * i);
    const uint32_t length = u32(translations + 8 * i);
    const uint32_t offset = u32(translations + 8 * i + 4);
    if (key_length == 0 || offset + uint64_t{length} > bytes.size()) continue;
    std::string text = bytes.substr(offset, length);
    std::replace(text.begin(), text.end(), '\0', '\n');  // Plural forms.
    if (!text.empty() && IsValidUtf8(text)) out.push_back(std::move(text));
  }
  return out;
}

// Up to `budget` bytes of each language's messages.
inline CatalogText ReadCatalogs(size_t budget,
                                const std::string& root = "/usr/share/locale") {
  namespace fs = std::filesystem;
  CatalogText result;
  for (const std::string& language : CatalogLanguages()) {
    const fs::path dir = fs::path(root) / language / "LC_MESSAGES";
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".mo") files.push_back(entry.path());
    }
    if (files.empty()) continue;
    std::sort(files.begin(), files.end());
    ++result.languages;
    size_t used = 0;
    std::string text;
    for (const fs::path& file : files) {
      if (used >= budget) break;
      auto bytes = ReadFileToString(file.string());
      if (!bytes.ok()) continue;
      ++result.catalogs;
      for (std::string& message : MoTranslations(*bytes)) {
        if (used >= budget) break;
        used += message.size() + 1;
        if (!text.empty() && text.size() + message.size() > 2000) {
          result.bytes += text.size();
          result.texts.push_back(std::move(text));
          text.clear();
        }
        if (!text.empty()) text += '\n';
        text += message;
      }
    }
    if (!text.empty()) {
      result.bytes += text.size();
      result.texts.push_back(std::move(text));
    }
  }
  return result;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_MULTILINGUAL_TEXT_H_
