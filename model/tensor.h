// Eigen types used throughout the model, with the layout each one promises.
//
// Activations are row-major: one token is one contiguous row, so appending a
// token's K/V to the cache or reading one token's logits is a contiguous copy.
// Embedding tables are activations too (one row per token id). Projection
// weights are not Eigen matrices: they are kernels::PackedWeights, laid out for
// the batch-invariant product (model/kernels/kernels.h).
#ifndef TEXTGEN_MODEL_TENSOR_H_
#define TEXTGEN_MODEL_TENSOR_H_

#include <Eigen/Core>

namespace textgen {

// Activations [rows = tokens, cols = features].
using Activations =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// Biases and norm gains: a row vector of one per feature, broadcast over
// tokens.
using RowVector = Eigen::RowVectorXf;

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TENSOR_H_
