#include "model/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/status_macros.h"

namespace textgen {

namespace {

// The error for a path that names a directory, or OK.
absl::Status RefuseDirectory(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, not a file"));
  }
  return absl::OkStatus();
}

// The error for a failed open() with errno `err`: NOT_FOUND when the file is
// missing, INVALID_ARGUMENT otherwise (permissions, ...), naming the path.
absl::Status OpenError(const std::string& path, int err) {
  const std::string reason = std::strerror(err);
  if (err == ENOENT)
    return absl::NotFoundError(absl::StrCat(path, ": ", reason));
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": cannot open: ", reason));
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  TEXTGEN_RETURN_IF_ERROR(RefuseDirectory(path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return OpenError(path, errno);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return contents.str();
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  TEXTGEN_RETURN_IF_ERROR(RefuseDirectory(path));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot stat: ", reason));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    close(fd);
    return MappedFile(nullptr, 0);
  }
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  close(fd);  // The mapping keeps the file open.
  if (data == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot map: ", std::strerror(err)));
  }
  return MappedFile(static_cast<const char*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::DropPages(size_t begin, size_t end) const {
  if (data_ == nullptr) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t first = (begin + page - 1) / page * page;
  const size_t last = std::min(end, size_) / page * page;
  if (first >= last) return;
  // Advisory: a failure only leaves the pages resident.
  madvise(const_cast<char*>(data_) + first, last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

}  // namespace textgen
