#include "model/formats/safetensors_writer.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

namespace textgen {
namespace {

// Header bytes reserved up front: ~100 bytes per tensor covers a few thousand.
constexpr size_t kHeaderReserve = size_t{1} << 20;

}  // namespace

class SafetensorsWriter::Header {
 public:
  nlohmann::json json = nlohmann::json::object();
};

SafetensorsWriter::SafetensorsWriter(uint64_t data_bytes)
    : header_(std::make_unique<Header>()) {
  // Room for the header too, so that Finish() can put it in front in place.
  data_.reserve(data_bytes + kHeaderReserve);
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::Add(const std::string& name,
                            const std::vector<int64_t>& shape,
                            const char* values, const std::vector<int>& rows) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const size_t begin = data_.size();
  // A row is one index along the first dimension (one value of a vector).
  const size_t row_bytes = count / shape.front() * sizeof(float);
  if (rows.empty()) {
    data_.append(values, count * sizeof(float));
  } else {
    for (int r : rows) data_.append(values + r * row_bytes, row_bytes);
  }
  header_->json[name] = {{"dtype", "F32"},
                         {"shape", shape},
                         {"data_offsets", {begin, data_.size()}}};
}

std::string SafetensorsWriter::Finish() {
  const std::string header = header_->json.dump();
  header_->json = nlohmann::json::object();
  std::string prefix(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(prefix.data(), &n, 8);  // Little-endian hosts only.
  prefix += header;
  // In place when the reserve holds the header: no second copy of the data.
  data_.insert(0, prefix);
  return std::move(data_);
}

}  // namespace textgen
