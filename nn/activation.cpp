#include "nn/activation.h"

#include "ops/elementwise.h"
#include "ops/softmax.h"

namespace minidl::nn {

Tensor SigmoidImpl::forward(const Tensor& input) { return sigmoid(input); }
Tensor TanhImpl::forward(const Tensor& input) { return tanh(input); }
Tensor SoftmaxImpl::forward(const Tensor& input) { return softmax(input, dim); }
Tensor LogSoftmaxImpl::forward(const Tensor& input) { return log_softmax(input, dim); }

}  // namespace minidl::nn
