#include "model/formats/safetensors.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace textgen {
namespace {

using nlohmann::json;

// The reference implementation refuses headers over 100 MB; so do we, before
// parsing.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

bool ParseDType(const std::string& name, DType& out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F64", DType::kF64},   {"F32", DType::kF32}, {"F16", DType::kF16},
      {"BF16", DType::kBF16}, {"I64", DType::kI64}, {"I32", DType::kI32},
      {"I16", DType::kI16},   {"I8", DType::kI8},   {"U8", DType::kU8},
      {"BOOL", DType::kBool}};
  for (const auto& [text, dtype] : kNames) {
    if (name == text) {
      out = dtype;
      return true;
    }
  }
  return false;
}

template <typename T>
T LoadLittleEndian(const char* p) {
  // x86-64 and aarch64 are little-endian, as the format is.
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return "F64";
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kI16:
      return "I16";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kBool:
      return "BOOL";
  }
  return "?";
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 1;
}

absl::Status SafetensorsFile::Error(const std::string& tensor,
                                    const std::string& problem) const {
  if (tensor.empty())
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", problem));
  return absl::InvalidArgumentError(
      absl::StrCat(source_, ": tensor '", tensor, "': ", problem));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  TEXTGEN_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  return Parse(SafetensorsFile(std::move(mapped), path));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::FromBytes(std::string bytes,
                                                           std::string source) {
  return Parse(SafetensorsFile(std::move(bytes), std::move(source)));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(SafetensorsFile file) {
  const std::string& source = file.source_;
  const uint64_t file_size = file.size();
  if (file_size < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": truncated: ", file_size,
                     " bytes, too short for the 8-byte header length"));
  }
  const uint64_t header_size = LoadLittleEndian<uint64_t>(file.base());
  if (header_size > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": header length ", header_size, " exceeds the 100 MB limit"));
  }
  if (header_size > file_size - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": truncated: header length ", header_size,
                     " but only ", file_size - 8, " bytes follow"));
  }
  file.data_start_ = 8 + header_size;
  const uint64_t data_size = file_size - 8 - header_size;

  const char* header_begin = file.base() + 8;
  const json header = json::parse(header_begin, header_begin + header_size,
                                  /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return file.Error("", "header is not valid JSON");
  if (!header.is_object()) return file.Error("", "header is not a JSON object");

  // Each entry, checked field by field.
  std::vector<std::pair<const std::string*, const TensorInfo*>> by_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return file.Error("", "__metadata__ is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return file.Error("", absl::StrCat("__metadata__ value of '", key,
                                             "' is not a string"));
        }
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object())
      return file.Error(name, "entry is not a JSON object");
    for (const auto& [key, unused] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        return file.Error(name, absl::StrCat("unknown field '", key, "'"));
      }
    }
    TensorInfo info;
    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) {
      return file.Error(name, "missing or non-string 'dtype'");
    }
    if (!ParseDType(dtype->get<std::string>(), info.dtype)) {
      return file.Error(name, absl::StrCat("unknown dtype '",
                                           dtype->get<std::string>(), "'"));
    }

    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) {
      return file.Error(name, "missing or non-array 'shape'");
    }
    // Count elements with an overflow check: the count must fit the data
    // section anyway.
    uint64_t elements = 1;
    for (const json& dim : *shape) {
      if (!dim.is_number_unsigned()) {
        return file.Error(
            name, absl::StrCat(
                      "shape ", shape->dump(),
                      " has a dimension that is not a non-negative integer"));
      }
      const uint64_t d = dim.get<uint64_t>();
      if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / 8 / d) {
        return file.Error(
            name, absl::StrCat("shape ", shape->dump(), " is too large"));
      }
      elements *= d;
      info.shape.push_back(static_cast<int64_t>(d));
    }
    info.num_elements = static_cast<int64_t>(elements);

    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() ||
        offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned()) {
      return file.Error(name,
                        "'data_offsets' must be two non-negative integers");
    }
    info.begin = (*offsets)[0].get<uint64_t>();
    info.end = (*offsets)[1].get<uint64_t>();
    if (info.begin > info.end) {
      return file.Error(
          name, absl::StrCat("data_offsets [", info.begin, ", ", info.end,
                             "] end before they begin"));
    }
    const uint64_t needed = elements * DTypeSize(info.dtype);
    if (info.end - info.begin != needed) {
      return file.Error(
          name, absl::StrCat("data_offsets [", info.begin, ", ", info.end,
                             "] hold ", info.end - info.begin,
                             " bytes but shape ", ShapeToString(info.shape),
                             " of ", DTypeName(info.dtype), " needs ", needed));
    }
    if (info.end > data_size) {
      return file.Error(
          name,
          absl::StrCat("truncated: data_offsets [", info.begin, ", ", info.end,
                       "] run past the ", data_size, "-byte data section"));
    }
    auto [it, inserted] = file.tensors_.emplace(name, std::move(info));
    by_offset.emplace_back(&it->first, &it->second);
  }

  // The byte ranges must tile the data section: sorted by offset, each begins
  // where the previous ended. An overlap would alias two tensors; a hole or
  // trailing bytes mean the header and data disagree.
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) {
              return std::make_pair(a.second->begin, a.second->end) <
                     std::make_pair(b.second->begin, b.second->end);
            });
  uint64_t expected_begin = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, info] : by_offset) {
    if (info->begin < expected_begin) {
      return file.Error(
          *name, absl::StrCat("data_offsets [", info->begin, ", ", info->end,
                              "] overlap tensor '", *previous, "'"));
    }
    if (info->begin > expected_begin) {
      return file.Error(
          *name, absl::StrCat("data_offsets begin at ", info->begin,
                              ", leaving a hole after byte ", expected_begin));
    }
    expected_begin = info->end;
    previous = name;
  }
  if (expected_begin != data_size) {
    return file.Error(
        "", absl::StrCat("data section has ", data_size,
                         " bytes but the tensors cover ", expected_begin));
  }
  return file;
}

