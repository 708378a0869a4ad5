#pragma once
// Elementwise math with NumPy broadcasting. Backward reduces gradients over broadcast axes.
#include "core/tensor.h"

namespace minidl {

Tensor add(const Tensor& a, const Tensor& b);
/// a += b in place (b broadcast to a's shape; a contiguous); not recorded, so a must not need a
/// gradient while grad mode is on.   add_(param.grad(), g);
Tensor& add_(Tensor& a, const Tensor& b);
/// a *= b in place, under the same rules as add_.   mul_(param.grad(), scale);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
/// a ** b elementwise; the gradient for b needs a > 0 where it is used.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
/// 1 where equal else 0, in the inputs' dtype; not differentiable.   (pred == target).sum()
Tensor eq(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// |x|, composed as relu(x) + relu(-x): its gradient is sign(x), 0 at 0, as PyTorch's.
Tensor abs(const Tensor& x);

/// A 0-d tensor holding `value`, in `like`'s dtype and device, for mixing scalars into ops.
Tensor scalar_like(double value, const Tensor& like);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, scalar_like(s, a)); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, scalar_like(s, a)); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, scalar_like(s, a)); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, scalar_like(s, a)); }
inline Tensor operator+(double s, const Tensor& a) { return add(scalar_like(s, a), a); }
inline Tensor operator-(double s, const Tensor& a) { return sub(scalar_like(s, a), a); }
inline Tensor operator*(double s, const Tensor& a) { return mul(scalar_like(s, a), a); }
inline Tensor operator/(double s, const Tensor& a) { return div(scalar_like(s, a), a); }

}  // namespace minidl
