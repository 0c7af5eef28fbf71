// Small tokenizer files built in memory, for the tokenizer tests and the
// tokenizer fuzz targets (fuzz/): GPT-2's vocab.json + merges.txt over the 256
// byte tokens, and llama2.c's tokenizer.bin. No GoogleTest here, so the fuzz
// targets can include it.
#ifndef TEXTGEN_TESTS_TESTING_TOKENIZER_FILES_H_
#define TEXTGEN_TESTS_TESTING_TOKENIZER_FILES_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/utf8.h"
#include "model/text/gpt2_bpe_tokenizer.h"

namespace textgen::testing {

// A token's bytes spelled the way GPT-2's vocab.json and merges.txt spell
// them (each byte as a printable code point).
inline std::string SpellGpt2Bytes(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) AppendUtf8(Gpt2ByteToUnicode()[b], out);
  return out;
}

struct Gpt2BpeFiles {
  std::string vocab_json;
  std::string merges;
};

// Ids 0..255 are the bytes in byte order; each merge that makes a new token
// adds the next id; then <|endoftext|> if asked.
inline Gpt2BpeFiles MakeGpt2BpeFiles(
    const std::vector<std::pair<std::string, std::string>>& merges,
    bool with_end_of_text = true) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[SpellGpt2Bytes(std::string(1, static_cast<char>(b)))] = b;
  }
  std::string text = "#version: 0.2\n";
  int next = 256;
  for (const auto& [a, b] : merges) {
    const std::string merged = SpellGpt2Bytes(a + b);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    text += SpellGpt2Bytes(a) + " " + SpellGpt2Bytes(b) + "\n";
  }
  if (with_end_of_text) vocab["<|endoftext|>"] = next++;
  return {vocab.dump(), text};
}

// A piece of llama2.c's tokenizer.bin and its merge score.
struct Piece {
  std::string text;
  float score;
};

// tokenizer.bin: max_token_length, then per piece its score, length, bytes.
inline std::string MakeTokenizerBin(const std::vector<Piece>& pieces,
                                    int32_t max_len = 16) {
  std::string out(4, '\0');
  std::memcpy(out.data(), &max_len, 4);
  for (const Piece& p : pieces) {
    char record[8];
    const int32_t len = static_cast<int32_t>(p.text.size());
    std::memcpy(record, &p.score, 4);
    std::memcpy(record + 4, &len, 4);
    out.append(record, 8);
    out += p.text;
  }
  return out;
}

// llama2.c's layout: <unk>, BOS, EOS, the 256 byte pieces <0x00>..<0xFF>,
// then `merged` (ids 259 on; a higher score merges first).
inline std::vector<Piece> Llama2cPieces(const std::vector<Piece>& merged) {
  std::vector<Piece> pieces = {{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    pieces.push_back({name, 0});
  }
  pieces.insert(pieces.end(), merged.begin(), merged.end());
  return pieces;
}

// The small GPT-2 BPE of the tokenizer tests: merges that build words, emoji
// and CJK prefixes.
inline const std::vector<std::pair<std::string, std::string>> kSmallGpt2Merges =
    {
        {"h", "e"},        // 256 "he"
        {" ", "t"},        // 257 " t"
        {" t", "he"},      // 258 " the"
        {"l", "l"},        // 259 "ll"
        {"\xF0", "\x9F"},  // 260: the first half of most emoji
        {"\xE4", "\xB8"},  // 261: the first two bytes of 中 (E4 B8 AD)
        {"a", "a"},        // 262 "aa"
        {"1", "2"},        // 263 "12"
};

// The small SentencePiece vocabulary's merged pieces (after Llama2cPieces'
// 259 fixed ones; a higher score merges first).
inline const std::vector<Piece> kSmallSentencePieceMerges = {
    {" t", -1}, {"he", -2}, {" the", -3}, {"ll", -4}, {" ", -10}, {"t", -11},
    {"h", -12}, {"e", -13}, {"l", -14},   {"o", -15}, {"é", -16}, {"ab", -5},
    {"bc", -5}, {"a", -17}, {"b", -18},   {"c", -19}};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_TOKENIZER_FILES_H_
