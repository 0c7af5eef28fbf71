#include "model/formats/gguf.h"

#include <Eigen/Core>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/kernels/ggml_blocks.h"

namespace textgen {
namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr uint64_t kMaxTensorNameBytes = 64;  // ggml's GGML_MAX_NAME.
constexpr uint32_t kMaxDims = 4;              // ggml's GGML_MAX_DIMS.

template <typename T>
T LoadLittleEndian(const char* p) {
  // x86-64 and aarch64 are little-endian, as the files this reader accepts.
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

bool IsKnownValueType(uint32_t type) { return type <= 12; }

// The fewest bytes an element of `type` can take (a string its length field,
// an array its type and count), to bound counts before looping over them.
size_t MinBytes(GgufValueType type) {
  if (type == GgufValueType::kString) return 8;
  if (type == GgufValueType::kArray) return 12;
  return GgufScalarBytes(type);
}

bool IsUnsignedInteger(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}
bool IsSignedInteger(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 ||
         t == GgufValueType::kInt32 || t == GgufValueType::kInt64;
}
bool IsInteger(GgufValueType t) {
  return IsUnsignedInteger(t) || IsSignedInteger(t);
}

// Bytes per block and values per block of a supported tensor type.
bool TensorTypeLayout(uint32_t type, uint64_t* block_values,
                      uint64_t* block_bytes) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      *block_values = 1, *block_bytes = 4;
      return true;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      *block_values = 1, *block_bytes = 2;
      return true;
    default:
      break;
  }
  if (const kernels::BlockLayout* layout = kernels::FindBlockLayout(type)) {
    *block_values = layout->values, *block_bytes = layout->bytes;
    return true;
  }
  return false;
}

// "F32, F16, BF16, Q4_0, ...": every type TensorTypeLayout takes.
std::string SupportedTypeNames() {
  std::string names = "F32, F16, BF16";
  for (uint32_t type = 0; type < 64; ++type) {
    if (kernels::FindBlockLayout(type) != nullptr) {
      absl::StrAppend(&names, ", ", GgmlTypeName(type));
    }
  }
  return names;
}

uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return n + (alignment - n % alignment) % alignment;
}

// Walks the file front to back; every read is checked against the end.
class Cursor {
 public:
  Cursor(const char* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  // OK if `n` more bytes exist, else a "truncated" problem naming `what`.
  absl::Status Need(uint64_t n, absl::string_view what) const {
    if (n <= remaining()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("truncated: ", what, " at byte ", pos_, " needs ", n,
                     " bytes, only ", remaining(), " remain"));
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    TEXTGEN_RETURN_IF_ERROR(Need(sizeof(T), what));
    const T value = LoadLittleEndian<T>(data_ + pos_);
    pos_ += sizeof(T);
    return value;
  }

  absl::StatusOr<absl::string_view> String(absl::string_view what) {
    TEXTGEN_ASSIGN_OR_RETURN(const uint64_t length,
                             Read<uint64_t>(absl::StrCat(what, " length")));
    TEXTGEN_RETURN_IF_ERROR(Need(length, what));
    absl::string_view s(data_ + pos_, length);
    pos_ += length;
    return s;
  }

  void Skip(size_t n) { pos_ += n; }  // After Need(n).

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Checks one value of `type` at the cursor and moves past it.
absl::Status SkipValue(Cursor& in, GgufValueType type, int depth) {
  switch (type) {
    case GgufValueType::kString:
      return in.String("string").status();
    case GgufValueType::kBool: {
      TEXTGEN_ASSIGN_OR_RETURN(const uint8_t b, in.Read<uint8_t>("bool"));
      if (b > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bool at byte ", in.pos() - 1, " is ", int{b}, ", not 0 or 1"));
      }
      return absl::OkStatus();
    }
    case GgufValueType::kArray: {
      if (depth >= GgufFile::kMaxArrayDepth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "arrays nested more than ", GgufFile::kMaxArrayDepth, " deep"));
      }
      TEXTGEN_ASSIGN_OR_RETURN(const uint32_t element,
                               in.Read<uint32_t>("array element type"));
      if (!IsKnownValueType(element)) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown array element type ", element));
      }
      TEXTGEN_ASSIGN_OR_RETURN(const uint64_t count,
                               in.Read<uint64_t>("array count"));
      const auto element_type = static_cast<GgufValueType>(element);
      return [&]() -> absl::Status {
        const size_t min = MinBytes(element_type);
        if (count > in.remaining() / min) {
          return absl::InvalidArgumentError(absl::StrCat(
              "truncated: an array of ", count, " ",
              GgufValueTypeName(element_type), " cannot fit in the ",
              in.remaining(), " bytes left"));
        }
        const size_t scalar = GgufScalarBytes(element_type);
        if (scalar != 0 && element_type != GgufValueType::kBool) {
          in.Skip(count * scalar);  // Within the file: checked above.
          return absl::OkStatus();
        }
        for (uint64_t i = 0; i < count; ++i) {
          if (absl::Status s = SkipValue(in, element_type, depth + 1);
              !s.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("element ", i, ": ", s.message()));
          }
        }
        return absl::OkStatus();
      }();
    }
    default: {
      const size_t n = GgufScalarBytes(type);
      TEXTGEN_RETURN_IF_ERROR(in.Need(n, GgufValueTypeName(type)));
      in.Skip(n);
      return absl::OkStatus();
    }
  }
}

