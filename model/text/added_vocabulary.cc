#include "model/text/added_vocabulary.h"

#include <utf8proc.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace textgen {
namespace {

// Rust's char::is_whitespace: Unicode White_Space.
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Rust's char::is_alphanumeric, near enough for single_word: ASCII letters
// and digits, and every non-ASCII letter or number (utf8proc's category).
bool IsWordChar(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) != 0;
  const utf8proc_category_t cat =
      utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO
             ? true
             : (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

}  // namespace

absl::StatusOr<AddedVocabulary> AddedVocabulary::Create(
    std::vector<AddedToken> tokens, const std::vector<std::string>& vocab,
    const std::string& source) {
  auto error = [&source](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  size_t size = vocab.size();
  for (const AddedToken& a : tokens) {
    if (a.id < 0) return error("added token \"", a.content, "\" has no id");
    if (a.content.empty()) return error("added token ", a.id, " is empty");
    if (!IsValidUtf8(a.content)) {
      return error("added token ", a.id, " is not valid UTF-8");
    }
    size = std::max(size, static_cast<size_t>(a.id) + 1);
  }
  AddedVocabulary v;
  v.is_added_.assign(size, false);
  for (const AddedToken& a : tokens) {
    if (v.is_added_[a.id]) {
      return error("added token id ", a.id, " is listed twice");
    }
    if (a.id < static_cast<int>(vocab.size()) && !vocab[a.id].empty() &&
        vocab[a.id] != a.content) {
      return error("added token ", a.id, " \"", a.content, "\" is \"",
                   vocab[a.id], "\" in the vocabulary");
    }
    v.is_added_[a.id] = true;
    (a.normalized ? v.normalized_ : v.raw_).Add(a);
  }
  v.tokens_ = std::move(tokens);
  return v;
}

int AddedVocabulary::IdOf(std::string_view content) const {
  for (const Matcher* m : {&raw_, &normalized_}) {
    for (const AddedToken& a : m->tokens) {
      if (a.content == content) return a.id;
    }
  }
  return -1;
}

void AddedVocabulary::Matcher::Add(const AddedToken& token) {
  tokens.push_back(token);
  auto& list = by_first_byte[static_cast<unsigned char>(token.content[0])];
  list.push_back(static_cast<int>(tokens.size()) - 1);
  std::stable_sort(list.begin(), list.end(), [this](int a, int b) {
    return tokens[a].content.size() > tokens[b].content.size();
  });
}

void AddedVocabulary::Matcher::Split(const Piece& piece,
                                     std::vector<Segment>& out) const {
  const std::string_view s = piece.text;
  if (tokens.empty()) {
    out.push_back({-1, piece});
    return;
  }
  size_t text_start = 0;  // Start of the text not yet emitted.
  size_t pos = 0;
  while (pos < s.size()) {
    const AddedToken* found = nullptr;
    for (int i : by_first_byte[static_cast<unsigned char>(s[pos])]) {
      const AddedToken& t = tokens[i];
      if (s.compare(pos, t.content.size(), t.content) == 0) {
        found = &t;
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos, end = pos + found->content.size();
    pos = end;
    if (found->single_word) {
      size_t before = start;
      const bool word_before =
          start > 0 && IsWordChar(PreviousCodePoint(s, before));
      size_t after = end;
      const bool word_after =
          end < s.size() && IsWordChar(NextCodePoint(s, after));
      if (word_before || word_after) continue;
    }
    if (found->lstrip) {
      while (start > text_start) {
        size_t before = start;
        if (!IsWhiteSpace(PreviousCodePoint(s, before))) break;
        start = before;
      }
    }
    if (found->rstrip) {
      while (end < s.size()) {
        size_t after = end;
        if (!IsWhiteSpace(NextCodePoint(s, after))) break;
        end = after;
      }
      pos = end;
    }
    if (start > text_start) {
      out.push_back({-1,
                     {std::string(s.substr(text_start, start - text_start)),
                      piece.at_start && text_start == 0}});
    }
    out.push_back({found->id, {}});
    text_start = end;
  }
  if (text_start < s.size()) {
    out.push_back({-1,
                   {std::string(s.substr(text_start)),
                    piece.at_start && text_start == 0}});
  }
}

}  // namespace textgen
