#include "model/text/gpt2_bpe_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/pair_merge.h"
#include "model/text/pcre2_regex.h"

namespace textgen {
namespace {

// ECMAScript's \s (WhiteSpace and LineTerminator), as a PCRE2 class body; see
// the header for why not PCRE2's own \s.
#define TEXTGEN_WS                                                            \
  "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
  "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

// GPT-2's pattern with \s spelled out; \S is [^\s].
constexpr char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" TEXTGEN_WS
    "\\p{L}\\p{N}]+|[" TEXTGEN_WS "]+(?![^" TEXTGEN_WS "])|[" TEXTGEN_WS "]+";
#undef TEXTGEN_WS

// A vocabulary string (bytes spelled as bytes_to_unicode characters) to bytes.
// False if a character is not one of the 256 spellings.
bool VocabStringToBytes(const std::string& s, std::string& out, char32_t& bad) {
  out.clear();
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = NextCodePoint(s, pos);
    const int b = Gpt2UnicodeToByte(c);
    if (b < 0) {
      bad = c;
      return false;
    }
    out += static_cast<char>(b);
  }
  return true;
}

// Vocabulary strings shown in errors as they appear in the file.
std::string Quote(const std::string& s) { return absl::StrCat("\"", s, "\""); }

}  // namespace

const std::array<char32_t, 256>& Gpt2ByteToUnicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? b : next++;
    return t;
  }();
  return table;
}

int Gpt2UnicodeToByte(char32_t c) {
  static const std::vector<int> table = [] {
    std::vector<int> t(324, -1);  // The largest code point used is U+0143.
    for (int b = 0; b < 256; ++b) t[Gpt2ByteToUnicode()[b]] = b;
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer() = default;
Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Load(
    const std::string& vocab_path, const std::string& merges_path) {
  TEXTGEN_ASSIGN_OR_RETURN(std::string vocab, ReadFileToString(vocab_path));
  TEXTGEN_ASSIGN_OR_RETURN(std::string merges, ReadFileToString(merges_path));
  return FromStrings(vocab, vocab_path, merges, merges_path);
}

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::FromStrings(
    const std::string& vocab_json, const std::string& vocab_source,
    const std::string& merges_text, const std::string& merges_source) {
  using nlohmann::json;
  auto vocab_error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(vocab_source, ": ", parts...));
  };
  std::unique_ptr<Gpt2BpeTokenizer> t(new Gpt2BpeTokenizer);

  // vocab.json: {"token": id, ...} with ids 0 .. n-1, each exactly once.
  const json root =
      json::parse(vocab_json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return vocab_error("not valid JSON");
  if (!root.is_object() || root.empty()) {
    return vocab_error(
        "expected a non-empty JSON object of token strings to ids");
  }
  const size_t n = root.size();
  t->bytes_.resize(n);
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int> id_of_bytes;
  id_of_bytes.reserve(n);
  std::string bytes;
  for (const auto& [token, value] : root.items()) {
    if (!value.is_number_integer()) {
      return vocab_error("token ", Quote(token), " has id ", value.dump(),
                         ", not an integer");
    }
    const int64_t id = value.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(n)) {
      return vocab_error("token ", Quote(token), " has id ", id,
                         ", outside 0..", n - 1, " (ids must be dense)");
    }
    if (seen[id]) return vocab_error("id ", id, " is used twice");
    seen[id] = true;
    char32_t bad;
    if (!VocabStringToBytes(token, bytes, bad)) {
      return vocab_error("token ", Quote(token), " contains ",
                         DescribeCodePoint(bad),
                         ", which is not one of GPT-2's 256 byte characters");
    }
    // Two spellings of the same bytes are impossible (the spelling is a
    // bijection), so this cannot collide.
    id_of_bytes.emplace(bytes, static_cast<int>(id));
    t->bytes_[id] = bytes;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == id_of_bytes.end()) {
      std::string spelled;
      AppendUtf8(Gpt2ByteToUnicode()[b], spelled);
      return vocab_error(
          absl::StrFormat("has no token for byte 0x%02X (spelled \"%s\"); "
                          "byte-level BPE needs all 256",
                          b, spelled));
    }
    t->byte_token_[b] = it->second;
  }
  if (auto it = id_of_bytes.find("<|endoftext|>"); it != id_of_bytes.end()) {
    t->end_of_text_ = it->second;
  }

  // merges.txt: "#version: 0.2", then "A B" per line in rank order.
  int line_number = 0;
  int rank = 0;
  std::unordered_map<uint64_t, int> line_of_pair;
  std::string left_bytes, right_bytes;
  for (size_t pos = 0; pos < merges_text.size();) {
    size_t end = merges_text.find('\n', pos);
    if (end == std::string::npos) end = merges_text.size();
    std::string line = merges_text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    auto merge_error = [&](auto&&... parts) {
      return absl::InvalidArgumentError(
          absl::StrCat(merges_source, ":", line_number, ": ", parts...));
    };
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_number == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) {
      if (pos >= merges_text.size()) break;  // The final newline.
      return merge_error("empty line");
    }
    if (!IsValidUtf8(line)) return merge_error("not valid UTF-8");
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != line.npos) {
      return merge_error("expected two tokens separated by one space, got ",
                         Quote(line));
    }
    const std::string left = line.substr(0, space);
    const std::string right = line.substr(space + 1);
    char32_t bad;
    if (!VocabStringToBytes(left, left_bytes, bad) ||
        !VocabStringToBytes(right, right_bytes, bad)) {
      return merge_error(DescribeCodePoint(bad),
                         " is not one of GPT-2's 256 byte characters");
    }
    auto l = id_of_bytes.find(left_bytes);
    auto r = id_of_bytes.find(right_bytes);
    auto m = id_of_bytes.find(left_bytes + right_bytes);
    if (l == id_of_bytes.end() || r == id_of_bytes.end()) {
      return merge_error("token ", Quote(l == id_of_bytes.end() ? left : right),
                         " is not in ", vocab_source);
    }
    if (m == id_of_bytes.end()) {
      return merge_error("the merged token ", Quote(left + right),
                         " is not in ", vocab_source);
    }
    const uint64_t key =
        (static_cast<uint64_t>(l->second) << 32) | uint32_t(r->second);
    if (auto [it, inserted] = line_of_pair.emplace(key, line_number);
        !inserted) {
      // Python's dict() would keep the later rank, a set the earlier: the
      // file is ambiguous, so refuse it.
      return merge_error("repeats the merge on line ", it->second);
    }
    t->merges_.emplace(key, Merge{rank++, m->second});
  }

  TEXTGEN_ASSIGN_OR_RETURN(
      t->pattern_, Pcre2Regex::Compile(kGpt2Pattern, "GPT-2 pre-tokenizer"));
  return t;
}

