#pragma once
// libtorch's other forms of the arithmetic ops: a scalar operand, and the alpha of add and sub.
// Each is the tensor op of ops/elementwise.h on a wrapped scalar (type promotion as x + 2.5).
// And the fused-looking compositions optimizers use: addcmul, addcdiv, lerp (a 16-bit result of
// these and of an alpha computed in float32 and rounded once, as PyTorch's fused kernels give it).
#include <optional>
#include <string_view>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// a + alpha * b.   add(x, y, 0.5)
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha);
/// a + alpha * b for a number b.   add(x, 1)  // x + 1
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
/// a - alpha * b.
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b);
/// a / b rounded as `rounding_mode` says, as torch.div: "trunc" toward zero, "floor" down (as
/// floor_divide), none for true division. Under a mode integers stay integers (a zero divisor is
/// refused), and a 16-bit result is the float32 one rounded once.   div(x, y, "floor")
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode);
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> rounding_mode);
Tensor floor_divide(const Tensor& a, const Scalar& b);
Tensor remainder(const Tensor& a, const Scalar& b);

/// input + value * t1 * t2, the three broadcast and promoted together.   addcmul(v, g, g, 0.01)
Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
/// input + value * t1 / t2; integer t1 and t2 are refused (PyTorch no longer divides them).
Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
/// input + weight * (end - input), stepped from the nearer end (weight 1 gives end exactly):
/// floating input, end and weight of one dtype.   lerp(ema, x, 0.01)
Tensor lerp(const Tensor& input, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& input, const Tensor& end, const Tensor& weight);

}  // namespace minidl
