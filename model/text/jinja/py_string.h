// Python's str methods on UTF-8 text, as the filters and string methods need
// them: indexing and slicing by code point, strip/split with Python's
// whitespace rules, case mapping, title-casing, splitlines.
//
// Case mapping covers ASCII and Latin-1/Greek/Cyrillic letters' simple
// one-to-one mappings; other characters are left as they are (README.md).
#ifndef TEXTGEN_MODEL_TEXT_JINJA_PY_STRING_H_
#define TEXTGEN_MODEL_TEXT_JINJA_PY_STRING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace textgen::jinja {

// The code points of valid UTF-8 `s`.
std::u32string ToCodePoints(std::string_view s);
std::string FromCodePoints(std::u32string_view s);
// len(s) in code points.
size_t CodePointCount(std::string_view s);

// Python's str.isspace() per character.
bool IsPySpace(char32_t c);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars,
                    bool left, bool right);
// str.split(sep, maxsplit): `sep` absent splits on runs of whitespace and
// drops empty strings.
std::vector<std::string> PySplit(std::string_view s,
                                 const std::optional<std::string>& sep,
                                 int64_t maxsplit);
// str.splitlines() (without keepends).
std::vector<std::string> PySplitLines(std::string_view s);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// str.capitalize(): first character upper, the rest lower.
std::string PyCapitalize(std::string_view s);
// str.title(): upper after a non-letter, lower after a letter.
std::string PyTitle(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all.
std::string PyReplace(std::string_view s, std::string_view old_text,
                      std::string_view new_text, int64_t count);
// str.count(sub).
int64_t PyCount(std::string_view s, std::string_view sub);
// str.find(sub) in code points, -1 if absent.
int64_t PyFind(std::string_view s, std::string_view sub);

}  // namespace textgen::jinja

#endif  // TEXTGEN_MODEL_TEXT_JINJA_PY_STRING_H_