std::vector<std::string> SafetensorsFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) names.push_back(name);
  return names;
}

const std::vector<int64_t>* SafetensorsFile::FindShape(
    const std::string& name) const {
  const TensorInfo* info = Find(name);
  return info == nullptr ? nullptr : &info->shape;
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const TensorInfo*> SafetensorsFile::Get(
    const std::string& name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(source_, ": missing tensor '", name, "'"));
  }
  return info;
}

absl::StatusOr<std::vector<float>> SafetensorsFile::ReadFloats(
    const std::string& name) const {
  TEXTGEN_ASSIGN_OR_RETURN(const TensorInfo* info, Get(name));
  const char* p = Data(*info);
  std::vector<float> out(info->num_elements);
  switch (info->dtype) {
    case DType::kF32:
      // A zero-element tensor has no destination (out.data() may be null),
      // and memcpy with a null pointer is undefined even for zero bytes.
      if (!out.empty()) std::memcpy(out.data(), p, out.size() * sizeof(float));
      break;
    case DType::kF64:
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<float>(LoadLittleEndian<double>(p + 8 * i));
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(
            LoadLittleEndian<uint16_t>(p + 2 * i)));
      }
      break;
    case DType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(
            LoadLittleEndian<uint16_t>(p + 2 * i)));
      }
      break;
    default:
      return Error(
          name,
          absl::StrCat("dtype ", DTypeName(info->dtype),
                       " is not a floating-point type (F32, F16, BF16, F64)"));
  }
  // Loading reads each tensor once: give its mapped pages back.
  mapped_.DropPages(data_start_ + info->begin, data_start_ + info->end);
  return out;
}

absl::StatusOr<std::vector<float>> SafetensorsFile::ReadFloats(
    const std::string& name, const std::vector<int64_t>& expected_shape) const {
  TEXTGEN_ASSIGN_OR_RETURN(const TensorInfo* info, Get(name));
  if (info->shape != expected_shape) {
    return Error(
        name, absl::StrCat("shape ", ShapeToString(info->shape), ", expected ",
                           ShapeToString(expected_shape)));
  }
  return ReadFloats(name);
}

absl::StatusOr<std::vector<int64_t>> SafetensorsFile::ReadInts(
    const std::string& name) const {
  TEXTGEN_ASSIGN_OR_RETURN(const TensorInfo* info, Get(name));
  // Checked before the loop, which a zero-element tensor never enters (found
  // by fuzz/safetensors_fuzz: an empty F32 tensor read as integers).
  switch (info->dtype) {
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
      break;
    default:
      return Error(name, absl::StrCat("dtype ", DTypeName(info->dtype),
                                      " is not an integer type"));
  }
  const char* p = Data(*info);
  std::vector<int64_t> out(info->num_elements);
  for (size_t i = 0; i < out.size(); ++i) {
    switch (info->dtype) {
      case DType::kI64:
        out[i] = LoadLittleEndian<int64_t>(p + 8 * i);
        break;
      case DType::kI32:
        out[i] = LoadLittleEndian<int32_t>(p + 4 * i);
        break;
      case DType::kI16:
        out[i] = LoadLittleEndian<int16_t>(p + 2 * i);
        break;
      case DType::kI8:
        out[i] = LoadLittleEndian<int8_t>(p + i);
        break;
      case DType::kU8:
        out[i] = LoadLittleEndian<uint8_t>(p + i);
        break;
      default:
        return Error(name, absl::StrCat("dtype ", DTypeName(info->dtype),
                                        " is not an integer type"));
    }
  }
  return out;
}

}  // namespace textgen
