// Higher-order gradients and custom Functions on the GPU: second derivatives against finite
// differences in float64, and against the CPU on the same inputs.
#include <gtest/gtest.h>

#include "higher_order_util.h"
#include "minidl.h"
#include "test_cuda_util.h"

namespace minidl::cuda_higher_order_test {

namespace {

using autograd::AutogradContext;
using autograd::tensor_list;

Tensor cuda64(const Shape& shape) { return randn(shape, kFloat64).to(Device::cuda()).requires_grad_(); }

TEST(CudaHigherOrder, Gradgradcheck) {
  MINIDL_REQUIRE_CUDA();
  const std::vector<std::function<Tensor(const std::vector<Tensor>&)>> fs = {
      [](auto& in) { return mul(tanh(in[0]), exp(in[0])); },
      [](auto& in) { return sigmoid(matmul(in[0], in[0].t())); },
      [](auto& in) { return softmax(mul(in[0], in[0]), 1); },
      [](auto& in) { return mean(pow(sub(norm(in[0], 2, {1}), 1.0), 2)); },
  };
  for (const auto& f : fs) {
    auto r = testing::gradgradcheck(f, {cuda64({2, 3})});
    EXPECT_TRUE(r) << r.message;
  }
  auto r = testing::gradgradcheck([](auto& in) { return tanh(linear(in[0], in[1], in[2])); },
                                  {cuda64({3, 4}), cuda64({2, 4}), cuda64({2})});
  EXPECT_TRUE(r) << r.message;
}

// d/dw of a gradient penalty through Linear + tanh, CUDA against CPU on the same inputs.
TEST(CudaHigherOrder, PenaltyMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(11);
  Tensor x = randn({5, 4}), w1 = randn({6, 4}), b1 = randn({6}), w2 = randn({1, 6});
  auto run = [&](Device device) {
    // detach(): to(cpu) of a CPU tensor is that tensor, and the leaves of one run must not be the other's.
    Tensor xd = x.to(device).detach().requires_grad_(), w1d = w1.to(device).detach().requires_grad_();
    Tensor b1d = b1.to(device).detach().requires_grad_(), w2d = w2.to(device).detach().requires_grad_();
    Tensor critic = linear(tanh(linear(xd, w1d, b1d)), w2d);
    Tensor g = autograd::grad({critic}, {xd}, {ones_like(critic)}, true, true)[0];
    mean(pow(sub(norm(g, 2, {1}), 1.0), 2)).backward();
    return std::vector<Tensor>{w1d.grad().cpu(), b1d.grad().cpu(), w2d.grad().cpu()};
  };
  auto cpu = run(Device::cpu());
  auto gpu = run(Device::cuda());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(allclose(gpu[i], cpu[i], 1e-4, 1e-5)) << "gradient " << i;
}

struct Cube : autograd::Function<Cube> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * 3 * x * x};
  }
};

TEST(CudaHigherOrder, CustomFunction) {
  MINIDL_REQUIRE_CUDA();
  auto r = gradcheck([](auto& in) { return Cube::apply(in[0]); }, {cuda64({4})});
  EXPECT_TRUE(r) << r.message;
  auto r2 = testing::gradgradcheck([](auto& in) { return Cube::apply(in[0]); }, {cuda64({4})});
  EXPECT_TRUE(r2) << r2.message;
}

}  // namespace

}  // namespace minidl::cuda_higher_order_test
