#pragma once
// Logical and bitwise ops. The logical ops take any dtype (0 is false, anything else, NaN included,
// is true) and return bool tensors; the bitwise ops take integral or bool tensors (on bool they are
// the logical ops) and return result_type(a, b). Operands broadcast. None is differentiable.
#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// a && b elementwise, as bool.   Tensor both = logical_and(x > 0, y > 0);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// !x elementwise, as bool.
Tensor logical_not(const Tensor& x);

/// a & b on integral or bool tensors (a floating operand is an error, as PyTorch's).
///   Tensor low_bits = bitwise_and(codes, 0xFF);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Scalar& b);
Tensor bitwise_or(const Tensor& a, const Scalar& b);
Tensor bitwise_xor(const Tensor& a, const Scalar& b);
/// ~x: two's complement on integers, logical not on bool.
Tensor bitwise_not(const Tensor& x);

/// The operators of libtorch's tensors: on bool masks they combine masks (mask_a & mask_b); on
/// integers they are bitwise.   Tensor keep = (x > 0) & ~isnan(y);
inline Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
inline Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
inline Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
inline Tensor operator&(const Tensor& a, const Scalar& b) { return bitwise_and(a, b); }
inline Tensor operator|(const Tensor& a, const Scalar& b) { return bitwise_or(a, b); }
inline Tensor operator^(const Tensor& a, const Scalar& b) { return bitwise_xor(a, b); }
inline Tensor operator&(const Scalar& a, const Tensor& b) { return bitwise_and(b, a); }
inline Tensor operator|(const Scalar& a, const Tensor& b) { return bitwise_or(b, a); }
inline Tensor operator^(const Scalar& a, const Tensor& b) { return bitwise_xor(b, a); }
inline Tensor operator~(const Tensor& x) { return bitwise_not(x); }

}  // namespace minidl
