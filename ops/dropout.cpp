// Inverted dropout: out = x / (1-p) where kept and 0 where dropped, so the expected value of out is
// x and evaluation needs no rescaling. One kernel draws the keep mask and writes out; the mask (one
// byte per element) is all the backward needs: grad_x = grad / (1-p) where kept, else 0.
#include "ops/dropout.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/view.h"

namespace minidl {

Tensor dropout(const Tensor& x, double p, bool training) {
  MINIDL_CHECK(p >= 0 && p <= 1, "dropout: expected a probability p in [0, 1], got ", p);
  MINIDL_CHECK(x.defined(), "dropout: x is undefined");
  if (!training || p == 0) return x;
  MINIDL_CHECK(is_floating(x.dtype()), "dropout: expected a floating x, got ", x.dtype());
  // p == 1 drops everything; the kernel is not asked for a scale of 1/0.
  if (p == 1) return x * zeros_like(x);
  const double keep = 1 - p;
  Tensor xc;
  {
    NoGradGuard no_grad;  // contiguous() is plumbing, not a graph node
    xc = x.contiguous();
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty(x.shape(), kBool, x.device());
  kernels_for(x.device()).dropout(xc, keep, out, mask);
  if (autograd::needs_recording({x})) {
    autograd::record("dropout", out, {x}, [mask, keep](const Tensor& grad, const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(grad.shape(), grad.dtype(), grad.device());
      kernels_for(grad.device()).dropout_backward(grad.contiguous(), mask, keep, grad_in);
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

Tensor feature_dropout(const Tensor& x, double p, bool train) {
  MINIDL_CHECK(p >= 0 && p <= 1, "feature_dropout: expected a probability p in [0, 1], got ", p);
  MINIDL_CHECK(x.defined(), "feature_dropout: x is undefined");
  MINIDL_CHECK(x.dim() >= 2, "feature_dropout: expected an input of at least 2 dimensions [N, C, ...], got shape ",
               x.shape());
  if (!train || p == 0) return x;
  MINIDL_CHECK(is_floating(x.dtype()), "feature_dropout: expected a floating x, got ", x.dtype());
  // The dropout kernel run on ones of shape [N, C, 1, ...] draws the channels' mask and scale at
  // once; the product broadcasts it over each channel and carries the gradient.
  Shape noise_shape(static_cast<size_t>(x.dim()), 1);
  noise_shape[0] = x.size(0);
  noise_shape[1] = x.size(1);
  Tensor scale = Tensor::empty(noise_shape, x.dtype(), x.device());
  if (p == 1) {
    kernels_for(x.device()).fill(scale, 0);
  } else {
    Tensor mask = Tensor::empty(noise_shape, kBool, x.device());
    kernels_for(x.device()).dropout(ones(noise_shape, x.dtype(), x.device()), 1 - p, scale, mask);
  }
  return x * scale;
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  MINIDL_CHECK(x.defined(), "dropout2d: x is undefined");
  MINIDL_CHECK(x.dim() == 3 || x.dim() == 4, "dropout2d: expected an input of shape [N, C, H, W] or [C, H, W], got shape ",
               x.shape());
  MINIDL_CHECK(p >= 0 && p <= 1, "dropout2d: expected a probability p in [0, 1], got ", p);
  if (x.dim() == 4) return feature_dropout(x, p, training);
  return squeeze(feature_dropout(unsqueeze(x, 0), p, training), 0);  // one image: a batch of one
}

}  // namespace minidl
