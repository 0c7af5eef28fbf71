#include "tools/quantize/gguf_metadata_copy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace textgen::quantize {
namespace {

// The offset just past `count` values of `type` starting at `offset` (the
// reader validated them all).
size_t ValuesEnd(const GgufFile& file, GgufValueType type, size_t offset,
                 uint64_t count) {
  if (type != GgufValueType::kString) {
    return offset + GgufScalarBytes(type) * count;
  }
  for (uint64_t i = 0; i < count; ++i) file.StringAt(offset, &offset);
  return offset;
}

}  // namespace

void AppendGgufString(absl::string_view s, std::string* out) {
  AppendLittleEndian<uint64_t>(s.size(), out);
  out->append(s.data(), s.size());
}

absl::StatusOr<MetadataCopier> MetadataCopier::Open(const GgufFile& file) {
  // The values' bytes, from a mapping of our own (GgufFile decodes values,
  // it does not hand out their encoding).
  TEXTGEN_ASSIGN_OR_RETURN(const MappedFile mapped,
                           MappedFile::Open(file.source()));
  MetadataCopier copier;
  for (const GgufKeyValue& kv : file.metadata()) {
    std::string bytes;
    AppendGgufString(kv.key, &bytes);
    AppendLittleEndian<uint32_t>(static_cast<uint32_t>(kv.type), &bytes);
    size_t end;
    if (kv.type == GgufValueType::kArray) {
      if (kv.element_type == GgufValueType::kArray) {
        return absl::InvalidArgumentError(absl::StrCat(
            file.source(), ": key '", kv.key,
            "' is an array of arrays, which llama.cpp cannot read"));
      }
      AppendLittleEndian<uint32_t>(static_cast<uint32_t>(kv.element_type),
                                   &bytes);
      AppendLittleEndian<uint64_t>(kv.count, &bytes);
      end = ValuesEnd(file, kv.element_type, kv.value_offset, kv.count);
    } else {
      end = ValuesEnd(file, kv.type, kv.value_offset, 1);
    }
    bytes.append(mapped.data() + kv.value_offset, end - kv.value_offset);
    copier.entries_.emplace_back(kv.key, std::move(bytes));
  }
  return copier;
}

void MetadataCopier::Drop(std::initializer_list<absl::string_view> keys) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const auto& entry) {
                                  return std::find(keys.begin(), keys.end(),
                                                   entry.first) != keys.end();
                                }),
                 entries_.end());
}

void MetadataCopier::AppendUint32(absl::string_view key, uint32_t value) {
  Drop({key});
  std::string bytes;
  AppendGgufString(key, &bytes);
  AppendLittleEndian<uint32_t>(static_cast<uint32_t>(GgufValueType::kUint32),
                               &bytes);
  AppendLittleEndian<uint32_t>(value, &bytes);
  entries_.emplace_back(std::string(key), std::move(bytes));
}

std::string MetadataCopier::Header(uint64_t tensor_count) const {
  std::string header = "GGUF";
  AppendLittleEndian<uint32_t>(3, &header);
  AppendLittleEndian<uint64_t>(tensor_count, &header);
  AppendLittleEndian<uint64_t>(entries_.size(), &header);
  for (const auto& entry : entries_) header += entry.second;
  return header;
}

}  // namespace textgen::quantize
