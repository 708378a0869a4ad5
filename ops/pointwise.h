#pragma once
// Running one UnaryOp or BinaryOp kernel (ops/kernels.h) into a new tensor, for the math, logical
// and activation op files; nothing here records autograd.
#include "core/tensor.h"
#include "ops/kernels.h"

namespace minidl::pointwise {

/// out = op(x), x's shape and dtype, any strides in.
Tensor unary(UnaryOp op, const Tensor& x, double scalar = 0);
/// out = op(a, b), a and b of one dtype broadcast together; `name` appears in shape errors.
Tensor binary(BinaryOp op, const char* name, const Tensor& a, const Tensor& b, double scalar = 0);
/// x itself when floating, else x in the default float dtype (PyTorch's int-to-float promotion).
Tensor floating(const Tensor& x);
/// Checks that both are defined and on one device, and returns them converted (by recorded casts)
/// to result_type(a, b), or to the default float dtype where that is not floating and `to_float`.
std::pair<Tensor, Tensor> promoted(const char* name, const Tensor& a, const Tensor& b, bool to_float = false);
/// An integral divisor holding a 0 is an error, as PyTorch's (a look at b: a sync on CUDA).
void check_integral_divisor(const char* name, const Tensor& b);

}  // namespace minidl::pointwise
