#include "model/tensor_source.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace textgen {

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

StoredTensor StoredTensor::Floats(std::vector<float> values) {
  StoredTensor t;
  t.floats_ = std::move(values);
  return t;
}

StoredTensor StoredTensor::Blocks(kernels::BlockType type,
                                  absl::string_view blocks, int64_t rows,
                                  bool transposed, std::string owned,
                                  std::function<void()> release) {
  StoredTensor t;
  t.type_ = Type::kBlocks;
  t.block_type_ = type;
  t.owned_ = std::move(owned);
  t.blocks_ = t.owned_.empty() ? blocks : absl::string_view(t.owned_);
  t.rows_ = rows;
  t.transposed_ = transposed;
  t.release_ = std::move(release);
  return t;
}

StoredTensor::StoredTensor(StoredTensor&& other) noexcept {
  *this = std::move(other);
}

StoredTensor& StoredTensor::operator=(StoredTensor&& other) noexcept {
  if (this == &other) return *this;
  if (release_) release_();
  type_ = other.type_;
  block_type_ = other.block_type_;
  floats_ = std::move(other.floats_);
  // A view of `owned` moves with it: the string's buffer may not (SSO).
  const bool owns = !other.owned_.empty();
  owned_ = std::move(other.owned_);
  blocks_ = owns ? absl::string_view(owned_) : other.blocks_;
  rows_ = other.rows_;
  transposed_ = other.transposed_;
  release_ = std::move(other.release_);
  other.release_ = nullptr;
  other.blocks_ = {};
  return *this;
}

StoredTensor::~StoredTensor() {
  if (release_) release_();
}

bool StoredTensor::BlockScalesFinite() const {
  const kernels::BlockLayout& layout = kernels::LayoutOf(block_type_);
  return kernels::BlockScalesFinite(
      block_type_, reinterpret_cast<const uint8_t*>(blocks_.data()),
      static_cast<int64_t>(blocks_.size() / layout.bytes) * layout.values);
}

absl::StatusOr<StoredTensor> TensorSource::ReadStored(
    const std::string& name, const std::vector<int64_t>& expected_shape) const {
  TEXTGEN_ASSIGN_OR_RETURN(std::vector<float> values,
                           ReadFloats(name, expected_shape));
  return StoredTensor::Floats(std::move(values));
}

}  // namespace textgen