bool IsPrintableAscii(absl::string_view s) {
  for (char c : s) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  static const char* const kNames[] = {
      "UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
      "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto i = static_cast<uint32_t>(type);
  return i < 13 ? kNames[i] : "?";
}

size_t GgufScalarBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

std::string GgmlTypeName(uint32_t type) {
  // ggml's enum ggml_type (gaps are types removed from the format).
  static const char* const kNames[] = {
      "F32",   "F16",   "Q4_0",    "Q4_1",   nullptr,   nullptr, "Q5_0",
      "Q5_1",  "Q8_0",  "Q8_1",    "Q2_K",   "Q3_K",    "Q4_K",  "Q5_K",
      "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
      "IQ3_S", "IQ2_S", "IQ4_XS",  "I8",     "I16",     "I32",   "I64",
      "F64",   "IQ1_M", "BF16",    nullptr,  nullptr,   nullptr, "TQ1_0",
      "TQ2_0", nullptr, nullptr,   nullptr,  "MXFP4"};
  if (type < sizeof(kNames) / sizeof(kNames[0]) && kNames[type] != nullptr) {
    return kNames[type];
  }
  return absl::StrCat("unknown type ", type);
}

std::vector<int64_t> GgufTensorInfo::Shape() const {
  return std::vector<int64_t>(dims.rbegin(), dims.rend());
}

absl::StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  return Parse(GgufFile(std::move(mapped), path));
}

absl::StatusOr<GgufFile> GgufFile::FromBytes(std::string bytes,
                                             std::string source) {
  return Parse(GgufFile(std::move(bytes), std::move(source)));
}

