// Named tensors as a weight file holds them: the one interface between the
// model and its files. model/weights.h reads every parameter through it, so a
// new file format (model/formats/) implements TensorSource and nothing in the
// model changes; no format is staged through another.
#ifndef TEXTGEN_MODEL_TENSOR_SOURCE_H_
#define TEXTGEN_MODEL_TENSOR_SOURCE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/kernels/ggml_blocks.h"

namespace textgen {

// Formats a shape as "[2, 3]".
std::string ShapeToString(const std::vector<int64_t>& shape);

// A tensor in the form its source stores it, for a loader that can keep the
// stored numbers rather than widen them: a GGUF matrix of a ggml block type
// (Q4_K, Q6_K, Q8_0, ...) is packed block for block, its codes and scales
// unchanged (kernels::PackedWeights::FromBlockRows, FromQ8_0Rows).
class StoredTensor {
 public:
  enum class Type {
    kF32,     // floats(): the values, row-major in the shape asked for.
    kBlocks,  // blocks(): rows of ggml blocks of block_type() (see below).
  };
  // The form every source can give.
  static StoredTensor Floats(std::vector<float> values);
  // `rows` rows of ggml's blocks of `type` (ggml-common.h's layouts; a row
  // is a whole number of blocks along the tensor's values), pointing into the
  // source, or into `owned` when the source rearranged them. `transposed`:
  // the rows run along the tensor's first dimension, not its last (GGUF keeps
  // GPT-2's Conv1D [in, out] as [out, in]). `release`, if set, runs when the
  // tensor is destroyed (a mapped file hands its pages back).
  static StoredTensor Blocks(kernels::BlockType type, absl::string_view blocks,
                             int64_t rows, bool transposed,
                             std::string owned = "",
                             std::function<void()> release = nullptr);

  StoredTensor(StoredTensor&& other) noexcept;
  StoredTensor& operator=(StoredTensor&& other) noexcept;
  ~StoredTensor();

  Type type() const { return type_; }
  const std::vector<float>& floats() const { return floats_; }
  std::vector<float> TakeFloats() { return std::move(floats_); }
  kernels::BlockType block_type() const { return block_type_; }
  absl::string_view blocks() const { return blocks_; }
  int64_t rows() const { return rows_; }
  bool transposed() const { return transposed_; }
  // kBlocks: whether every block's scales are finite (every value then is).
  bool BlockScalesFinite() const;

 private:
  StoredTensor() = default;

  Type type_ = Type::kF32;
  kernels::BlockType block_type_ = kernels::BlockType::kQ8_0;
  std::vector<float> floats_;
  std::string owned_;
  absl::string_view blocks_;
  int64_t rows_ = 0;
  bool transposed_ = false;
  std::function<void()> release_;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // Names the source in errors: a file's path.
  virtual const std::string& source() const = 0;
  // How errors name tensor `name`: the name itself, or where the source
  // stores it under another name (a GGUF file), that one too.
  virtual std::string DisplayName(const std::string& name) const {
    return name;
  }
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
  // The same tensor in the form the source stores it, where the source keeps
  // a form a loader may pack as it is (ggml blocks); otherwise its floats, as
  // ReadFloats gives them (the default). The same errors as ReadFloats.
  virtual absl::StatusOr<StoredTensor> ReadStored(
      const std::string& name,
      const std::vector<int64_t>& expected_shape) const;
};

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TENSOR_SOURCE_H_
