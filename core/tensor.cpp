#include "core/tensor.h"

#include <algorithm>
#include <limits>

#include "core/autograd.h"

namespace minidl {

TensorImpl::~TensorImpl() {
  if (node != 0) autograd::output_released(node);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  Tensor t = empty(shape, dtype, device);
  if (format != MemoryFormat::Contiguous) t.impl().strides = format_strides(shape, format);
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape) MINIDL_CHECK(s >= 0, "empty: negative dimension in shape ", shape);
  const int64_t numel = shape_numel(shape);
  MINIDL_CHECK(numel <= std::numeric_limits<int64_t>::max() / static_cast<int64_t>(minidl::element_size(dtype)), "empty: shape ",
               shape, " of ", dtype, " needs more bytes than an int64 can count");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(numel) * minidl::element_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->inference = inference_mode_enabled();
  return Tensor(std::move(impl));
}

Tensor Tensor::make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  impl->inference = base.impl().inference || inference_mode_enabled();
  return Tensor(std::move(impl));
}

TensorImpl& Tensor::impl() const {
  MINIDL_CHECK(impl_ != nullptr, "operation on an undefined tensor (a default-constructed Tensor, or the grad() "
                                 "of a tensor that no backward has reached)");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  // An empty tensor has no element out of place (as in PyTorch), and its other dimensions may
  // multiply past int64; without a zero, every product below is at most numel().
  if (std::find(shape().begin(), shape().end(), 0) != shape().end()) return true;
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  return format == MemoryFormat::Contiguous ? is_contiguous() : has_format(shape(), strides(), format);
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * static_cast<int64_t>(minidl::element_size(dtype()));
}

Tensor& Tensor::requires_grad_(bool requires_grad) const {
  MINIDL_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad; use detach() first");
  MINIDL_CHECK(!requires_grad || is_floating(dtype()), "requires_grad_: only floating tensors can require grad, got ",
               dtype());
  MINIDL_CHECK(!requires_grad || !is_inference(), "requires_grad_: this is an inference tensor (made under "
                                                  "InferenceMode); clone() it outside InferenceMode first");
  impl().requires_grad = requires_grad;
  return const_cast<Tensor&>(*this);  // the handle is unchanged; only its impl's flag moved
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) {
    MINIDL_CHECK(grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device(),
                 "set_grad: gradient ", grad.shape(), " ", grad.dtype(), " on ", grad.device(),
                 " does not match tensor ", shape(), " ", dtype(), " on ", device());
  }
  impl().grad = grad.impl_ptr();
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) {
  MINIDL_CHECK(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook: only a leaf that requires grad "
                                             "accumulates a gradient; this tensor ",
               is_leaf() ? "does not require grad" : "is the output of an op");
  MINIDL_CHECK(hook, "register_post_accumulate_grad_hook: the hook is empty");
  auto& hooks = impl().post_accumulate_grad_hooks;
  if (!hooks) hooks = std::make_shared<std::vector<std::function<void(Tensor&)>>>();
  hooks->push_back(std::move(hook));
}

Tensor Tensor::detach() const {
  return make_view(*this, shape(), strides(), offset());
}

}  // namespace minidl
