// matmul and linear: forward against a triple loop, gradients against central differences, in
// every layout the GEMM kernel is handed (plain, batched, shared 2-D side, transposed views).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "minidl.h"
#include "test_cuda_util.h"

namespace minidl::matmul_test {

using minidl::testing::all_close;

namespace {

// The logical values of `t` (any dtype, any strides) in row-major order, as doubles.
std::vector<double> values(const Tensor& t) { return t.detach().to(kFloat64).to_vector<double>(); }

// Reference [B?, M, K] @ [B?, K, N] with a 2-D side shared by the batch.
std::vector<double> reference_matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const int64_t batch = a.dim() == 3 ? a.size(0) : (b.dim() == 3 ? b.size(0) : 1);
  const int64_t a_step = a.dim() == 3 ? m * k : 0, b_step = b.dim() == 3 ? k * n : 0;
  std::vector<double> av = values(a), bv = values(b), out(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) s += av[p * a_step + i * k + q] * bv[p * b_step + q * n + j];
        out[p * m * n + i * n + j] = s;
      }
  return out;
}

void expect_close(const std::vector<double>& expected, const Tensor& got, double tol) {
  std::vector<double> g = values(got);
  ASSERT_EQ(expected.size(), g.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
}

// A [rows, cols] matrix (or [B, rows, cols]) built as a transposed view of contiguous storage.
Tensor transposed_randn(Shape shape, DType dtype) {
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return randn(shape, dtype).transpose(-1, -2);
}

struct Case {
  const char* name;
  Shape a, b;
  bool a_t = false, b_t = false;  // build the operand as a transposed view
};

const Case kCases[] = {
    {"2d", {5, 7}, {7, 3}},
    {"batched", {4, 5, 7}, {4, 7, 3}},
    {"shared_b", {4, 5, 7}, {7, 3}},
    {"shared_a", {5, 7}, {4, 7, 3}},
    {"2d_a_transposed", {5, 7}, {7, 3}, true, false},
    {"2d_b_transposed", {5, 7}, {7, 3}, false, true},
    {"2d_both_transposed", {5, 7}, {7, 3}, true, true},
    {"batched_transposed", {2, 5, 7}, {2, 7, 3}, true, true},
    {"shared_b_transposed", {3, 5, 7}, {7, 3}, true, true},
    {"shared_a_transposed", {5, 7}, {3, 7, 3}, true, true},
    {"batch1_vector_like", {1, 1, 6}, {1, 6, 1}},
};

Tensor make(const Shape& shape, bool transposed, DType dtype) {
  return transposed ? transposed_randn(shape, dtype) : randn(shape, dtype);
}

}  // namespace

TEST(Matmul, ForwardMatchesTripleLoop) {
  manual_seed(1);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
      Tensor a = make(c.a, c.a_t, dtype), b = make(c.b, c.b_t, dtype);
      EXPECT_EQ(a.is_contiguous(), !c.a_t);
      Tensor out = matmul(a, b);
      Shape expected_shape{c.a[c.a.size() - 2], c.b.back()};
      if (c.a.size() == 3 || c.b.size() == 3) expected_shape.insert(expected_shape.begin(), c.a.size() == 3 ? c.a[0] : c.b[0]);
      EXPECT_EQ(out.shape(), expected_shape);
      EXPECT_EQ(out.dtype(), dtype);
      expect_close(reference_matmul(a, b), out, dtype == kFloat32 ? 1e-5 : 1e-12);
    }
  }
}

TEST(Matmul, ForwardCopiesOtherStrides) {
  manual_seed(2);
  // Neither contiguous nor a transpose of the last two dims: a permuted batch axis.
  Tensor a = randn({5, 4, 7}, kFloat64).permute({1, 0, 2});  // [4, 5, 7]
  Tensor b = randn({4, 3, 7}, kFloat64).permute({0, 2, 1});  // [4, 7, 3], a transpose per batch
  ASSERT_FALSE(a.is_contiguous());
  expect_close(reference_matmul(a, b), matmul(a, b), 1e-12);
  // A batch broadcast with stride 0.
  Tensor shared = expand(randn({1, 7, 3}, kFloat64), {4, 7, 3});
  expect_close(reference_matmul(a, shared), matmul(a, shared), 1e-12);
}

