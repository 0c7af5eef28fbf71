#include "base/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

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

// The error for an open file that is not a regular file, or OK. A device
// (/dev/zero), FIFO or socket has no size to check and may never end, so
// reading it as a model could exhaust memory or block forever.
absl::Status RefuseNonRegular(const std::string& path, const struct stat& st) {
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      path,
      ": not a regular file (a device, FIFO or socket cannot be read as "
      "a model or tokenizer)"));
}

// Opens `path` read-only and checks it is a regular file; fills *st. O_NONBLOCK
// so that opening a FIFO cannot block (it is refused right after); reads of a
// regular file ignore the flag.
absl::StatusOr<int> OpenRegularFile(const std::string& path, struct stat* st) {
  if (absl::Status s = RefuseDirectory(path); !s.ok()) return s;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return OpenError(path, errno);
  if (fstat(fd, st) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot stat: ", reason));
  }
  if (absl::Status s = RefuseNonRegular(path, *st); !s.ok()) {
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  struct stat st;
  absl::StatusOr<int> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) return fd.status();
  std::string contents;
  contents.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = read(*fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Shrunk while read (or an I/O error): what was read is not the file.
      const std::string reason = n < 0 ? std::strerror(errno) : "file shrank";
      close(*fd);
      return absl::DataLossError(absl::StrCat(path, ": read failed: ", reason));
    }
    done += static_cast<size_t>(n);
  }
  close(*fd);
  return contents;
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  struct stat st;
  TEXTGEN_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
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

absl::Status CheckFileOrDirectory(const std::string& path, bool directory_ok) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return OpenError(path, errno);
  if (directory_ok && S_ISDIR(st.st_mode)) return absl::OkStatus();
  if (!directory_ok) TEXTGEN_RETURN_IF_ERROR(RefuseDirectory(path));
  return RefuseNonRegular(path, st);
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

}  // namespace textgen
