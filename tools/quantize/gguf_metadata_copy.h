// A GGUF file's metadata copied byte for byte into a new file's header, as
// llama.cpp's gguf_set_kv copies it (same keys, types, values and order),
// with keys dropped and appended as gguf_remove_key / gguf_set_val_* do.
#ifndef TEXTGEN_TOOLS_QUANTIZE_GGUF_METADATA_COPY_H_
#define TEXTGEN_TOOLS_QUANTIZE_GGUF_METADATA_COPY_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/formats/gguf.h"

namespace textgen::quantize {

// Appends `value` little-endian (this code runs on little-endian machines
// only, as the GGUF reader does).
template <typename T>
void AppendLittleEndian(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}
// A GGUF string: uint64 length, then the bytes.
void AppendGgufString(absl::string_view s, std::string* out);

class MetadataCopier {
 public:
  // Every key of `file` (opened from a path), in order. INVALID_ARGUMENT for
  // arrays of arrays, which llama.cpp's reader refuses.
  static absl::StatusOr<MetadataCopier> Open(const GgufFile& file);

  // Removes the keys present among `keys`.
  void Drop(std::initializer_list<absl::string_view> keys);
  // Appends a UINT32 key (after removing one of that name, as
  // gguf_set_val_u32 does).
  void AppendUint32(absl::string_view key, uint32_t value);

  // A GGUF v3 header: magic, version, `tensor_count`, the key count, then
  // the keys. The caller appends the tensor infos and pads.
  std::string Header(uint64_t tensor_count) const;

 private:
  std::vector<std::pair<std::string, std::string>> entries_;  // Key, bytes.
};

}  // namespace textgen::quantize

#endif  // TEXTGEN_TOOLS_QUANTIZE_GGUF_METADATA_COPY_H_