TEST(Matmul, LargeProductsSplitAcrossThreads) {
  manual_seed(7);
  // Big enough for the kernel to cut the output into per-thread blocks: by rows, by columns and in a
  // grid, with lengths that are not a multiple of the block alignment; also a short batch of big ones.
  const int saved_threads = get_num_threads();
  set_num_threads(4);
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = randn({67, 150}, dtype), w = randn({203, 150}, dtype), b = randn({203}, dtype);
    expect_close(reference_matmul(x, w.t()), matmul(x, w.t()), dtype == kFloat32 ? 1e-5 : 1e-12);  // by columns
    Tensor tall = randn({211, 90}, dtype), right = randn({90, 40}, dtype);
    expect_close(reference_matmul(tall, right), matmul(tall, right), dtype == kFloat32 ? 1e-5 : 1e-12);  // by rows
    expect_close(reference_matmul(tall.t().contiguous().t(), right), matmul(tall.t().contiguous().t(), right),
                 dtype == kFloat32 ? 1e-5 : 1e-12);
    Tensor square_a = randn({130, 90}, dtype), square_b = randn({90, 150}, dtype);  // a 2 x 2 grid of blocks
    expect_close(reference_matmul(square_a, square_b), matmul(square_a, square_b), dtype == kFloat32 ? 1e-5 : 1e-12);
    Tensor batch_a = randn({2, 130, 70}, dtype), batch_b = randn({2, 70, 90}, dtype);
    expect_close(reference_matmul(batch_a, batch_b), matmul(batch_a, batch_b), dtype == kFloat32 ? 1e-5 : 1e-12);
    // Many mid-sized products: one per thread, with a shared 2-D side too.
    Tensor many_a = randn({8, 20, 30}, dtype), many_b = randn({8, 30, 25}, dtype), shared_a = randn({20, 30}, dtype);
    expect_close(reference_matmul(many_a, many_b), matmul(many_a, many_b), dtype == kFloat32 ? 1e-5 : 1e-12);
    expect_close(reference_matmul(shared_a, many_b), matmul(shared_a, many_b), dtype == kFloat32 ? 1e-5 : 1e-12);
    // linear's bias rows then beta = 1 accumulation, split.
    std::vector<double> ref = reference_matmul(x, w.t()), bv = values(b);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i % 203];
    expect_close(ref, linear(x, w, b), dtype == kFloat32 ? 1e-5 : 1e-12);
  }
  set_num_threads(saved_threads);
}

TEST(Matmul, Gradcheck) {
  manual_seed(3);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    // The leaves are the stored layouts; f builds the transposed views, so backward sees them too.
    Shape sa = c.a, sb = c.b;
    if (c.a_t) std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
    if (c.b_t) std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);
    bool a_t = c.a_t, b_t = c.b_t;
    auto f = [a_t, b_t](const std::vector<Tensor>& in) {
      return matmul(a_t ? in[0].transpose(-1, -2) : in[0], b_t ? in[1].transpose(-1, -2) : in[1]);
    };
    auto r = gradcheck(f, {randn(sa, kFloat64).requires_grad_(), randn(sb, kFloat64).requires_grad_()});
    EXPECT_TRUE(r) << r.message;
  }
}

