// A strict reader of the safetensors format
// (https://github.com/huggingface/safetensors).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//   ...,
//    "__metadata__": {"key": "value"}}
// and then the data section, each tensor's bytes at [begin, end) relative to
// its start.
//
// Open() checks everything before anything is read: the header length against
// the file size, every field of every entry, that each tensor's byte range
// matches dtype × shape, lies inside the data section, and that the ranges tile
// the data section with no overlap and no hole. Every error names the file and,
// where there is one, the tensor — a bad file can never cause a crash or a read
// out of bounds.
#ifndef TEXTGEN_MODEL_FORMATS_SAFETENSORS_H_
#define TEXTGEN_MODEL_FORMATS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/file_util.h"
#include "model/tensor_source.h"

namespace textgen {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "BF16", ...
const char* DTypeName(DType dtype);
// Bytes per element.
int DTypeSize(DType dtype);

struct TensorInfo {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  uint64_t begin = 0;  // Byte offsets within the data section.
  uint64_t end = 0;
};

class SafetensorsFile final : public TensorSource {
 public:
  // Maps and validates the file at `path`; tensors are read from the mapping,
  // so no copy of the file is made.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);
  // Validates `bytes`, a whole safetensors file; `source` names it in errors.
  static absl::StatusOr<SafetensorsFile> FromBytes(std::string bytes,
                                                   std::string source);

  // The path or name given at open, for error messages.
  const std::string& source() const override { return source_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }

  // Null if there is no tensor of that name.
  const TensorInfo* Find(const std::string& name) const;

  // The values of a floating-point tensor (F32, F16 or BF16; F64 is narrowed),
  // widened to float, in the file's row-major order. A mapped file's pages of
  // that tensor are then released from resident memory (MappedFile::DropPages).
  // NOT_FOUND if absent, INVALID_ARGUMENT for other dtypes.
  absl::StatusOr<std::vector<float>> ReadFloats(const std::string& name) const;
  // Like ReadFloats, and also checks that the shape is `expected_shape`.
  absl::StatusOr<std::vector<float>> ReadFloats(
      const std::string& name,
      const std::vector<int64_t>& expected_shape) const override;
  // TensorSource: the names in order, and a tensor's shape.
  std::vector<std::string> TensorNames() const override;
  const std::vector<int64_t>* FindShape(const std::string& name) const override;
  // The values of an integer tensor (I64, I32, I16, I8, U8).
  absl::StatusOr<std::vector<int64_t>> ReadInts(const std::string& name) const;

 private:
  SafetensorsFile(std::string bytes, std::string source)
      : bytes_(std::move(bytes)), source_(std::move(source)) {}
  SafetensorsFile(MappedFile mapped, std::string source)
      : mapped_(std::move(mapped)), source_(std::move(source)) {}

  // Validates the bytes the file holds (bytes_ or mapped_).
  static absl::StatusOr<SafetensorsFile> Parse(SafetensorsFile file);
  const char* base() const {
    return mapped_.data() != nullptr ? mapped_.data() : bytes_.data();
  }
  size_t size() const {
    return mapped_.data() != nullptr ? mapped_.size() : bytes_.size();
  }

  absl::Status Error(const std::string& tensor,
                     const std::string& problem) const;
  absl::StatusOr<const TensorInfo*> Get(const std::string& name) const;
  const char* Data(const TensorInfo& info) const {
    return base() + data_start_ + info.begin;
  }

  std::string bytes_;  // The whole file, from FromBytes; or
  MappedFile mapped_;  // the whole file, from Open.
  std::string source_;
  size_t data_start_ = 0;  // 8 + header length.
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_SAFETENSORS_H_
