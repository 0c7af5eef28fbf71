#include "model/constraint/number_ranges.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace textgen {
namespace {

// Integer digits at most (kMaxBoundMagnitude has 15; open ranges may use 16).
constexpr int kMaxDigits = 16;

std::string Repeat(const std::string& item, int n) {
  if (n == 0) return "";
  if (n == 1) return item;
  return absl::StrCat(item, "{", n, "}");
}

// The numbers from x to y, strings of the same length with x <= y.
std::string SameLength(const std::string& x, const std::string& y) {
  if (x == y) return absl::StrCat("\"", x, "\"");
  size_t i = 0;
  while (x[i] == y[i]) ++i;
  const std::string prefix =
      i > 0 ? absl::StrCat("\"", x.substr(0, i), "\" ") : "";
  const int rest = static_cast<int>(x.size() - i - 1);
  const std::string xs = x.substr(i + 1), ys = y.substr(i + 1);
  const bool x_zeros = xs.find_first_not_of('0') == std::string::npos;
  const bool y_nines = ys.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> parts;
  char low = x[i], high = y[i];
  if (!x_zeros) {
    parts.push_back(absl::StrCat(prefix, "\"", std::string(1, x[i]), "\" ",
                                 SameLength(xs, std::string(rest, '9'))));
    ++low;
  }
  if (!y_nines) --high;
  if (low <= high) {
    std::string digit = low == high
                            ? absl::StrCat("\"", std::string(1, low), "\"")
                            : absl::StrCat("[", std::string(1, low), "-",
                                           std::string(1, high), "]");
    const std::string tail = Repeat("[0-9]", rest);
    parts.push_back(absl::StrCat(prefix, digit, tail.empty() ? "" : " ", tail));
  }
  if (!y_nines) {
    parts.push_back(absl::StrCat(prefix, "\"", std::string(1, y[i]), "\" ",
                                 SameLength(std::string(rest, '0'), ys)));
  }
  if (parts.size() == 1) return parts[0];
  return absl::StrCat("( ", absl::StrJoin(parts, " | "), " )");
}

int64_t Pow10(int n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

int Digits(int64_t v) { return static_cast<int>(std::to_string(v).size()); }

// Non-negative integers in [a, b] (b unset: open).
std::vector<std::string> NonNegative(int64_t a, std::optional<int64_t> b) {
  std::vector<std::string> alts;
  const int last = b ? Digits(*b) : Digits(a);
  for (int len = Digits(a); len <= last; ++len) {
    const int64_t lo = std::max(a, len == 1 ? int64_t{0} : Pow10(len - 1));
    const int64_t hi = b ? std::min(*b, Pow10(len) - 1) : Pow10(len) - 1;
    if (lo <= hi)
      alts.push_back(SameLength(std::to_string(lo), std::to_string(hi)));
  }
  if (!b && last < kMaxDigits) {
    // Longer numbers than a's: any.
    alts.push_back(
        absl::StrCat("[1-9] [0-9]{", last, ",", kMaxDigits - 1, "}"));
  }
  return alts;
}

std::string Alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
}

absl::Status CheckBound(std::optional<int64_t> v, const char* which) {
  if (v && (*v > kMaxBoundMagnitude || *v < -kMaxBoundMagnitude)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", which, " bound ", *v, " is beyond ", kMaxBoundMagnitude));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> IntegerRangeGbnf(std::optional<int64_t> lo,
                                             std::optional<int64_t> hi) {
  if (absl::Status s = CheckBound(lo, "lower"); !s.ok()) return s;
  if (absl::Status s = CheckBound(hi, "upper"); !s.ok()) return s;
  if (lo && hi && *lo > *hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("no integer lies in [", *lo, ", ", *hi, "]"));
  }
  std::vector<std::string> alts;
  // Negative part: -m for m in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const int64_t m_lo = hi && *hi < 0 ? -*hi : 1;
    std::optional<int64_t> m_hi;
    if (lo) m_hi = -*lo;
    for (const std::string& a : NonNegative(m_lo, m_hi)) {
      alts.push_back(absl::StrCat("\"-\" ", a));
    }
  }
  // Non-negative part.
  if (!hi || *hi >= 0) {
    for (const std::string& a : NonNegative(lo && *lo > 0 ? *lo : 0, hi)) {
      alts.push_back(a);
    }
  }
  return Alternatives(alts);
}

absl::StatusOr<std::string> NumberRangeGbnf(const NumberBounds& b) {
  for (const std::optional<double>& v : {b.lo, b.hi}) {
    if (v && !(std::fabs(*v) <= static_cast<double>(kMaxBoundMagnitude))) {
      return absl::InvalidArgumentError(
          absl::StrCat("the bound ", *v, " is beyond ", kMaxBoundMagnitude));
    }
  }
  // The integers: [ceil(lo), floor(hi)], exclusive bounds stepping in.
  std::optional<int64_t> int_lo, int_hi;
  if (b.lo) {
    double c = std::ceil(*b.lo);
    if (b.lo_exclusive && c == *b.lo) c += 1;
    int_lo = static_cast<int64_t>(c);
  }
  if (b.hi) {
    double f = std::floor(*b.hi);
    if (b.hi_exclusive && f == *b.hi) f -= 1;
    int_hi = static_cast<int64_t>(f);
  }
  std::vector<std::string> alts;
  if (!int_lo || !int_hi || *int_lo <= *int_hi) {
    absl::StatusOr<std::string> ints = IntegerRangeGbnf(int_lo, int_hi);
    if (!ints.ok()) return ints.status();
    alts.push_back(*ints);
  }
  // A fraction that is never zero, so I.f lies strictly inside (I, I+1).
  const std::string fraction = "\".\" [0-9]{0,15} [1-9]";
  // Positive decimals I.f: lo <= I and I + 1 <= hi.
  {
    std::optional<int64_t> i_lo = int64_t{0}, i_hi;
    if (b.lo)
      i_lo = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(*b.lo)));
    if (b.hi) i_hi = static_cast<int64_t>(std::floor(*b.hi)) - 1;
    if (!i_hi || *i_hi >= *i_lo) {
      absl::StatusOr<std::string> whole = IntegerRangeGbnf(i_lo, i_hi);
      if (!whole.ok()) return whole.status();
      alts.push_back(absl::StrCat(*whole, " ", fraction));
    }
  }
  // Negative decimals -(I.f), in (-(I+1), -I): -I <= hi and lo <= -(I+1).
  {
    std::optional<int64_t> i_lo = int64_t{0}, i_hi;
    if (b.hi)
      i_lo = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(-*b.hi)));
    if (b.lo) i_hi = static_cast<int64_t>(std::floor(-*b.lo)) - 1;
    if (!i_hi || *i_hi >= *i_lo) {
      absl::StatusOr<std::string> whole = IntegerRangeGbnf(i_lo, i_hi);
      if (!whole.ok()) return whole.status();
      alts.push_back(absl::StrCat("\"-\" ", *whole, " ", fraction));
    }
  }
  if (alts.empty()) {
    return absl::InvalidArgumentError("no number lies between the bounds");
  }
  return Alternatives(alts);
}

}  // namespace textgen
