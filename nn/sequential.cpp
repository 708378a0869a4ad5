#include "nn/sequential.h"

#include <typeinfo>

#include "nn/activation.h"
#include "nn/conv2d.h"
#include "nn/layers.h"
#include "nn/linear.h"

namespace minidl::nn {

namespace {

template <class M>
bool is(const std::shared_ptr<Module>& m) {
  return typeid(*m) == typeid(M);
}

// A MaxPool2d of non-overlapping k x k windows that drops the ragged edge: the pool the fused
// convolution kernel implements. 0 for any other.
int64_t simple_pool(const MaxPool2dImpl& pool) {
  const MaxPool2dOptions& o = pool.options;
  const Size2 k = o.kernel_size(), stride = o.stride().value_or(k);
  const bool simple = k.h == k.w && stride.h == k.h && stride.w == k.w && o.padding().h == 0 && o.padding().w == 0 &&
                      o.dilation().h == 1 && o.dilation().w == 1 && !o.ceil_mode();
  return simple ? k.h : 0;
}

}  // namespace

// Known runs of layers execute as one op with the same values and gradients, but fewer passes over
// memory: Linear then ReLU (LinearImpl::forward_relu: the bias and ReLU in the GEMM's epilogue),
// and with a Linear after them that no ReLU follows (forward_relu_linear: a classifier's last two
// layers, whose products share kernels on CUDA); Linear, GELU and Linear (forward_gelu_linear: a
// transformer's MLP, whose backward makes the GELU's output again instead of keeping it);
// Conv2d then ReLU (Conv2dImpl::forward_relu), and with a simple MaxPool2d after them
// (forward_relu_max_pool2d: one kernel from the convolution's output to the pooled result). Only
// the exact types are fused: a subclass may have its own forward. A layer with forward hooks is
// never fused: its hooks must see its own input and output.
Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  auto plain = [](const auto& m) { return !m->has_forward_hooks(); };
  for (auto it = begin(); it != end(); ++it) {
    const auto next = std::next(it);
    const bool relu_next = next != end() && is<ReLUImpl>(*next) && plain(*next) && plain(*it);
    if (is<LinearImpl>(*it) && relu_next) {
      auto& linear = static_cast<LinearImpl&>(**it);
      const auto after = std::next(next);
      if (after != end() && is<LinearImpl>(*after) && plain(*after) &&
          (std::next(after) == end() || !is<ReLUImpl>(*std::next(after)))) {
        x = linear.forward_relu_linear(x, static_cast<LinearImpl&>(**after));
        it = after;
        continue;
      }
      x = linear.forward_relu(x);
      it = next;
      continue;
    }
    if (is<LinearImpl>(*it) && next != end() && is<GELUImpl>(*next) && plain(*next) && plain(*it)) {
      const auto after = std::next(next);
      if (after != end() && is<LinearImpl>(*after) && plain(*after)) {
        x = static_cast<LinearImpl&>(**it).forward_gelu_linear(x, static_cast<LinearImpl&>(**after),
                                                                static_cast<GELUImpl&>(**next).options.approximate());
        it = after;
        continue;
      }
    }
    if (is<Conv2dImpl>(*it) && relu_next) {
      auto& conv = static_cast<Conv2dImpl&>(**it);
      const auto after = std::next(next);
      if (after != end() && is<MaxPool2dImpl>(*after) && plain(*after)) {
        if (int64_t pool = simple_pool(static_cast<MaxPool2dImpl&>(**after)); pool > 0) {
          x = conv.forward_relu_max_pool2d(x, pool);
          it = after;
          continue;
        }
      }
      x = conv.forward_relu(x);
      it = next;
      continue;
    }
    x = (*it)->call(x);
  }
  return x;
}

std::shared_ptr<Module> SequentialImpl::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<SequentialImpl>();
  clone_modules_into(*copy, device);
  return copy;
}

}  // namespace minidl::nn
