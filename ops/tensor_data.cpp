// tensor(...) from nested lists. Each list checks its own elements as it is built (inner lists
// first), so a ragged or mixed list fails at the level where it differs, naming that element.
#include "ops/tensor_data.h"

#include "ops/creation.h"

namespace minidl {

TensorData::TensorData(std::initializer_list<TensorData> list) {
  sizes_ = {static_cast<int64_t>(list.size())};
  if (list.size() == 0) return;  // {}: 1-d, no elements, the default float dtype
  const TensorData& first = *list.begin();
  dtype_ = first.dtype_;
  sizes_.insert(sizes_.end(), first.sizes_.begin(), first.sizes_.end());
  int64_t i = 0;
  for (const TensorData& element : list) {
    MINIDL_CHECK(element.sizes_ == first.sizes_, "tensor: ragged nested list: element ", i, " of a list has sizes ",
                 element.sizes_, " but element 0 has sizes ", first.sizes_, " (every row must have the same length)");
    MINIDL_CHECK(element.dtype_ == first.dtype_, "tensor: element ", i, " of a list has dtype ", element.dtype_,
                 " but element 0 has ", first.dtype_, "; write every number alike (1.0 or 1), as libtorch requires");
    values_.insert(values_.end(), element.values_.begin(), element.values_.end());
    ++i;
  }
}

Tensor tensor(const TensorData& data, TensorOptions options) {
  const DType dtype = options.dtype_or(data.dtype());
  // Built on the host straight from the values (doubles stay exact in float64), then moved:
  // literals are small.
  Tensor host = Tensor::empty(data.sizes(), dtype, Device::cpu());
  const auto& values = data.values();
  dispatch_with_bool(dtype, "tensor", [&](auto tag) {
    using T = decltype(tag);
    T* out = host.data<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = values[i].to<T>();
  });
  Tensor t = host.to(options.device());
  if (options.requires_grad()) t.requires_grad_();
  return t;
}

}  // namespace minidl
