// Numbers within bounds as GBNF: the decimal integers of a range, digit by
// digit (the classic construction of a regular expression for a numeric
// range), and a subset of the JSON numbers between two bounds that a model can
// always finish.
#ifndef TEXTGEN_MODEL_CONSTRAINT_NUMBER_RANGES_H_
#define TEXTGEN_MODEL_CONSTRAINT_NUMBER_RANGES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace textgen {

// Bounds beyond this magnitude are refused: the grammars write at most 16
// integer digits.
inline constexpr int64_t kMaxBoundMagnitude = 999'999'999'999'999;

// A GBNF expression (no trailing space rule) for the integers in [lo, hi]
// written as JSON writes them (no leading zeros, no "-0"); an unset bound is
// open (then at most 16 digits). INVALID_ARGUMENT if the range is empty or a
// bound is beyond kMaxBoundMagnitude.
absl::StatusOr<std::string> IntegerRangeGbnf(std::optional<int64_t> lo,
                                             std::optional<int64_t> hi);

// A GBNF expression for JSON numbers x with lo <(=) x <(=) hi (exclusive when
// said): the integers of the range, and decimals I.f whose whole interval
// (I, I+1) lies inside it — a subset of the range, never outside it. No
// exponents.
struct NumberBounds {
  std::optional<double> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
};
absl::StatusOr<std::string> NumberRangeGbnf(const NumberBounds& bounds);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_CONSTRAINT_NUMBER_RANGES_H_
