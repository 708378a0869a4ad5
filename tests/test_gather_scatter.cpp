// gather, scatter, scatter_add (and the in-place forms) and index_add: PyTorch's documented examples,
// gradients by hand and by float64 gradcheck, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "minidl.h"
#include "test_util.h"

namespace minidl::gather_scatter_test {

using minidl::testing::expect_error;

namespace {

Tensor ints(const std::vector<int64_t>& v, Shape shape = {}) { return Tensor::from_vector<int64_t>(v, shape); }
Tensor doubles(const std::vector<double>& v, Shape shape = {}) { return Tensor::from_vector<double>(v, shape); }

}  // namespace

TEST(Gather, PyTorchExamples) {
  Tensor x = doubles({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(gather(x, 1, ints({0, 0, 1, 0}, {2, 2})).to_vector<double>(), (std::vector<double>{1, 1, 4, 3}));
  EXPECT_EQ(gather(x, 0, ints({0, 1, 1, 0}, {2, 2})).to_vector<double>(), (std::vector<double>{1, 4, 3, 2}));
  // An index smaller than x outside dim, a transposed x, int64 values, dim -1.
  Tensor y = arange(12, kFloat64).reshape({3, 4});
  Tensor picked = gather(y, -1, ints({3, 0}, {2, 1}));
  EXPECT_EQ(picked.shape(), (Shape{2, 1}));
  EXPECT_EQ(picked.to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(gather(y.t(), 1, ints({2, 0}, {2, 1})).to_vector<double>(), (std::vector<double>{8, 1}));
  EXPECT_EQ(gather(ints({5, 6, 7}), 0, ints({2, 2})).to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  Tensor scalar = gather(doubles({9}).reshape(Shape{}), 0, ints({0}).reshape(Shape{}));
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<double>(), 9);
}

TEST(Scatter, PyTorchExamples) {
  Tensor src = arange(1, 11, 1, kFloat64).reshape({2, 5});
  Tensor out = scatter(zeros({3, 5}, kFloat64), 0, ints({0, 1, 2, 0}, {1, 4}), src);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}));
  Tensor filled = zeros({2, 4}, kFloat64);
  scatter_(filled, 1, ints({2, 3}, {2, 1}), 1.23);
  EXPECT_EQ(filled.to_vector<double>(), (std::vector<double>{0, 0, 1.23, 0, 0, 0, 0, 1.23}));
  Tensor counts = zeros({3, 5}, kFloat64);
  const uint64_t version = counts._version();
  scatter_add_(counts, 0, ints({0, 1, 2, 0, 0, 0, 1, 2, 2, 2}, {2, 5}), ones({2, 5}, kFloat64));
  EXPECT_EQ(counts.to_vector<double>(), (std::vector<double>{2, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 2, 1, 1}));
  EXPECT_GT(counts._version(), version);
  // int64 bins, and a write through a view of a bigger tensor.
  Tensor bins = scatter_add(zeros({4}, kInt64), 0, ints({3, 1, 3, 3}), ones({4}, kInt64));
  EXPECT_EQ(bins.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 3}));
  Tensor big = zeros({2, 3}, kFloat64);
  Tensor column = big.t().narrow(0, 1, 1);  // big[:, 1] as [1, 2]
  scatter_(column, 1, ints({1}, {1, 1}), 5.0);
  EXPECT_EQ(big.to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 5, 0}));
}

TEST(IndexAdd, PyTorchExample) {
  Tensor t = arange(1, 10, 1, kFloat64).reshape({3, 3});
  Tensor out = index_add(ones({5, 3}, kFloat64), 0, ints({0, 4, 2}), t);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{2, 3, 4, 1, 1, 1, 8, 9, 10, 1, 1, 1, 5, 6, 7}));
  Tensor twice = index_add(zeros({2, 2}, kFloat64), 1, ints({1, 1}), ones({2, 2}, kFloat64), 2);
  EXPECT_EQ(twice.to_vector<double>(), (std::vector<double>{0, 4, 0, 4}));
}

