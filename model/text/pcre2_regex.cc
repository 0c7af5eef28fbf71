#include "model/text/pcre2_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "base/utf8.h"
#include "model/text/code_range.h"

namespace textgen {
namespace {

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Owns a pcre2_match_data.
struct MatchData {
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* data;
};

// Unicode White_Space (PropList.txt), as a character class body.
constexpr char kWhiteSpace[] =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}"
    "\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

struct ClassAdditions {
  std::string_view name;
  absl::Span<const CodeRange> ranges;
};
#include "model/text/unicode_class_additions.inc"

// The class body "\x{A}-\x{B}..." of what the library's \p{name} has beyond
// PCRE2's, or "" if nothing (or `name` is not a general category).
std::string AdditionsOf(std::string_view name) {
  std::string body;
  for (const ClassAdditions& c : kClassAdditions) {
    if (c.name != name) continue;
    for (const CodeRange& r : c.ranges) {
      absl::StrAppendFormat(&body, "\\x{%X}", static_cast<uint32_t>(r.first));
      if (r.last != r.first) {
        absl::StrAppendFormat(&body, "-\\x{%X}", static_cast<uint32_t>(r.last));
      }
    }
  }
  return body;
}

}  // namespace

struct Pcre2Regex::Code {
  ~Code() { pcre2_code_free(code); }
  pcre2_code* code = nullptr;
};

Pcre2Regex::Pcre2Regex(std::unique_ptr<Code> code) : code_(std::move(code)) {}
Pcre2Regex::~Pcre2Regex() = default;

absl::StatusOr<std::unique_ptr<Pcre2Regex>> Pcre2Regex::Compile(
    std::string_view pattern, std::string_view what) {
  int error;
  PCRE2_SIZE offset;
  auto code = std::make_unique<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                             pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                             &offset, nullptr);
  if (code->code == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": regex does not compile at offset ",
                     offset, ": ", Pcre2Message(error)));
  }
  // JIT makes matching several times faster; without it (a PCRE2 built
  // without JIT support) the interpreter gives the same matches.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<Pcre2Regex>(new Pcre2Regex(std::move(code)));
}

absl::Status Pcre2Regex::ForEachMatch(
    std::string_view text,
    absl::FunctionRef<void(size_t start, size_t end)> on_match) const {
  MatchData match(code_->code);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (size_t offset = 0; offset <= text.size();) {
    // Without NO_UTF_CHECK PCRE2 would check the rest of the subject again on
    // every call, quadratic in its length; callers validated it.
    const int rc = pcre2_match(code_->code, subject, text.size(), offset,
                               PCRE2_NO_UTF_CHECK, match.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::InternalError(absl::StrCat("regex match failed at offset ",
                                              offset, ": ", Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
    on_match(ovector[0], ovector[1]);
    if (ovector[1] > ovector[0]) {
      offset = ovector[1];
    } else {
      // Past the empty match, by one whole character.
      offset = ovector[1] + 1;
      while (offset < text.size() && IsUtf8ContinuationByte(text[offset])) {
        ++offset;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Pcre2Regex::MatchAt(std::string_view text,
                                           size_t offset) const {
  MatchData match(code_->code);
  const int rc = pcre2_match(
      code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
      offset, PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, match.data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return std::string_view::npos;
  if (rc < 0) {
    return absl::InternalError(absl::StrCat("regex match failed at offset ",
                                            offset, ": ", Pcre2Message(rc)));
  }
  return pcre2_get_ovector_pointer(match.data)[1];
}

absl::StatusOr<std::string> OnigurumaToPcre2(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpace)
                        : absl::StrCat("[", kWhiteSpace, "]");
      } else if ((next == 'p' || next == 'P') && i + 1 < pattern.size() &&
                 pattern[i + 1] == '{') {
        // \p{X}: PCRE2's class plus what newer Unicode puts in it.
        const size_t close = pattern.find('}', i + 1);
        if (close == std::string_view::npos) {
          out += c;
          out += next;
          continue;
        }
        std::string name(pattern.substr(i + 2, close - i - 2));
        bool negated = next == 'P';
        if (!name.empty() && name[0] == '^') {  // Oniguruma's \p{^X} = \P{X}.
          negated = !negated;
          name.erase(0, 1);
        }
        const std::string property =
            absl::StrCat("\\", negated ? "P" : "p", "{", name, "}");
        const std::string more = AdditionsOf(name);
        i = close;
        if (more.empty() || (in_class && negated)) {
          // A negated property inside [...] cannot take additions: it keeps
          // PCRE2's tables (no tokenizer.json seen so far has one).
          out += property;
        } else if (in_class) {
          absl::StrAppend(&out, "\\p{", name, "}", more);
        } else {
          absl::StrAppend(&out, negated ? "[^" : "[", "\\p{", name, "}", more,
                          "]");
        }
      } else if (next == 'S') {
        if (in_class) {
          return absl::InvalidArgumentError(
              absl::StrCat("regex \"", std::string(pattern),
                           "\": \\S inside [...] is not supported"));
        }
        out += absl::StrCat("[^", kWhiteSpace, "]");
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' first in the class (after an optional '^') is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Pcre2Regex>> CompileOniguruma(
    std::string_view pattern, std::string_view what) {
  TEXTGEN_ASSIGN_OR_RETURN(std::string translated, OnigurumaToPcre2(pattern));
  return Pcre2Regex::Compile(translated, what);
}

}  // namespace textgen
