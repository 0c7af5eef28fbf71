#include "model/text/jinja/py_string.h"

#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"

namespace textgen::jinja {
namespace {

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  // Everything past ASCII that has a case mapping here, plus the scripts
  // without case (CJK and others count as letters for str.title()).
  return c >= 0xC0 && c != 0xD7 && c != 0xF7;
}

char32_t ToUpper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;  // Greek.
  if (c >= 0x430 && c <= 0x44F) return c - 32;                // Cyrillic.
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x100 && c <= 0x17F && (c & 1) && c != 0x131 && c != 0x138 &&
      c != 0x149 && !(c >= 0x139 && c <= 0x148) && c != 0x17F) {
    return c - 1;
  }
  return c;
}

char32_t ToLower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x100 && c <= 0x17F && !(c & 1) && c != 0x130 && c != 0x138 &&
      !(c >= 0x139 && c <= 0x148)) {
    return c + 1;
  }
  return c;
}

template <typename F>
std::string MapCodePoints(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) AppendUtf8(f(NextCodePoint(s, pos)), out);
  return out;
}

}  // namespace

std::u32string ToCodePoints(std::string_view s) {
  std::u32string out;
  size_t pos = 0;
  while (pos < s.size()) out += NextCodePoint(s, pos);
  return out;
}

std::string FromCodePoints(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) AppendUtf8(c, out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += IsUtf8ContinuationByte(c) ? 0 : 1;
  return n;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars,
                    bool left, bool right) {
  const std::u32string text = ToCodePoints(s);
  const std::u32string set = chars ? ToCodePoints(*chars) : U"";
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : IsPySpace(c);
  };
  size_t begin = 0;
  size_t end = text.size();
  if (left) {
    while (begin < end && strip(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(text[end - 1])) --end;
  }
  return FromCodePoints(std::u32string_view(text).substr(begin, end - begin));
}

std::vector<std::string> PySplit(std::string_view s,
                                 const std::optional<std::string>& sep,
                                 int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::u32string text = ToCodePoints(s);
  size_t i = 0;
  while (true) {
    while (i < text.size() && IsPySpace(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      // The rest, with its trailing whitespace, as Python keeps it.
      parts.push_back(FromCodePoints(std::u32string_view(text).substr(i)));
      break;
    }
    size_t j = i;
    while (j < text.size() && !IsPySpace(text[j])) ++j;
    parts.push_back(FromCodePoints(std::u32string_view(text).substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  const std::u32string text = ToCodePoints(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C ||
                          (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                          c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    lines.push_back(
        FromCodePoints(std::u32string_view(text).substr(start, i - start)));
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) {
    lines.push_back(FromCodePoints(std::u32string_view(text).substr(start)));
  }
  return lines;
}

std::string PyUpper(std::string_view s) { return MapCodePoints(s, ToUpper); }
std::string PyLower(std::string_view s) { return MapCodePoints(s, ToLower); }

std::string PyCapitalize(std::string_view s) {
  bool first = true;
  return MapCodePoints(s, [&](char32_t c) {
    const char32_t mapped = first ? ToUpper(c) : ToLower(c);
    first = false;
    return mapped;
  });
}

std::string PyTitle(std::string_view s) {
  bool previous_cased = false;
  return MapCodePoints(s, [&](char32_t c) {
    const char32_t mapped = previous_cased ? ToLower(c) : ToUpper(c);
    previous_cased = IsLetter(c);
    return mapped;
  });
}

std::string PyReplace(std::string_view s, std::string_view old_text,
                      std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every character and at the end.
    size_t pos = 0;
    int64_t done = 0;
    while (pos < s.size()) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      const size_t start = pos;
      NextCodePoint(s, pos);
      out += s.substr(start, pos - start);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old_text, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += new_text;
    start = at + old_text.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

int64_t PyCount(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodePointCount(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos;
       at = s.find(sub, at + sub.size())) {
    ++n;
  }
  return n;
}

int64_t PyFind(std::string_view s, std::string_view sub) {
  const size_t at = s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(CodePointCount(s.substr(0, at)));
}

}  // namespace textgen::jinja
