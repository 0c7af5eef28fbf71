// A strict reader of GGUF files (ggml's format for llama.cpp models; spec:
// ggml's docs/gguf.md), versions 2 and 3, little-endian.
//
// Layout:
//   uint32 magic "GGUF", uint32 version, uint64 tensor_count,
//   uint64 metadata_kv_count;
//   metadata: string key, uint32 value type, value (arrays: uint32 element
//     type, uint64 count, elements; strings: uint64 length, bytes);
//   tensor infos: string name, uint32 n_dims, uint64 dims[n_dims] (ggml's
//     `ne`, innermost first), uint32 ggml type, uint64 offset;
//   zero padding to the alignment (`general.alignment`, default 32), then the
//   data section.
//
// Open() checks everything before anything is used, so a bad file is an
// INVALID_ARGUMENT naming the file and the key or tensor at fault, never a
// crash, a huge allocation or a read out of bounds:
//   - magic and version (1 and big-endian files are refused by name);
//   - every count against the bytes left, every string and array inside the
//     file, keys printable ASCII of 1..65535 bytes and unique, value types
//     known, booleans 0 or 1, arrays nested at most kMaxArrayDepth deep;
//   - `general.alignment`, if present, a uint32 power of two >= 8;
//   - tensor names of 1..64 bytes and unique, 1..4 dimensions each >= 1, the
//     element count without overflow, the type one this reader can widen
//     (F32, F16, BF16 and ggml's block types of model/kernels/ggml_blocks.h:
//     Q4_0 .. Q8_0, Q2_K .. Q6_K, IQ4_NL, IQ4_XS — any other is refused
//     naming the tensor and type) and its row length a whole number of
//     blocks;
//   - offsets: the tensors follow each other in table order, each at the
//     aligned end of the one before (what llama.cpp's reader requires and its
//     writers produce), the padding before the data section is zeros, and the
//     file ends exactly at the aligned end of the last tensor (a truncated
//     file, at any byte, is an error naming what was cut).
// Metadata values are validated in place and decoded on request (arrays of a
// vocabulary are not copied at open).
#ifndef TEXTGEN_MODEL_FORMATS_GGUF_H_
#define TEXTGEN_MODEL_FORMATS_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/file_util.h"

namespace textgen {

// gguf_metadata_value_type.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
// "UINT32", "STRING", ... (the spec's names).
const char* GgufValueTypeName(GgufValueType type);
// Bytes of one value of a scalar type; 0 for strings and arrays.
size_t GgufScalarBytes(GgufValueType type);

// ggml tensor types by number. Those named here are the float types and Q8_0;
// a tensor may hold any block type of kernels::BlockType (same numbers).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ8_0 = 8,  // Blocks of 32: float16 scale d, 32 int8 q; value = q * d.
  kBF16 = 30,
};
// "F32", "Q8_0", ... also for the ggml types this reader refuses.
std::string GgmlTypeName(uint32_t type);

struct GgufKeyValue {
  std::string key;
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType element_type = GgufValueType::kUint8;  // Arrays only.
  uint64_t count = 0;                                  // Arrays only.
  size_t value_offset = 0;  // File offset of the value (of an array: its
                            // first element).
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost.
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // Within the data section.
  uint64_t bytes = 0;
  uint64_t num_elements = 0;

  // PyTorch's order (outermost first): dims reversed, as int64.
  std::vector<int64_t> Shape() const;
};

class GgufFile {
 public:
  // Deepest nesting of arrays accepted (arrays of arrays of ...).
  static constexpr int kMaxArrayDepth = 3;

  // Maps and validates the file at `path`.
  static absl::StatusOr<GgufFile> Open(const std::string& path);
  // Validates `bytes`, a whole GGUF file; `source` names it in errors.
  static absl::StatusOr<GgufFile> FromBytes(std::string bytes,
                                            std::string source);

  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_start_; }  // In the file.
  // In file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Null if absent.
  const GgufKeyValue* FindKey(absl::string_view key) const;
  const GgufTensorInfo* FindTensor(absl::string_view name) const;

  // Typed values. Each is NOT_FOUND naming the key if absent and
  // INVALID_ARGUMENT naming the key and both types if the stored type does
  // not fit: GetUint takes any integer type holding a value >= 0, GetInt any
  // integer type, GetFloat FLOAT32 or FLOAT64.
  absl::StatusOr<uint64_t> GetUint(absl::string_view key) const;
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  absl::StatusOr<double> GetFloat(absl::string_view key) const;
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  absl::StatusOr<std::string> GetString(absl::string_view key) const;
  // Arrays, by element type: strings point into the file (valid while this
  // GgufFile lives); integer arrays take any integer element type.
  absl::StatusOr<std::vector<absl::string_view>> GetStringArray(
      absl::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(
      absl::string_view key) const;
  absl::StatusOr<std::vector<bool>> GetBoolArray(absl::string_view key) const;

  // The scalar at `offset` in the file, of a type that was validated there
  // (used by the getters and by tools that print every value). UintAt and
  // IntAt take any integer type (IntAt also BOOL) and give 0 for others.
  uint64_t UintAt(GgufValueType type, size_t offset) const;
  int64_t IntAt(GgufValueType type, size_t offset) const;
  double FloatAt(GgufValueType type, size_t offset) const;
  // A string at `offset`; *next (if given) gets the offset after it.
  absl::string_view StringAt(size_t offset, size_t* next = nullptr) const;

  // The tensor's values widened to float, in row-major order of Shape(); its
  // mapped pages are then released (MappedFile::DropPages).
  std::vector<float> ReadFloats(const GgufTensorInfo& tensor) const;
  // The tensor's bytes as stored.
  absl::string_view RawData(const GgufTensorInfo& tensor) const;
  // Releases the tensor's mapped pages from resident memory, once its bytes
  // are used (MappedFile::DropPages); reading them again faults them back in.
  void DropPages(const GgufTensorInfo& tensor) const;

 private:
  GgufFile(std::string bytes, std::string source)
      : bytes_(std::move(bytes)), source_(std::move(source)) {}
  GgufFile(MappedFile mapped, std::string source)
      : mapped_(std::move(mapped)), source_(std::move(source)) {}
  static absl::StatusOr<GgufFile> Parse(GgufFile file);

  const char* base() const {
    return mapped_.data() != nullptr ? mapped_.data() : bytes_.data();
  }
  size_t size() const {
    return mapped_.data() != nullptr ? mapped_.size() : bytes_.size();
  }
  absl::StatusOr<const GgufKeyValue*> Get(absl::string_view key) const;
  absl::StatusOr<const GgufKeyValue*> GetArray(absl::string_view key) const;
  absl::Status WrongType(const GgufKeyValue& kv, const char* expected) const;

  std::string bytes_;  // The whole file, from FromBytes; or
  MappedFile mapped_;  // the whole file, from Open.
  std::string source_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_GGUF_H_
