// scatter_reduce: every reduction with and without x's own values, in float64 and int64, with the
// gradients of each (values worked out by hand: the weighted sum 1 * out[0] + 2 * out[1] + 3 * out[2]
// is differentiated), zeros in a product, ties in a maximum, gradchecks, and CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::scatter_reduce_test {

namespace {

using testing::expect_error;
using D = std::vector<double>;

D values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

void expect_near_all(const Tensor& got, const D& want) {
  const D g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-12) << "element " << i;
}

struct Case {
  D out, grad_x, grad_src, out_int;
};

TEST(ScatterReduce, EveryReductionWithAndWithoutSelf) {
  // x = [10, 20, 30]; src = [1, 2, 3, 4, 5] goes to positions [0, 1, 0, 1, 0].
  const std::map<std::pair<std::string, bool>, Case> cases = {
      {{"sum", true}, {{19, 26, 30}, {1, 2, 3}, {1, 2, 1, 2, 1}, {19, 26, 30}}},
      {{"sum", false}, {{9, 6, 30}, {0, 0, 3}, {1, 2, 1, 2, 1}, {9, 6, 30}}},
      {{"prod", true}, {{150, 160, 30}, {15, 16, 3}, {150, 160, 50, 80, 30}, {150, 160, 30}}},
      {{"prod", false}, {{15, 8, 30}, {0, 0, 3}, {15, 8, 5, 4, 3}, {15, 8, 30}}},
      {{"mean", true}, {{4.75, 26.0 / 3, 30}, {0.25, 2.0 / 3, 3}, {0.25, 2.0 / 3, 0.25, 2.0 / 3, 0.25}, {4, 8, 30}}},
      {{"mean", false}, {{3, 3, 30}, {0, 0, 3}, {1.0 / 3, 1, 1.0 / 3, 1, 1.0 / 3}, {3, 3, 30}}},
      {{"amax", true}, {{10, 20, 30}, {1, 2, 3}, {0, 0, 0, 0, 0}, {10, 20, 30}}},
      {{"amax", false}, {{5, 4, 30}, {0, 0, 3}, {0, 0, 0, 2, 1}, {5, 4, 30}}},
      {{"amin", true}, {{1, 2, 30}, {0, 0, 3}, {1, 2, 0, 0, 0}, {1, 2, 30}}},
      {{"amin", false}, {{1, 2, 30}, {0, 0, 3}, {1, 2, 0, 0, 0}, {1, 2, 30}}},
  };
  const Tensor index = tensor({0, 1, 0, 1, 0}, kInt64);
  const Tensor weights = tensor({1.0, 2.0, 3.0}, kFloat64);
  for (const auto& [key, want] : cases) {
    const auto& [reduce, self] = key;
    SCOPED_TRACE(reduce + (self ? " with self" : " without self"));
    Tensor x = tensor({10.0, 20.0, 30.0}, kFloat64).requires_grad_();
    Tensor src = tensor({1.0, 2.0, 3.0, 4.0, 5.0}, kFloat64).requires_grad_();
    const Tensor out = scatter_reduce(x, 0, index, src, reduce, self);
    expect_near_all(out, want.out);
    (out * weights).sum().backward();
    expect_near_all(x.grad(), want.grad_x);
    expect_near_all(src.grad(), want.grad_src);
    const Tensor ints = tensor({10, 20, 30}, kInt64).scatter_reduce(0, index, tensor({1, 2, 3, 4, 5}, kInt64), reduce, self);
    EXPECT_EQ(ints.dtype(), kInt64);
    EXPECT_EQ(values(ints), want.out_int);  // integers: the floor of the mean
  }
}