TEST(Matmul, GradcheckOneSideAndTransposedGradient) {
  manual_seed(4);
  Tensor a = randn({3, 4}, kFloat64).requires_grad_();
  Tensor b = randn({4, 2}, kFloat64);
  // Only a wants a gradient; b's must stay untouched.
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return matmul(in[0], b); }, {a});
  EXPECT_TRUE(r) << r.message;
  EXPECT_FALSE(b.grad().defined());
  // A transposed output makes the incoming gradient a transposed view.
  r = gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]).t(); },
                {randn({3, 4}, kFloat64).requires_grad_(), randn({4, 5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]).transpose(1, 2); },
                {randn({2, 3, 4}, kFloat64).requires_grad_(), randn({4, 5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]).transpose(1, 2); },
                {randn({3, 4}, kFloat64).requires_grad_(), randn({2, 4, 5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(Matmul, TransposedViewsAreNotCopied) {
  // A 2 MB weight: a hidden copy of it would show in the peak of the CPU allocator.
  Tensor w = randn({512, 1024});
  Tensor x = randn({4, 1024});
  const size_t weight_bytes = w.nbytes();
  auto extra_peak = [&](const std::function<void()>& fn) {
    const size_t before = memory_stats(Device::cpu()).bytes_in_use;
    reset_peak_memory_stats(Device::cpu());
    fn();
    return memory_stats(Device::cpu()).peak_bytes - before;
  };
  EXPECT_LT(extra_peak([&] { matmul(x, w.t()); }), weight_bytes / 4);
  EXPECT_LT(extra_peak([&] { linear(x, w); }), weight_bytes / 4);
  EXPECT_LT(extra_peak([&] { matmul(w.t().contiguous().t(), x.t()); }), weight_bytes * 5 / 4);  // one copy: the .contiguous()
  // Backward: grad_x = g @ W and grad_W = g^T @ x read W and g in place; only grad_W is new.
  Tensor wg = randn({512, 1024}).requires_grad_();
  Tensor xg = randn({4, 1024}).requires_grad_();
  EXPECT_LT(extra_peak([&] { linear(xg, wg, zeros({512}).requires_grad_()).sum().backward(); }), weight_bytes * 5 / 4);
}

// torch.matmul's vector and broadcast forms, against products of their slices.
TEST(Matmul, VectorsAndBroadcastBatchesAsTorch) {
  manual_seed(6);
  Tensor v = randn({4}, kFloat64), w = randn({4}, kFloat64), m = randn({3, 4}, kFloat64), n = randn({4, 5}, kFloat64);
  Tensor dot = matmul(v, w);
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_NEAR(dot.item<double>(), sum(v * w).item<double>(), 1e-12);
  EXPECT_TRUE(all_close(matmul(m, v), reshape(matmul(m, reshape(v, {4, 1})), {3}), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(matmul(v, n), reshape(matmul(reshape(v, {1, 4}), n), {5}), 1e-12, 1e-12));
  // [2, 1, 3, 4] @ [5, 4, 2] -> [2, 5, 3, 2]: each (i, j) block is a[i, 0] @ b[j].
  Tensor a = randn({2, 1, 3, 4}, kFloat64), b = randn({5, 4, 2}, kFloat64);
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_TRUE(all_close(c.select(0, i).select(0, j), matmul(a.select(0, i).select(0, 0), b.select(0, j)), 1e-12,
                            1e-12)) << i << ", " << j;
  // A 4-D batch against a 2-D weight, and a 1-D vector against a batch.
  EXPECT_EQ(matmul(randn({2, 3, 6, 4}), randn({4, 7})).shape(), (Shape{2, 3, 6, 7}));
  EXPECT_EQ(matmul(randn({4}), randn({2, 3, 4, 7})).shape(), (Shape{2, 3, 7}));
  EXPECT_EQ(matmul(randn({2, 3, 6, 4}), randn({4})).shape(), (Shape{2, 3, 6}));
}

TEST(Matmul, GradcheckOfBroadcastAndVectorForms) {
  manual_seed(7);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 1, 3, 4}, {5, 4, 2}}, {{2, 3, 2, 4}, {4, 3}}, {{4}, {2, 4, 3}}, {{2, 3, 4}, {4}}, {{4}, {4}}, {{3, 4}, {2, 2, 4, 5}}};
  for (const auto& [sa, sb] : cases) {
    auto r = gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                       {randn(sa, kFloat64).requires_grad_(), randn(sb, kFloat64).requires_grad_()});
    EXPECT_TRUE(r) << minidl::testing::shape_str(sa) << " @ " << minidl::testing::shape_str(sb) << ": " << r.message;
  }
}

