// Builds GGUF files byte by byte for tests: valid ones, and (through the raw
// setters) ones that lie about counts, types, offsets and alignment.
#ifndef TEXTGEN_TESTS_TESTING_GGUF_BUILDER_H_
#define TEXTGEN_TESTS_TESTING_GGUF_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace textgen::testing {

class GgufBuilder {
 public:
  // Little-endian encodings of the pieces of a file.
  template <typename T>
  static std::string Le(T value) {
    std::string out(sizeof(T), '\0');
    std::memcpy(out.data(), &value, sizeof(T));
    return out;
  }
  static std::string Str(const std::string& s) {
    return Le<uint64_t>(s.size()) + s;
  }

  // A key with a value already encoded (`type` is the value type's number).
  GgufBuilder& KeyRaw(const std::string& key, uint32_t type,
                      const std::string& value_bytes) {
    kv_ += Str(key) + Le<uint32_t>(type) + value_bytes;
    ++kv_count_;
    return *this;
  }
  GgufBuilder& KeyU32(const std::string& key, uint32_t v) {
    return KeyRaw(key, 4, Le(v));
  }
  GgufBuilder& KeyF32(const std::string& key, float v) {
    return KeyRaw(key, 6, Le(v));
  }
  GgufBuilder& KeyStr(const std::string& key, const std::string& v) {
    return KeyRaw(key, 8, Str(v));
  }
  GgufBuilder& KeyStrings(const std::string& key,
                          const std::vector<std::string>& values) {
    std::string bytes = Le<uint32_t>(8) + Le<uint64_t>(values.size());
    for (const std::string& v : values) bytes += Str(v);
    return KeyRaw(key, 9, bytes);
  }
  template <typename T>
  GgufBuilder& KeyArray(const std::string& key, uint32_t element_type,
                        const std::vector<T>& values) {
    std::string bytes =
        Le<uint32_t>(element_type) + Le<uint64_t>(values.size());
    for (const T& v : values) bytes += Le(v);
    return KeyRaw(key, 9, bytes);
  }

  // A tensor of ggml `type` with `dims` (innermost first) and its data bytes,
  // at the offset a valid file gives it unless `offset` says otherwise.
  GgufBuilder& Tensor(const std::string& name, std::vector<uint64_t> dims,
                      uint32_t type, const std::string& data,
                      int64_t offset = -1) {
    const uint64_t at = offset >= 0 ? static_cast<uint64_t>(offset) : next_;
    infos_ += Str(name) + Le<uint32_t>(dims.size());
    for (uint64_t d : dims) infos_ += Le(d);
    infos_ += Le<uint32_t>(type) + Le<uint64_t>(at);
    tensors_.push_back({at, data});
    next_ = Align(at + data.size());
    ++tensor_count_;
    return *this;
  }
  GgufBuilder& TensorF32(const std::string& name, std::vector<uint64_t> dims,
                         const std::vector<float>& values) {
    std::string data(values.size() * 4, '\0');
    // An empty tensor's vector may have no storage (memcpy from null is UB).
    if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
    return Tensor(name, std::move(dims), 0, data);
  }

  GgufBuilder& Version(uint32_t v) {
    version_ = v;
    return *this;
  }
  GgufBuilder& Alignment(uint64_t a) {  // Layout only; add the key yourself.
    alignment_ = a;
    return *this;
  }
  GgufBuilder& Counts(uint64_t tensors, uint64_t kvs) {  // Lie about counts.
    tensor_count_override_ = tensors;
    kv_count_override_ = kvs;
    return *this;
  }

  std::string Build() const {
    std::string out =
        "GGUF" + Le(version_) +
        Le<uint64_t>(tensor_count_override_ != kUnset ? tensor_count_override_
                                                      : tensor_count_) +
        Le<uint64_t>(kv_count_override_ != kUnset ? kv_count_override_
                                                  : kv_count_) +
        kv_ + infos_;
    out.resize(Align(out.size()), '\0');
    const size_t data_start = out.size();
    for (const auto& [offset, data] : tensors_) {
      const size_t end = data_start + offset + data.size();
      if (out.size() < end) out.resize(end, '\0');
      out.replace(data_start + offset, data.size(), data);
    }
    out.resize(data_start + (tensors_.empty() ? 0 : next_), '\0');
    return out;
  }

 private:
  static constexpr uint64_t kUnset = ~uint64_t{0};
  uint64_t Align(uint64_t n) const {
    return n + (alignment_ - n % alignment_) % alignment_;
  }

  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  std::string kv_, infos_;
  uint64_t kv_count_ = 0, tensor_count_ = 0;
  uint64_t kv_count_override_ = kUnset, tensor_count_override_ = kUnset;
  std::vector<std::pair<uint64_t, std::string>> tensors_;
  uint64_t next_ = 0;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_TESTING_GGUF_BUILDER_H_
