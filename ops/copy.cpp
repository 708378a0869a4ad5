// Copies: dtype conversion, device transfer, making a layout contiguous, cloning, and the gather
// index_select. to(), clone() and index_select are differentiable, so a model may move its inputs
// inside forward(). Shapes: index_select(x, dim, index [K]) has x's shape with K at dim.
#include "ops/copy.h"

#include "core/autograd.h"
#include "ops/kernels.h"
#include "ops/view.h"

namespace minidl {

namespace {

Tensor copy_to(const Tensor& x, DType dtype, Device device, MemoryFormat format = MemoryFormat::Contiguous) {
  Tensor out = Tensor::empty(x.shape(), dtype, device, format);
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
  // A conversion to int64 or bool ends the graph, as in PyTorch: such tensors carry no gradient.
  if (is_floating(dtype) && autograd::needs_recording({x})) {
    DType from_dtype = x.dtype();
    Device from_device = x.device();
    autograd::record("to", out, {x}, [from_dtype, from_device](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{copy_to(g, from_dtype, from_device)};
    }, true);
  }
  return out;
}

}  // namespace

Tensor to(const Tensor& x, Device device, DType dtype) {
  return device == x.device() && dtype == x.dtype() ? x : copy_to(x, dtype, device);
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : copy_to(x, x.dtype(), x.device()); }

Tensor contiguous(const Tensor& x, MemoryFormat format) {
  MINIDL_CHECK(format == MemoryFormat::Contiguous || x.dim() == 4,
               "contiguous: the channels-last memory format is for 4-D [N, C, H, W] tensors, got shape ", x.shape());
  return x.is_contiguous(format) ? x : copy_to(x, x.dtype(), x.device(), format);
}

Tensor clone(const Tensor& x) { return copy_to(x, x.dtype(), x.device()); }

Tensor& copy_(Tensor& dst, const Tensor& src) {
  MINIDL_CHECK(broadcasts_to(src.shape(), dst.shape()), "copy_: source shape ", src.shape(),
               " does not broadcast to the destination shape ", dst.shape());
  NoGradGuard no_grad;  // a write, not part of any graph
  Tensor staged = src.device() == dst.device() ? src : src.to(dst.device());
  kernels_for(dst.device()).copy(src.shape() == dst.shape() ? staged : expand(staged, dst.shape()), dst);
  dst.bump_version();
  return dst;
}

Tensor index_select(const Tensor& src, int64_t dim, const Tensor& index) {
  check_same_device("index_select", {src, index});
  MINIDL_CHECK(src.dim() >= 1, "index_select: expected a tensor with at least one dimension, got a scalar");
  MINIDL_CHECK((index.dtype() == kInt64 || index.dtype() == kInt32) && index.dim() <= 1,
               "index_select: expected a 1-D int64 or int32 index, got ",
               index.dtype(), " of shape ", index.shape());
  dim = wrap_dim(dim, src.dim(), "index_select");
  Shape shape = src.shape();
  shape[static_cast<size_t>(dim)] = index.numel();
  Tensor out = Tensor::empty(shape, src.dtype(), src.device());
  Tensor flat_index, source;
  {
    NoGradGuard no_grad;  // plumbing: the tape gets one entry for the whole op
    flat_index = index.reshape({index.numel()}).to(kInt64).contiguous();  // the kernels read int64
    source = src.contiguous();
  }
  kernels_for(src.device()).index_select(source, dim, flat_index, out);
  if (autograd::needs_recording({src})) {
    // The adjoint of the gather: zeros, then each picked slice of g added back at its index.
    autograd::record("index_select", out, {src}, [flat_index, dim, in_shape = src.shape()](
                                                     const Tensor& g, const std::vector<bool>&) {
      Tensor grad = Tensor::empty(in_shape, g.dtype(), g.device());
      kernels_for(g.device()).fill(grad, 0);
      kernels_for(g.device()).index_add(g.contiguous(), dim, flat_index, grad);
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

Tensor index_select(const Tensor& src, const Tensor& index) { return index_select(src, 0, index); }

}  // namespace minidl
