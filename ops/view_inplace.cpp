// t_, transpose_, squeeze_ and unsqueeze_: libtorch's in-place view ops, which give the tensor
// itself (every handle to it) a new shape and strides over the same storage, copying nothing.
// Recorded as an in-place op, so that a gradient reaching the new shape is mapped back to the old
// one; like every in-place op they refuse a leaf that requires grad.
#include "ops/gather_scatter.h"
#include "ops/view.h"

namespace minidl {

namespace {

// Gives x the layout of `viewed` (a view of x); `back` maps a gradient of the new layout to the old.
Tensor& take_layout(Tensor& x, const Tensor& viewed, const char* op, std::function<Tensor(const Tensor&)> back) {
  detail::check_inplace_recordable(op, x);
  if (grad_mode_enabled() && x.requires_grad()) {
    // Recorded before the change: the entry's input is x's history with the old layout.
    detail::record_inplace(op, x, {}, {}, [back](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{back(g)};
    });
  }
  TensorImpl& impl = x.impl();
  impl.shape = viewed.shape();
  impl.strides = viewed.strides();
  impl.offset = viewed.offset();
  return x;
}

}  // namespace

Tensor& transpose_(Tensor& x, int64_t dim0, int64_t dim1) {
  const Tensor viewed = transpose(x.detach(), dim0, dim1);
  return take_layout(x, viewed, "transpose_", [dim0, dim1](const Tensor& g) { return transpose(g, dim0, dim1); });
}

Tensor& t_(Tensor& x) {
  MINIDL_CHECK(x.dim() <= 2, "t_: expected a tensor of at most 2 dims, got shape ", x.shape());
  if (x.dim() < 2) return x;
  const Tensor viewed = transpose(x.detach(), 0, 1);
  return take_layout(x, viewed, "t_", [](const Tensor& g) { return transpose(g, 0, 1); });
}

Tensor& squeeze_(Tensor& x, int64_t dim) {
  const Shape before = x.shape();
  const Tensor viewed = squeeze(x.detach(), dim);
  return take_layout(x, viewed, "squeeze_", [before](const Tensor& g) { return reshape(g, before); });
}

Tensor& squeeze_(Tensor& x) {
  const Shape before = x.shape();
  const Tensor viewed = squeeze(x.detach());
  return take_layout(x, viewed, "squeeze_", [before](const Tensor& g) { return reshape(g, before); });
}

Tensor& unsqueeze_(Tensor& x, int64_t dim) {
  const Shape before = x.shape();
  const Tensor viewed = unsqueeze(x.detach(), dim);
  return take_layout(x, viewed, "unsqueeze_", [before](const Tensor& g) { return reshape(g, before); });
}

}  // namespace minidl
