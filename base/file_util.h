// Whole-file reads with errors that name the file.
#ifndef TEXTGEN_BASE_FILE_UTIL_H_
#define TEXTGEN_BASE_FILE_UTIL_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace textgen {

// Returns the bytes of the file at `path`, or NOT_FOUND / INVALID_ARGUMENT
// naming the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// A file mapped read-only into memory: its pages are read on first touch and
// belong to the page cache, so reading a large file this way makes no private
// copy of it. Unmapped on destruction.
class MappedFile {
 public:
  // NOT_FOUND / INVALID_ARGUMENT naming the path, as ReadFileToString.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;  // Empty.
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  const char* data() const { return data_; }
  size_t size() const { return size_; }

  // Lets the system drop the pages wholly inside [begin, end) from this
  // process's resident memory (they stay in the page cache, and reading them
  // again faults them back in unchanged): for a file consumed once, front to
  // back, so that mapping it does not double peak memory.
  void DropPages(size_t begin, size_t end) const;

 private:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}

  const char* data_ = nullptr;  // Null for an empty file.
  size_t size_ = 0;
};

// Joins a directory and a file name with exactly one '/'.
std::string JoinPath(const std::string& dir, const std::string& name);

// Whether `path` names a regular file (following symlinks); false on any
// error. For finding files beside a model; reading still checks (above).
bool IsRegularFile(const std::string& path);

// OK if `path` names a regular file, or a directory when `directory_ok` (a
// checkpoint directory); NOT_FOUND if nothing is there; INVALID_ARGUMENT
// naming the path for anything else (a FIFO, device or socket). Only stat(),
// so it cannot block: for a caller about to open the path some other way
// (std::ifstream, which would wait forever on a FIFO without a writer).
absl::Status CheckFileOrDirectory(const std::string& path, bool directory_ok);

}  // namespace textgen

#endif  // TEXTGEN_BASE_FILE_UTIL_H_
