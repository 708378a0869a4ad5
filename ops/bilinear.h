#pragma once
// The bilinear map of two inputs, as torch.nn.functional.bilinear: a composition of matmul and a sum.
#include "core/tensor.h"

namespace minidl {

/// y[*, o] = sum_ij x1[*, i] weight[o, i, j] x2[*, j] + bias[o]: input1 [*, in1] and input2
/// [*, in2] with the same leading dims, weight [out, in1, in2], bias [out] optional.
///   bilinear(a, b, weight, bias)  // [N, 5], [N, 3], [4, 5, 3], [4] -> [N, 4]
Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight, const Tensor& bias = {});

}  // namespace minidl
