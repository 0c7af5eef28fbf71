// Builds a safetensors file in memory from float32 tensors: how checkpoints
// in other formats (llama2.c, GGUF) are handed to LoadWeights under Hugging
// Face names, after their layout differences are undone.
#ifndef TEXTGEN_MODEL_FORMATS_SAFETENSORS_WRITER_H_
#define TEXTGEN_MODEL_FORMATS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace textgen {

class SafetensorsWriter {
 public:
  // `data_bytes`: the expected size of all tensors, reserved up front.
  explicit SafetensorsWriter(uint64_t data_bytes);
  ~SafetensorsWriter();

  // Appends an F32 tensor from the float32 bytes at `values` (row-major,
  // any alignment); `rows` gives the order of its rows, the indices along the
  // first dimension (empty: as stored).
  void Add(const std::string& name, const std::vector<int64_t>& shape,
           const char* values, const std::vector<int>& rows = {});

  // The whole file: header length, JSON header, data. Leaves the writer
  // empty.
  std::string Finish();

 private:
  class Header;  // The JSON header (nlohmann::json stays out of this header).
  std::unique_ptr<Header> header_;
  std::string data_;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_FORMATS_SAFETENSORS_WRITER_H_