absl::StatusOr<GgufFile> GgufFile::Parse(GgufFile file) {
  const std::string& source = file.source_;
  auto fail = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  // A problem inside a key's or tensor's entry, named.
  auto in_entry = [&](const char* kind, absl::string_view name,
                      const absl::Status& s) {
    return fail(kind, " '", name, "': ", s.message());
  };
  Cursor in(file.base(), file.size());

  // Header.
  if (file.size() < 4 || std::memcmp(file.base(), kMagic, 4) != 0) {
    return fail("not a GGUF file (it does not start with \"GGUF\")");
  }
  in.Skip(4);
  auto header = [&](auto value) -> absl::Status {
    return value.ok() ? absl::OkStatus() : fail(value.status().message());
  };
  auto version = in.Read<uint32_t>("version");
  TEXTGEN_RETURN_IF_ERROR(header(version));
  file.version_ = *version;
  if (file.version_ == 1) {
    return fail("GGUF version 1 is not supported (convert it to version 3)");
  }
  if (file.version_ != 2 && file.version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(file.version_);
    if (swapped == 2 || swapped == 3) {
      return fail("big-endian GGUF files are not supported");
    }
    return fail("GGUF version ", file.version_,
                " is not supported (versions 2 and 3 are)");
  }
  auto tensor_count = in.Read<uint64_t>("tensor count");
  TEXTGEN_RETURN_IF_ERROR(header(tensor_count));
  auto kv_count = in.Read<uint64_t>("metadata count");
  TEXTGEN_RETURN_IF_ERROR(header(kv_count));
  // Each key takes at least 13 bytes, each tensor info at least 29: counts
  // the file cannot hold are refused before anything is allocated for them.
  if (*kv_count > in.remaining() / 13) {
    return fail("truncated: ", *kv_count, " metadata entries cannot fit in ",
                in.remaining(), " bytes");
  }
  if (*tensor_count > in.remaining() / 29) {
    return fail("truncated: ", *tensor_count, " tensor infos cannot fit in ",
                in.remaining(), " bytes");
  }

  // Metadata.
  std::unordered_set<std::string> keys;
  file.metadata_.reserve(*kv_count);
  for (uint64_t i = 0; i < *kv_count; ++i) {
    auto key = in.String(absl::StrCat("key of metadata entry ", i));
    if (!key.ok()) return fail(key.status().message());
    if (key->empty() || key->size() > kMaxKeyBytes || !IsPrintableAscii(*key)) {
      return fail("metadata entry ", i,
                  ": key is not 1 to 65535 printable ASCII characters");
    }
    GgufKeyValue kv;
    kv.key = std::string(*key);
    auto type = in.Read<uint32_t>("value type");
    if (!type.ok()) return in_entry("key", kv.key, type.status());
    if (!IsKnownValueType(*type)) {
      return fail("key '", kv.key, "': unknown value type ", *type);
    }
    kv.type = static_cast<GgufValueType>(*type);
    if (kv.type == GgufValueType::kArray) {
      // Record the element type and count; SkipValue below re-reads and
      // checks them with the elements.
      if (in.remaining() >= 12) {
        kv.element_type = static_cast<GgufValueType>(
            LoadLittleEndian<uint32_t>(file.base() + in.pos()));
        kv.count = LoadLittleEndian<uint64_t>(file.base() + in.pos() + 4);
      }
      kv.value_offset = in.pos() + 12;
    } else {
      kv.value_offset = in.pos();
    }
    if (absl::Status s = SkipValue(in, kv.type, 0); !s.ok()) {
      return in_entry("key", kv.key, s);
    }
    if (!keys.insert(kv.key).second) {
      return fail("key '", kv.key, "' appears twice");
    }
    file.metadata_.push_back(std::move(kv));
  }

  // Alignment.
  if (const GgufKeyValue* kv = file.FindKey("general.alignment")) {
    if (kv->type != GgufValueType::kUint32) {
      return fail("key 'general.alignment' must be UINT32, not ",
                  GgufValueTypeName(kv->type));
    }
    const uint32_t a =
        LoadLittleEndian<uint32_t>(file.base() + kv->value_offset);
    if (a < 8 || (a & (a - 1)) != 0) {
      return fail("key 'general.alignment' = ", a,
                  " is not a power of two >= 8");
    }
    file.alignment_ = a;
  } else {
    file.alignment_ = kDefaultAlignment;
  }

  // Tensor infos.
  std::unordered_set<std::string> names;
  uint64_t expected_offset = 0;  // Where the next tensor must begin.
  file.tensors_.reserve(*tensor_count);
  for (uint64_t i = 0; i < *tensor_count; ++i) {
    auto name = in.String(absl::StrCat("name of tensor ", i));
    if (!name.ok()) return fail(name.status().message());
    if (name->empty() || name->size() > kMaxTensorNameBytes) {
      return fail("tensor ", i, ": name of ", name->size(),
                  " bytes (must be 1 to 64)");
    }
    GgufTensorInfo t;
    t.name = std::string(*name);
    auto entry = [&]() -> absl::Status {
      TEXTGEN_ASSIGN_OR_RETURN(const uint32_t n_dims,
                               in.Read<uint32_t>("dimension count"));
      if (n_dims < 1 || n_dims > kMaxDims) {
        return absl::InvalidArgumentError(
            absl::StrCat(n_dims, " dimensions (must be 1 to 4)"));
      }
      uint64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        TEXTGEN_ASSIGN_OR_RETURN(const uint64_t dim,
                                 in.Read<uint64_t>("dimension"));
        if (dim == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("dimension ", d, " is 0"));
        }
        // 2^60 elements is far beyond any file; it keeps every byte count
        // below inside 64 bits.
        if (elements > (uint64_t{1} << 60) / dim) {
          return absl::InvalidArgumentError("too many elements");
        }
        elements *= dim;
        t.dims.push_back(dim);
      }
      t.num_elements = elements;
      TEXTGEN_ASSIGN_OR_RETURN(const uint32_t type, in.Read<uint32_t>("type"));
      uint64_t block_values = 0, block_bytes = 0;
      if (!TensorTypeLayout(type, &block_values, &block_bytes)) {
        return absl::InvalidArgumentError(
            absl::StrCat("type ", GgmlTypeName(type), " is not supported (",
                         SupportedTypeNames(), " are)"));
      }
      t.type = static_cast<GgmlType>(type);
      if (t.dims[0] % block_values != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("rows of ", t.dims[0], " values are not whole ",
                         GgmlTypeName(type), " blocks of ", block_values));
      }
      t.bytes = elements / block_values * block_bytes;
      TEXTGEN_ASSIGN_OR_RETURN(t.offset, in.Read<uint64_t>("offset"));
      if (t.offset != expected_offset) {
        return absl::InvalidArgumentError(absl::StrCat(
            "data offset ", t.offset, ", expected ", expected_offset,
            " (each tensor starts at the ", file.alignment_,
            "-byte aligned end of the one before)"));
      }
      expected_offset = AlignUp(t.offset + t.bytes, file.alignment_);
      return absl::OkStatus();
    }();
    if (!entry.ok()) return in_entry("tensor", t.name, entry);
    if (!names.insert(t.name).second) {
      return fail("tensor '", t.name, "' appears twice");
    }
    file.tensors_.push_back(std::move(t));
  }

  // A file without tensors may end right after its metadata: llama.cpp's
  // writer leaves the padding out of vocabulary-only files (its
  // models/ggml-vocab-*.gguf) and its reader needs none.
  if (file.tensors_.empty() && in.pos() == file.size()) {
    file.data_start_ = file.size();
    return file;
  }
  // Padding, then the data section, which must end where the tensors do.
  file.data_start_ = AlignUp(in.pos(), file.alignment_);
  if (file.data_start_ > file.size()) {
    return fail("truncated: the padding before the data section ends at byte ",
                file.data_start_, " but the file has ", file.size());
  }
  for (size_t p = in.pos(); p < file.data_start_; ++p) {
    if (file.base()[p] != 0) {
      return fail("padding byte ", p, " before the data section is not zero");
    }
  }
  const uint64_t data_size = file.size() - file.data_start_;
  for (const GgufTensorInfo& t : file.tensors_) {
    if (t.offset + t.bytes > data_size) {
      return fail("tensor '", t.name, "': truncated: its data [", t.offset,
                  ", ", t.offset + t.bytes, ") runs past the ", data_size,
                  "-byte data section");
    }
  }
  if (data_size < expected_offset) {
    return fail("truncated: the padding after the last tensor ends at byte ",
                file.data_start_ + expected_offset, " but the file has ",
                file.size());
  }
  if (data_size > expected_offset) {
    return fail(data_size - expected_offset,
                " bytes of trailing data after the last tensor");
  }
  return file;
}

