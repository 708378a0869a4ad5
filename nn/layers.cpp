#include "nn/layers.h"

#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/max_pool2d.h"
#include "ops/view.h"

namespace minidl::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return relu(input); }

Tensor FlattenImpl::forward(const Tensor& input) { return flatten(input, options.start_dim(), options.end_dim()); }

DropoutImpl::DropoutImpl(const DropoutOptions& options) : options(options) {
  MINIDL_CHECK(options.p() >= 0 && options.p() <= 1, "Dropout: expected a probability in [0, 1], got ", options.p());
}

Tensor DropoutImpl::forward(const Tensor& input) { return dropout(input, options.p(), is_training()); }

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return max_pool2d(input, options.kernel_size(), options.stride(), options.padding());
}

}  // namespace minidl::nn
