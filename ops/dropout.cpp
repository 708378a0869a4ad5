// Inverted dropout: out = x * mask, with mask 1/(1-p) where kept and 0 where dropped, so the
// expected value of out is x and evaluation needs no rescaling. Shapes: mask and out have x's shape.
// The mask is the only thing backward needs (grad_x = grad * mask).
#include "ops/dropout.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/kernels.h"

namespace minidl {

Tensor dropout(const Tensor& x, double p, bool training) {
  MINIDL_CHECK(p >= 0 && p <= 1, "dropout: expected a probability p in [0, 1], got ", p);
  MINIDL_CHECK(x.defined(), "dropout: x is undefined");
  if (!training || p == 0) return x;
  MINIDL_CHECK(is_floating(x.dtype()), "dropout: expected a floating x, got ", x.dtype());
  Kernels& k = kernels_for(x.device());
  // p == 1 drops everything; the kernel is not asked for a scale of 1/0.
  Tensor mask = p == 1 ? zeros(x.shape(), x.dtype(), x.device()) : Tensor::empty(x.shape(), x.dtype(), x.device());
  if (p < 1) k.dropout_mask(mask, 1 - p);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  k.binary(BinaryOp::Mul, x, mask, out);
  if (autograd::needs_recording({x})) {
    autograd::record("dropout", out, {x}, [mask](const Tensor& grad, const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(grad.shape(), grad.dtype(), grad.device());
      kernels_for(grad.device()).binary(BinaryOp::Mul, grad, mask, grad_in);
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

}  // namespace minidl
