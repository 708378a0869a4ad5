#pragma once
// Which dtype an op returns when its operands differ: PyTorch's type promotion (torch.result_type),
// in one place for every op. Dtypes fall in categories bool < integral < floating. Operands count
// at three priorities: tensors with dimensions, 0-d tensors, and wrapped numbers (a C++ scalar
// written into an expression, `x * 2.5`). A lower priority changes the result only when its
// category is higher: int64 [3] * float64 0-d is float64, float32 [3] * float64 0-d stays float32,
// and a floating wrapped number lifts an integral or bool tensor to the default float dtype
// (float32), never further.
#include <initializer_list>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// The default floating dtype: what integral operands become in a true division, exp, mean, ...
inline constexpr DType kDefaultFloat = kFloat32;

/// The smallest dtype both a and b convert to without losing their category (torch.promote_types).
/// One pair differs from PyTorch: uint8 with int8 gives int32 (PyTorch's int16, which minidl lacks).
///   promote_types(kInt64, kFloat32) == kFloat32;  promote_types(kUInt8, kInt32) == kInt32
DType promote_types(DType a, DType b);

/// The dtype an op over these operands computes in and returns (torch.result_type). Undefined
/// tensors are skipped; at least one operand must be defined.
///   result_type({labels, probs}) == kFloat32   // int64 [N] and float32 [N]
DType result_type(std::initializer_list<Tensor> operands);
DType result_type(const std::vector<Tensor>& operands);
/// result_type of a tensor and a C++ scalar (the scalar counts as a wrapped number).
///   result_type(int64_tensor, 2.5) == kFloat32;  result_type(int64_tensor, 2) == kInt64
DType result_type(const Tensor& tensor, const Scalar& scalar);

/// True when a value of dtype `from` may be written into a tensor of dtype `to` (torch.can_cast):
/// never floating into integral or bool, never integral into bool. In-place ops refuse the rest.
bool can_cast(DType from, DType to);

/// The message of an in-place op whose result type its destination cannot hold, as PyTorch words it.
///   check_inplace_cast("add_", result_type(a, b), a.dtype());
void check_inplace_cast(const char* op, DType result, DType destination);

}  // namespace minidl