TEST(ScatterReduce, ZerosTiesAndNan) {
  // One zero among a product's elements takes the product of the others; two give every element 0.
  Tensor x = tensor({2.0, 3.0}, kFloat64).requires_grad_();
  Tensor src = tensor({0.0, 5.0, 0.0, 4.0}, kFloat64).requires_grad_();
  scatter_reduce(x, 0, tensor({0, 0, 1, 1}, kInt64), src, "prod").sum().backward();
  EXPECT_EQ(values(x.grad()), (D{0, 0}));
  EXPECT_EQ(values(src.grad()), (D{10, 0, 12, 0}));
  Tensor x2 = tensor({0.0}, kFloat64).requires_grad_(), src2 = tensor({0.0, 7.0}, kFloat64).requires_grad_();
  scatter_reduce(x2, 0, tensor({0, 0}, kInt64), src2, "prod").sum().backward();
  EXPECT_EQ(values(x2.grad()), (D{0}));
  EXPECT_EQ(values(src2.grad()), (D{0, 0}));
  // Ties in a maximum share the gradient evenly.
  Tensor x3 = tensor({1.0, 5.0}, kFloat64).requires_grad_(), src3 = tensor({5.0, 5.0, 2.0}, kFloat64).requires_grad_();
  scatter_reduce(x3, 0, tensor({1, 1, 0}, kInt64), src3, "amax").sum().backward();
  expect_near_all(x3.grad(), {0, 1.0 / 3});
  expect_near_all(src3.grad(), {1.0 / 3, 1.0 / 3, 1});
  EXPECT_TRUE(std::isnan(scatter_reduce(tensor({1.0}), 0, tensor({0, 0}, kInt64), tensor({NAN, 2.0}), "amax").item<float>()));
  // In place, and along dim 1 of a matrix.
  Tensor m = zeros({2, 3});
  m.scatter_reduce_(1, tensor({{2, 2}, {0, 1}}, kInt64), tensor({{4.0, 6.0}, {1.0, 2.0}}), "amax", false);
  EXPECT_EQ(values(m), (D{0, 0, 6, 1, 2, 0}));
  expect_error([] { scatter_reduce(zeros({3}), 0, tensor({0}, kInt64), zeros({1}), "max"); },
               {"scatter_reduce", "\"amax\"", "\"max\""});
  expect_error([] { scatter_reduce(zeros({3}), 0, tensor({0}, kInt64), zeros({1}, kFloat64), "sum"); },
               {"scatter_reduce", "dtype"});
  expect_error([] { scatter_reduce(zeros({3}), 0, tensor({3}, kInt64), zeros({1}), "prod"); },
               {"scatter_reduce", "3", "out of"});
}

TEST(ScatterReduce, Gradcheck) {
  manual_seed(1);
  const Tensor index = tensor({{0, 2, 0, 1}, {1, 1, 3, 3}}, kInt64);  // along dim 1 of [2, 4]
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"}) {
    for (bool self : {true, false}) {
      SCOPED_TRACE(std::string(reduce) + (self ? " with self" : " without self"));
      GradcheckResult r = gradcheck([&](auto& in) { return scatter_reduce(in[0], 1, index, in[1], reduce, self); },
                                    {randn({2, 4}, kFloat64).requires_grad_(), randn({2, 4}, kFloat64).requires_grad_()});
      EXPECT_TRUE(r) << r.message;
    }
  }
}

TEST(CudaScatterReduce, MatchesTheCpu) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(2);
  const Tensor index = randint(0, 5, {40, 300});
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBFloat16}) {
    const Tensor x = (randn({40, 5}) * 4).to(dtype), src = (randn({40, 300}) * 4).to(dtype);
    for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"}) {
      for (bool self : {true, false}) {
        SCOPED_TRACE(std::string(reduce) + " " + dtype_name(dtype));
        const Tensor cpu = scatter_reduce(x, 1, index, src, reduce, self);
        const Tensor gpu = scatter_reduce(x.cuda(), 1, index.cuda(), src.cuda(), reduce, self).cpu();
        const bool order_free = std::string(reduce) != "sum" && std::string(reduce) != "mean";
        if (order_free || dtype == kInt64) EXPECT_TRUE(equal(gpu, cpu));  // prod runs in index order on both
        else if (dtype == kBFloat16) EXPECT_TRUE(allclose(gpu.to(kFloat64), cpu.to(kFloat64), 5e-2, 1.0));  // sums in another order
        else EXPECT_TRUE(allclose(gpu.to(kFloat64), cpu.to(kFloat64), 1e-5, 1e-4));
      }
    }
  }
}

}  // namespace

}  // namespace minidl::scatter_reduce_test
