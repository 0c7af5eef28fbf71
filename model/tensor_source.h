// Named tensors as a weight file holds them: the one interface between the
// model and its files. model/weights.h reads every parameter through it, so a
// new file format (model/formats/) implements TensorSource and nothing in the
// model changes; no format is staged through another.
#ifndef TEXTGEN_MODEL_TENSOR_SOURCE_H_
#define TEXTGEN_MODEL_TENSOR_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace textgen {

// Formats a shape as "[2, 3]".
std::string ShapeToString(const std::vector<int64_t>& shape);

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // Names the source in errors: a file's path.
  virtual const std::string& source() const = 0;
  // The name of every tensor the source holds, in a stable order.
  virtual std::vector<std::string> TensorNames() const = 0;
  // The shape of tensor `name` as stored, or null if there is none.
  virtual const std::vector<int64_t>* FindShape(
      const std::string& name) const = 0;
  // The values of a floating-point tensor widened to float, row-major, after
  // checking that its shape is `expected_shape`: NOT_FOUND if absent,
  // INVALID_ARGUMENT (naming the source and tensor) for another shape or a
  // dtype that is not floating point.
  virtual absl::StatusOr<std::vector<float>> ReadFloats(
      const std::string& name,
      const std::vector<int64_t>& expected_shape) const = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TENSOR_SOURCE_H_