TEST(Matmul, ErrorsNameBothShapes) {
  auto expect_error = [](const std::function<void()>& fn, const std::vector<std::string>& parts) {
    try {
      fn();
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      std::string msg = e.what();
      for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    }
  };
  expect_error([] { matmul(ones({2, 3}), ones({4, 5})); }, {"[2, 3]", "[4, 5]", "inner"});
  expect_error([] { matmul(ones({2, 2, 3}), ones({3, 3, 4})); }, {"[2, 2, 3]", "[3, 3, 4]", "batch"});
  expect_error([] { matmul(ones({3}), ones({4, 5})); }, {"[3]", "[4, 5]", "inner"});
  expect_error([] { matmul(ones({2, 3, 3, 4}), ones({5, 4, 2})); }, {"[2, 3, 3, 4]", "[5, 4, 2]", "broadcast"});
  expect_error([] { matmul(ones({}), ones({3})); }, {"matmul", "at least one dimension"});
  expect_error([] { matmul(ones({2, 3}), ones({3, 4}, kFloat64)); }, {"[2, 3]", "[3, 4]", "float32", "float64"});
  expect_error([] { matmul(ones({2, 3}, kInt64), ones({3, 4}, kInt64)); }, {"int64", "[2, 3]", "[3, 4]"});
  expect_error([] { linear(ones({2, 3}), ones({4, 5})); }, {"[2, 3]", "[4, 5]"});
  expect_error([] { linear(ones({2, 5}), ones({4, 5}), ones({3})); }, {"[4]", "[3]"});
}

TEST(Linear, ForwardMatchesReference) {
  manual_seed(5);
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = randn({6, 5}, dtype), w = randn({3, 5}, dtype), b = randn({3}, dtype);
    std::vector<double> xw = reference_matmul(x, w.t());
    std::vector<double> bv = values(b), with_bias = xw;
    for (size_t i = 0; i < with_bias.size(); ++i) with_bias[i] += bv[i % 3];
    double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
    expect_close(xw, linear(x, w), tol);
    expect_close(with_bias, linear(x, w, b), tol);
    // Leading dims are flattened like nn::Linear does: [2, 3, 5] -> [2, 3, 3].
    Tensor x3 = x.view({2, 3, 5});
    Tensor y3 = linear(x3, w, b);
    EXPECT_EQ(y3.shape(), (Shape{2, 3, 3}));
    expect_close(with_bias, y3, tol);
    // A transposed input and a transposed weight view go through the trans flags.
    expect_close(with_bias, linear(x.t().contiguous().t(), w.t().contiguous().t(), b), tol);
  }
}

TEST(Linear, RecordsOneTapeEntry) {
  autograd::clear_tape();
  Tensor x = randn({4, 3}), w = randn({2, 3}).requires_grad_(), b = zeros({2}).requires_grad_();
  Tensor y = linear(x, w, b);
  EXPECT_EQ(autograd::tape_size(), 1u);
  y.sum().backward();
  EXPECT_EQ(autograd::tape_size(), 0u);
  // d sum(x w^T + b) / db = N; / dW[o, i] = sum_n x[n, i].
  for (float v : b.grad().to_vector<float>()) EXPECT_FLOAT_EQ(v, 4.0f);
  std::vector<float> col = sum(x, {0}).to_vector<float>(), gw = w.grad().to_vector<float>();
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(gw[o * 3 + i], col[i], 1e-5);
}

TEST(Linear, Gradcheck) {
  manual_seed(6);
  auto x = [] { return randn({5, 4}, kFloat64).requires_grad_(); };
  auto w = [] { return randn({3, 4}, kFloat64).requires_grad_(); };
  auto b = [] { return randn({3}, kFloat64).requires_grad_(); };
  auto with_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  auto no_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
  auto r = gradcheck(with_bias, {x(), w(), b()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck(no_bias, {x(), w()});
  EXPECT_TRUE(r) << r.message;
  // Batch 1, a 3-D input, and a transposed incoming gradient (g^T layout for every gradient).
  r = gradcheck(with_bias, {randn({1, 4}, kFloat64).requires_grad_(), w(), b()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck(with_bias, {randn({2, 3, 4}, kFloat64).requires_grad_(), w(), b()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]).t(); }, {x(), w(), b()});
  EXPECT_TRUE(r) << r.message;
  // Transposed views as input and weight.
  r = gradcheck([](const std::vector<Tensor>& in) { return linear(in[0].t(), in[1].t(), in[2]); },
                {randn({4, 5}, kFloat64).requires_grad_(), randn({4, 3}, kFloat64).requires_grad_(), b()});
  EXPECT_TRUE(r) << r.message;
  // Only the weight wants a gradient (a first layer fed with data).
  Tensor data = randn({5, 4}, kFloat64);
  r = gradcheck([&](const std::vector<Tensor>& in) { return linear(data, in[0], in[1]); }, {w(), b()});
  EXPECT_TRUE(r) << r.message;
  EXPECT_FALSE(data.grad().defined());
}

}  // namespace minidl::matmul_test