TEST(GatherScatter, GradientsByHand) {
  Tensor x = doubles({1, 2, 3}).requires_grad_();
  gather(x, 0, ints({2, 2, 0})).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0, 2}));
  Tensor base = doubles({1, 2, 3}).requires_grad_();
  Tensor src = doubles({7, 8}).requires_grad_();
  (scatter(base, 0, ints({2, 0}), src) * doubles({1, 10, 100})).sum().backward();
  EXPECT_EQ(base.grad().to_vector<double>(), (std::vector<double>{0, 10, 0}));
  EXPECT_EQ(src.grad().to_vector<double>(), (std::vector<double>{100, 1}));
}

TEST(GatherScatter, Gradcheck) {
  manual_seed(17);
  Tensor x = randn({3, 4}, kFloat64).requires_grad_();
  Tensor src = randn({3, 5}, kFloat64).requires_grad_();  // larger than the index along dim 1
  const Tensor index = ints({3, 0, 3, 1, 1, 2}, {3, 2});   // repeats within rows
  const Tensor unique = ints({3, 0, 1, 2, 0, 2}, {3, 2});  // no repeats (scatter's gradient is then defined)
  const Tensor rows = ints({2, 0, 2});
  const Tensor source = randn({3, 4}, kFloat64).requires_grad_();
  std::vector<std::pair<std::string, std::function<Tensor(const std::vector<Tensor>&)>>> cases = {
      {"gather", [&](const std::vector<Tensor>& in) { return gather(in[0], 1, index); }},
      {"scatter", [&](const std::vector<Tensor>& in) { return scatter(in[0], 1, unique, in[1]); }},
      {"scatter value", [&](const std::vector<Tensor>& in) { return scatter(in[0], 1, unique, 2.0) * in[1].sum(); }},
      {"scatter_add", [&](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, index, in[1]); }},
      {"scatter_add_ on a non-leaf", [&](const std::vector<Tensor>& in) {
         Tensor t = in[0] * 1.0;
         scatter_add_(t, 1, index, in[1]);
         return t;
       }},
      {"scatter_ on a non-leaf", [&](const std::vector<Tensor>& in) {
         Tensor t = in[0] * 2.0;
         scatter_(t, 1, unique, in[1]);
         return t * t;
       }},
  };
  for (auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    auto r = gradcheck(f, {x, src});
    EXPECT_TRUE(r) << r.message;
  }
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return index_add(in[0], 0, rows, in[1], 0.5); },
                     {randn({4, 4}, kFloat64).requires_grad_(), source});
  EXPECT_TRUE(r) << "index_add: " << r.message;
}

TEST(GatherScatter, Errors) {
  Tensor x = zeros({2, 3}, kFloat64);
  expect_error([&] { gather(x, 1, doubles({0, 1}, {1, 2})); }, {"gather", "int64 index", "float64"});
  expect_error([&] { gather(x, 1, ints({0, 1})); }, {"gather", "as many dims", "[2]", "[2, 3]"});
  expect_error([&] { gather(x, 1, ints({0, 0, 0, 0, 0, 0}, {3, 2})); }, {"gather", "larger", "dimension 0"});
  expect_error([&] { gather(x, 1, ints({0, 3}, {1, 2})); }, {"gather: index 3 is out of bounds for dimension 1 with size 3"});
  expect_error([&] { gather(x, 0, ints({-1}, {1, 1})); }, {"index -1 is out of bounds for dimension 0 with size 2"});
  expect_error([&] { gather(x, 2, ints({0}, {1, 1})); }, {"gather"});
  expect_error([&] { scatter(x, 1, ints({0, 1}, {1, 2}), ones({1, 2}, kFloat32)); }, {"scatter", "float64", "float32"});
  expect_error([&] { scatter_add(x, 1, ints({0, 1}, {1, 2}), ones({1, 1}, kFloat64)); }, {"scatter_add", "larger than src"});
  Tensor leaf = zeros({3}, kFloat64).requires_grad_();
  expect_error([&] { scatter_(leaf, 0, ints({0}), 1.0); }, {"leaf Variable that requires grad"});
  expect_error([&] { index_add(x, 0, ints({0}), ones({1, 2}, kFloat64)); }, {"index_add", "[1, 3]", "[1, 2]"});
  expect_error([&] { index_add(x, 0, ints({2}), ones({1, 3}, kFloat64)); }, {"index 2 is out of bounds for dimension 0 with size 2"});
  expect_error([&] { index_add(zeros({2}, kInt64), 0, ints({0}), ones({1}, kInt64)); }, {"index_add", "floating"});
}

}  // namespace minidl::gather_scatter_test