const GgufKeyValue* GgufFile::FindKey(absl::string_view key) const {
  for (const GgufKeyValue& kv : metadata_) {
    if (kv.key == key) return &kv;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<const GgufKeyValue*> GgufFile::Get(absl::string_view key) const {
  const GgufKeyValue* kv = FindKey(key);
  if (kv == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(source_, ": missing key '", key, "'"));
  }
  return kv;
}

absl::Status GgufFile::WrongType(const GgufKeyValue& kv,
                                 const char* expected) const {
  std::string stored = GgufValueTypeName(kv.type);
  if (kv.type == GgufValueType::kArray) {
    absl::StrAppend(&stored, " of ", GgufValueTypeName(kv.element_type));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      source_, ": key '", kv.key, "' must be ", expected, ", not ", stored));
}

uint64_t GgufFile::UintAt(GgufValueType type, size_t offset) const {
  const char* p = base() + offset;
  switch (type) {
    case GgufValueType::kUint8:
      return LoadLittleEndian<uint8_t>(p);
    case GgufValueType::kUint16:
      return LoadLittleEndian<uint16_t>(p);
    case GgufValueType::kUint32:
      return LoadLittleEndian<uint32_t>(p);
    case GgufValueType::kUint64:
      return LoadLittleEndian<uint64_t>(p);
    default:
      return IsSignedInteger(type) ? static_cast<uint64_t>(IntAt(type, offset))
                                   : 0;
  }
}