std::string Gpt2BpeTokenizer::Describe() const {
  return absl::StrCat("gpt2-bpe: ", bytes_.size(), " tokens, ", merges_.size(),
                      " merges");
}

void Gpt2BpeTokenizer::EncodePiece(std::string_view piece,
                                   std::vector<int>& ids) const {
  const int n = static_cast<int>(piece.size());
  if (n == 1) {
    ids.push_back(byte_token_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  std::vector<int> word(n);
  for (int i = 0; i < n; ++i) {
    word[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  }
  // GPT-2 merges every occurrence of the best pair in one sweep; one at a
  // time in MergeAdjacentPairs' order is the same (model/text/pair_merge.h).
  MergeAdjacentPairs<int>(word, [this](int left, int right) {
    const Merge* m = FindMerge(left, right);
    return m == nullptr ? std::nullopt
                        : std::optional(PairMerge<int>{m->rank, m->result});
  });
  ids.insert(ids.end(), word.begin(), word.end());
}

absl::StatusOr<std::vector<int>> Gpt2BpeTokenizer::Encode(
    std::string_view text) const {
  TEXTGEN_RETURN_IF_ERROR(CheckUtf8(text));
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 1);
  // Every character is whitespace, a letter, a number or none of those, so
  // the matches tile the text, none empty.
  size_t offset = 0;
  bool tiled = true;
  TEXTGEN_RETURN_IF_ERROR(
      pattern_->ForEachMatch(text, [&](size_t start, size_t end) {
        if (!tiled) return;
        if (start != offset || end <= start) {
          tiled = false;
          return;
        }
        EncodePiece(text.substr(start, end - start), ids);
        offset = end;
      }));
  if (!tiled || offset != text.size()) {
    return absl::InternalError(absl::StrCat(
        "GPT-2 pre-tokenizer skipped a character at byte offset ", offset));
  }
  return ids;
}

}  // namespace textgen
