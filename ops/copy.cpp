// Copies: dtype conversion, device transfer, making a layout contiguous, cloning, and the batch
// gather. to() and clone() are differentiable, so a model may move its inputs inside forward().
#include "ops/copy.h"

#include "core/autograd.h"
#include "ops/kernels.h"

namespace minidl {

namespace {

Tensor copy_to(const Tensor& x, DType dtype, Device device) {
  Tensor out = Tensor::empty(x.shape(), dtype, device);
  if (device == x.device()) {
    kernels_for(device).copy(x, out);
  } else {
    // Across devices the bytes move as they are: make them contiguous and of the target dtype on
    // the source device first, so the transfer is one copy.
    Tensor src = x;
    if (!x.is_contiguous() || x.dtype() != dtype) {
      src = Tensor::empty(x.shape(), dtype, x.device());
      kernels_for(x.device()).copy(x, src);
    }
    copy_bytes(out.raw_data(), device, src.raw_data(), src.device(), out.nbytes());
  }
  if (autograd::needs_recording({x})) {
    DType from_dtype = x.dtype();
    Device from_device = x.device();
    autograd::record("to", out, {x}, [from_dtype, from_device](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{copy_to(g, from_dtype, from_device)};
    });
  }
  return out;
}

}  // namespace

Tensor Tensor::to(Device device) const {
  return device == this->device() ? *this : copy_to(*this, dtype(), device);
}

Tensor Tensor::to(DType dtype) const { return dtype == this->dtype() ? *this : copy_to(*this, dtype, device()); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : copy_to(*this, dtype(), device()); }

Tensor Tensor::clone() const { return copy_to(*this, dtype(), device()); }

void copy_(Tensor& dst, const Tensor& src) {
  MINIDL_CHECK(dst.shape() == src.shape(), "copy_: destination shape ", dst.shape(), " differs from source shape ",
               src.shape());
  Tensor staged = src.device() == dst.device() ? src : src.to(dst.device());
  kernels_for(dst.device()).copy(staged, dst);
}

Tensor index_select(const Tensor& src, const Tensor& index) {
  check_same_device("index_select", {src, index});
  MINIDL_CHECK(src.dim() >= 1, "index_select: expected a tensor with at least one dimension, got a scalar");
  MINIDL_CHECK(index.dtype() == kInt64 && index.dim() == 1, "index_select: expected a 1-D int64 index, got ",
               index.dtype(), " of shape ", index.shape());
  Shape shape = src.shape();
  shape[0] = index.numel();
  Tensor out = Tensor::empty(shape, src.dtype(), src.device());
  kernels_for(src.device()).index_select(src.contiguous(), index.contiguous(), out);
  return out;
}

}  // namespace minidl
