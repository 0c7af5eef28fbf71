// Whole-file reads with errors that name the file.
#ifndef TEXTGEN_MODEL_FILE_UTIL_H_
#define TEXTGEN_MODEL_FILE_UTIL_H_

#include <string>

#include "absl/status/statusor.h"

namespace textgen {

// Returns the bytes of the file at `path`, or NOT_FOUND / INVALID_ARGUMENT
// naming the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Joins a directory and a file name with exactly one '/'.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FILE_UTIL_H_
