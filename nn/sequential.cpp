#include "nn/sequential.h"

#include <typeinfo>

#include "nn/layers.h"
#include "nn/linear.h"

namespace minidl::nn {

// A Linear followed by a ReLU runs as one op (LinearImpl::forward_relu): the same values and
// gradients, but one GEMM that writes the activated output instead of a GEMM and then a ReLU pass
// over its result, and one pass for the ReLU's gradient and the bias gradient. Only the exact types
// are fused: a subclass may have its own forward.
Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (auto it = begin(); it != end(); ++it) {
    Module& m = **it;
    const auto next = std::next(it);
    if (typeid(m) == typeid(LinearImpl) && next != end() && typeid(**next) == typeid(ReLUImpl)) {
      x = static_cast<LinearImpl&>(m).forward_relu(x);
      it = next;
      continue;
    }
    x = m.forward(x);
  }
  return x;
}

}  // namespace minidl::nn