int64_t GgufFile::IntAt(GgufValueType type, size_t offset) const {
  const char* p = base() + offset;
  switch (type) {
    case GgufValueType::kInt8:
      return LoadLittleEndian<int8_t>(p);
    case GgufValueType::kInt16:
      return LoadLittleEndian<int16_t>(p);
    case GgufValueType::kInt32:
      return LoadLittleEndian<int32_t>(p);
    case GgufValueType::kInt64:
      return LoadLittleEndian<int64_t>(p);
    case GgufValueType::kBool:
      return LoadLittleEndian<uint8_t>(p);
    default:
      return IsUnsignedInteger(type)
                 ? static_cast<int64_t>(UintAt(type, offset))
                 : 0;
  }
}

double GgufFile::FloatAt(GgufValueType type, size_t offset) const {
  if (type == GgufValueType::kFloat64) {
    return LoadLittleEndian<double>(base() + offset);
  }
  return LoadLittleEndian<float>(base() + offset);
}

absl::string_view GgufFile::StringAt(size_t offset, size_t* next) const {
  const uint64_t length = LoadLittleEndian<uint64_t>(base() + offset);
  if (next != nullptr) *next = offset + 8 + length;
  return absl::string_view(base() + offset + 8, length);
}

absl::StatusOr<uint64_t> GgufFile::GetUint(absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, Get(key));
  if (IsUnsignedInteger(kv->type)) return UintAt(kv->type, kv->value_offset);
  if (IsSignedInteger(kv->type)) {
    const int64_t v = IntAt(kv->type, kv->value_offset);
    if (v >= 0) return static_cast<uint64_t>(v);
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": key '", kv->key, "' = ", v, " must not be negative"));
  }
  return WrongType(*kv, "an integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, Get(key));
  if (IsSignedInteger(kv->type)) return IntAt(kv->type, kv->value_offset);
  if (IsUnsignedInteger(kv->type)) {
    const uint64_t v = UintAt(kv->type, kv->value_offset);
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(v);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": key '", kv->key, "' = ", v, " is out of range"));
  }
  return WrongType(*kv, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, Get(key));
  if (kv->type != GgufValueType::kFloat32 &&
      kv->type != GgufValueType::kFloat64) {
    return WrongType(*kv, "FLOAT32 or FLOAT64");
  }
  return FloatAt(kv->type, kv->value_offset);
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, Get(key));
  if (kv->type != GgufValueType::kBool) return WrongType(*kv, "BOOL");
  return base()[kv->value_offset] != 0;
}

