// Eigen types used throughout the model, with the layout each one promises.
//
// Activations are row-major: one token is one contiguous row, so appending a
// token's K/V to the cache or reading one token's logits is a contiguous copy.
// Weights are column-major [in, out]: each output unit's weights are one
// contiguous column, the same bytes as a PyTorch nn.Linear weight [out, in], so
// `x * W` multiplies a row of activations by W.
#ifndef TEXTGEN_MODEL_TENSOR_H_
#define TEXTGEN_MODEL_TENSOR_H_

#include <Eigen/Core>

namespace textgen {

// Activations [rows = tokens, cols = features].
using Activations =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// Weights [in, out] (column-major: one column per output unit).
using WeightMatrix = Eigen::MatrixXf;
// Biases and norm gains: a row vector of one per feature, broadcast over
// tokens.
using RowVector = Eigen::RowVectorXf;

}  // namespace textgen

#endif  // TEXTGEN_MODEL_TENSOR_H_
