#include "model/constraint/char_class.h"

#include <algorithm>

#include "base/utf8.h"

namespace textgen {
namespace {

constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

int EncodedLength(char32_t c) {
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

// The UTF-8 bytes of `c` (EncodedLength(c) of them) into `out`.
void Encode(char32_t c, uint8_t out[4]) {
  switch (EncodedLength(c)) {
    case 1:
      out[0] = static_cast<uint8_t>(c);
      return;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      return;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      return;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  }
}

// [lo, hi] share an encoded length and contain no surrogate. Splits it until
// each piece's encodings vary independently per byte position, which makes
// each piece one sequence of byte ranges.
void Split(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;  // i trailing bytes.
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, out);
        Split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, out);
        Split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  Utf8Sequence seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

std::optional<char32_t> NextUtf8Char(std::string_view text, size_t& pos) {
  if (pos >= text.size()) return std::nullopt;
  const unsigned char lead = static_cast<unsigned char>(text[pos]);
  const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  // NextCodePoint needs valid UTF-8: check the character alone.
  if (pos + len > text.size() || !IsValidUtf8(text.substr(pos, len))) {
    return std::nullopt;
  }
  return NextCodePoint(text, pos);
}

char32_t SimpleEscape(char letter) {
  switch (letter) {
    case 'n':
      return U'\n';
    case 'r':
      return U'\r';
    case 't':
      return U'\t';
    case 'f':
      return U'\f';
    case 'v':
      return U'\v';
    default:
      return 0;  // \0 is handled by its callers: it names 0 itself.
  }
}

void CodePointSet::Add(char32_t lo, char32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodePoint);
  ranges_.emplace_back(lo, hi);
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodePointSet CodePointSet::Complement() const {
  CodePointSet out;
  char32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) out.ranges_.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.emplace_back(next, kMaxCodePoint);
  return out;
}

std::vector<Utf8Sequence> Utf8Sequences(const CodePointSet& set) {
  std::vector<Utf8Sequence> out;
  // Cut at the encoded-length boundaries and around the surrogates.
  static constexpr std::pair<char32_t, char32_t> kBands[] = {
      {0, 0x7F},
      {0x80, 0x7FF},
      {0x800, kSurrogateLo - 1},
      {kSurrogateHi + 1, 0xFFFF},
      {0x10000, kMaxCodePoint}};
  for (const auto& [lo, hi] : set.ranges()) {
    for (const auto& [band_lo, band_hi] : kBands) {
      const char32_t a = std::max(lo, band_lo), b = std::min(hi, band_hi);
      if (a <= b) Split(a, b, out);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Utf8Sequence& x, const Utf8Sequence& y) {
                     return x.size() < y.size();
                   });
  return out;
}

}  // namespace textgen
