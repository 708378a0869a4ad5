#include "nn/sequential.h"

namespace minidl::nn {

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : *this) x = m->forward(x);
  return x;
}

}  // namespace minidl::nn
