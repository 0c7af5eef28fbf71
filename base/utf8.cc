#include "base/utf8.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

// For a lead byte: how many continuation bytes follow, and the allowed range
// of the first of them (Unicode Table 3-7, "Well-Formed UTF-8 Byte
// Sequences"). Returns false for bytes that cannot start a character.
bool LeadByte(unsigned char b, int& needed, unsigned char& lower,
              unsigned char& upper) {
  lower = 0x80;
  upper = 0xBF;
  if (b < 0x80) {
    needed = 0;
  } else if (b >= 0xC2 && b <= 0xDF) {
    needed = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    needed = 2;
    if (b == 0xE0) lower = 0xA0;  // Else overlong.
    if (b == 0xED) upper = 0x9F;  // Else a surrogate.
  } else if (b >= 0xF0 && b <= 0xF4) {
    needed = 3;
    if (b == 0xF0) lower = 0x90;  // Else overlong.
    if (b == 0xF4) upper = 0x8F;  // Else past U+10FFFF.
  } else {
    return false;  // 80..BF (a stray continuation), C0, C1, F5..FF.
  }
  return true;
}

}  // namespace

bool IsValidUtf8(std::string_view text, size_t* error_offset) {
  size_t i = 0;
  while (i < text.size()) {
    int needed;
    unsigned char lower, upper;
    const size_t start = i;
    bool ok =
        LeadByte(static_cast<unsigned char>(text[i++]), needed, lower, upper);
    for (int k = 0; ok && k < needed; ++k, ++i) {
      if (i >= text.size()) {
        ok = false;
        break;
      }
      const auto b = static_cast<unsigned char>(text[i]);
      ok = b >= lower && b <= upper;
      lower = 0x80;
      upper = 0xBF;
    }
    if (!ok) {
      if (error_offset) *error_offset = start;
      return false;
    }
  }
  return true;
}

char32_t NextCodePoint(std::string_view text, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos++]);
  if (b0 < 0x80) return b0;
  const int needed = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : 1;
  char32_t c = b0 & (0x3F >> needed);
  for (int k = 0; k < needed; ++k) {
    c = (c << 6) | (static_cast<unsigned char>(text[pos++]) & 0x3F);
  }
  return c;
}

char32_t PreviousCodePoint(std::string_view text, size_t& pos) {
  size_t start = pos - 1;
  while (start > 0 && IsUtf8ContinuationByte(text[start])) --start;
  size_t next = start;
  const char32_t c = NextCodePoint(text, next);
  pos = start;
  return c;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string DescribeCodePoint(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "U+%04X", static_cast<unsigned>(c));
  std::string out = buf;
  if (c >= 0x20 && c != 0x7F && !(c >= 0x80 && c < 0xA0)) {
    out += " '";
    AppendUtf8(c, out);
    out += "'";
  }
  return out;
}

std::string Utf8Stream::Push(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + pending_.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (needed_ == 0) {
      ++i;
      if (!LeadByte(b, needed_, lower_, upper_)) {
        out += kReplacementCharacter;
      } else if (needed_ == 0) {
        out += static_cast<char>(b);
      } else {
        pending_ += static_cast<char>(b);
      }
      continue;
    }
    if (b < lower_ || b > upper_) {
      // The held-back bytes are a maximal subpart: one U+FFFD for them, and
      // this byte starts afresh (it is not consumed here).
      out += kReplacementCharacter;
      pending_.clear();
      needed_ = 0;
      continue;
    }
    ++i;
    pending_ += static_cast<char>(b);
    lower_ = 0x80;
    upper_ = 0xBF;
    if (--needed_ == 0) {
      out += pending_;
      pending_.clear();
    }
  }
  return out;
}

std::string Utf8Stream::Flush() {
  const bool incomplete = needed_ != 0;
  pending_.clear();
  needed_ = 0;
  return incomplete ? std::string(kReplacementCharacter) : std::string();
}

std::string SanitizeUtf8(std::string_view bytes) {
  Utf8Stream stream;
  std::string out = stream.Push(bytes);
  out += stream.Flush();
  return out;
}

absl::Status CheckUtf8(std::string_view text) {
  size_t bad;
  if (IsValidUtf8(text, &bad)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("text is not valid UTF-8 (byte offset ", bad, ")"));
}

}  // namespace textgen
