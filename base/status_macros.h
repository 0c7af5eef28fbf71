// Early-return helpers for absl::Status / absl::StatusOr, in the style of
// leveldb's `if (!s.ok()) return s;` but without the noise.
#ifndef TEXTGEN_BASE_STATUS_MACROS_H_
#define TEXTGEN_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status of `expr` from the enclosing function if it is not OK.
#define TEXTGEN_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status textgen_status_ = (expr);           \
    if (!textgen_status_.ok()) return textgen_status_; \
  } while (0)

#define TEXTGEN_CONCAT_INNER_(a, b) a##b
#define TEXTGEN_CONCAT_(a, b) TEXTGEN_CONCAT_INNER_(a, b)

// `TEXTGEN_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an OK StatusOr,
// or returns its status.
#define TEXTGEN_ASSIGN_OR_RETURN(lhs, expr)                                    \
  TEXTGEN_ASSIGN_OR_RETURN_IMPL_(TEXTGEN_CONCAT_(textgen_statusor_, __LINE__), \
                                 lhs, expr)
#define TEXTGEN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return statusor.status();             \
  lhs = std::move(statusor).value()

#endif  // TEXTGEN_BASE_STATUS_MACROS_H_