absl::StatusOr<std::string> GgufFile::GetString(absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, Get(key));
  if (kv->type != GgufValueType::kString) return WrongType(*kv, "STRING");
  return std::string(StringAt(kv->value_offset));
}

absl::StatusOr<const GgufKeyValue*> GgufFile::GetArray(
    absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, Get(key));
  if (kv->type != GgufValueType::kArray) return WrongType(*kv, "an ARRAY");
  return kv;
}

absl::StatusOr<std::vector<absl::string_view>> GgufFile::GetStringArray(
    absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, GetArray(key));
  if (kv->element_type != GgufValueType::kString) {
    return WrongType(*kv, "an ARRAY of STRING");
  }
  std::vector<absl::string_view> out;
  out.reserve(kv->count);
  size_t offset = kv->value_offset;
  for (uint64_t i = 0; i < kv->count; ++i) {
    out.push_back(StringAt(offset, &offset));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(
    absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, GetArray(key));
  if (!IsInteger(kv->element_type)) {
    return WrongType(*kv, "an ARRAY of integers");
  }
  std::vector<int64_t> out(kv->count);
  const size_t step = GgufScalarBytes(kv->element_type);
  for (uint64_t i = 0; i < kv->count; ++i) {
    out[i] = IntAt(kv->element_type, kv->value_offset + i * step);
  }
  return out;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(
    absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, GetArray(key));
  if (kv->element_type != GgufValueType::kFloat32 &&
      kv->element_type != GgufValueType::kFloat64) {
    return WrongType(*kv, "an ARRAY of FLOAT32 or FLOAT64");
  }
  std::vector<double> out(kv->count);
  const size_t step = GgufScalarBytes(kv->element_type);
  for (uint64_t i = 0; i < kv->count; ++i) {
    out[i] = FloatAt(kv->element_type, kv->value_offset + i * step);
  }
  return out;
}

absl::StatusOr<std::vector<bool>> GgufFile::GetBoolArray(
    absl::string_view key) const {
  TEXTGEN_ASSIGN_OR_RETURN(const GgufKeyValue* kv, GetArray(key));
  if (kv->element_type != GgufValueType::kBool) {
    return WrongType(*kv, "an ARRAY of BOOL");
  }
  std::vector<bool> out(kv->count);
  for (uint64_t i = 0; i < kv->count; ++i) {
    out[i] = base()[kv->value_offset + i] != 0;
  }
  return out;
}

absl::string_view GgufFile::RawData(const GgufTensorInfo& tensor) const {
  return absl::string_view(base() + data_start_ + tensor.offset, tensor.bytes);
}

std::vector<float> GgufFile::ReadFloats(const GgufTensorInfo& tensor) const {
  const char* p = base() + data_start_ + tensor.offset;
  std::vector<float> out(tensor.num_elements);
  switch (tensor.type) {
    case GgmlType::kF32:
      std::memcpy(out.data(), p, out.size() * sizeof(float));
      break;
    case GgmlType::kF16:
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(
            LoadLittleEndian<uint16_t>(p + 2 * i)));
      }
      break;
    case GgmlType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(
            LoadLittleEndian<uint16_t>(p + 2 * i)));
      }
      break;
    default:
      // A block type (Open checked it): ggml's dequantize_row_*.
      kernels::Dequantize(static_cast<kernels::BlockType>(tensor.type),
                          reinterpret_cast<const uint8_t*>(p), out.size(),
                          out.data());
      break;
  }
  DropPages(tensor);
  return out;
}

void GgufFile::DropPages(const GgufTensorInfo& tensor) const {
  mapped_.DropPages(data_start_ + tensor.offset,
                    data_start_ + tensor.offset + tensor.bytes);
}

}  // namespace textgen
