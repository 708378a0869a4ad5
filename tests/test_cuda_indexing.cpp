// Indexing, gather and scatter on CUDA: each against the CPU on the same random inputs, float64
// gradcheck on the GPU, deterministic scatter_add bit for bit against the CPU, and errors found
// before any kernel runs (the process goes on). Skips without a usable GPU.
#include <cstdint>
#include <string>
#include <vector>

#include "core/deterministic.h"
#include "test_cuda_util.h"

namespace minidl::cuda_indexing_test {

using namespace minidl::indexing;
using namespace minidl::testing;

namespace {

Tensor random_index(const Shape& shape, int64_t n, bool negative = false) {
  std::vector<double> u = rand(shape, kFloat64).to_vector<double>();
  std::vector<int64_t> v(u.size());
  for (size_t i = 0; i < u.size(); ++i) {
    v[i] = std::min<int64_t>(n - 1, static_cast<int64_t>(u[i] * n));
    if (negative && i % 2 == 1) v[i] -= n;
  }
  return Tensor::from_vector(v, shape);
}

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).to(gpu()).requires_grad_(); }

}  // namespace

TEST(CudaIndexing, IndexMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = (randn({4, 5, 6}, kFloat64) * 10.0).to(dtype);
    Tensor g = x.to(gpu());
    const Tensor i = random_index({3}, 4, true), j = random_index({2, 1}, 5), k = random_index({3}, 6);
    const Tensor mask = gt(randn({5, 6}), 0.0);
    std::vector<std::vector<TensorIndex>> cases = {
        {i}, {Slice(), j, k}, {i, Slice(), k}, {Slice(1, None), None, j}, {2, mask}, {gt(x, 0.0)},
        {Ellipsis, k}, {i, j}, {0, Slice(), -1},
    };
    for (size_t c = 0; c < cases.size(); ++c) {
      SCOPED_TRACE("case " + std::to_string(c));
      std::vector<TensorIndex> on_gpu;
      for (const TensorIndex& t : cases[c]) on_gpu.push_back(t.is_tensor() ? TensorIndex(t.tensor().to(gpu())) : t);
      EXPECT_TRUE(all_equal(g.index(on_gpu), x.index(cases[c])));
      EXPECT_TRUE(all_equal(g.index(cases[c]), x.index(cases[c])));  // CPU index tensors are moved
    }
  }
}

TEST(CudaIndexing, IndexPutMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor x = randn({6, 7}, kFloat64);
  Tensor g = x.to(gpu());
  const Tensor rows = Tensor::from_vector<int64_t>({5, 0, 3}), cols = random_index({3}, 7);
  Tensor v = randn({3}, kFloat64);
  x.index_put_({rows, cols}, v);
  g.index_put_({rows.to(gpu()), cols.to(gpu())}, v.to(gpu()));
  EXPECT_TRUE(all_equal(g, x));
  const Tensor mask = gt(x, 0.5);
  x.index_put_({mask}, -1.0);
  g.index_put_({mask.to(gpu())}, -1.0);
  EXPECT_TRUE(all_equal(g, x));
  Tensor xt = x.t(), gt_ = g.t();  // through a transposed view
  xt.index_put_({Slice(), 2}, 4.0);
  gt_.index_put_({Slice(), 2}, 4.0);
  EXPECT_TRUE(all_equal(g, x));
  const Tensor repeated = random_index({50}, 6);
  Tensor values = randn({50, 7}, kFloat64);
  index_put_(x, {repeated}, values, true);
  index_put_(g, {repeated.to(gpu())}, values.to(gpu()), true);
  EXPECT_TRUE(all_close(g, x, 1e-12, 1e-12));
}

TEST(CudaIndexing, GatherScatterMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64, kInt64, kInt32}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = (randn({5, 8}, kFloat64) * 10.0).to(dtype);
    Tensor src = (randn({5, 8}, kFloat64) * 10.0).to(dtype);
    const Tensor index = random_index({5, 6}, 8);
    Tensor gx = x.to(gpu()), gsrc = src.to(gpu()), gindex = index.to(gpu());
    EXPECT_TRUE(all_equal(gather(gx, 1, gindex), gather(x, 1, index)));
    EXPECT_TRUE(all_equal(gather(gx.t(), 0, gindex.t()), gather(x.t(), 0, index.t())));
    EXPECT_TRUE(all_close(scatter_add(gx, 1, gindex, gsrc), scatter_add(x, 1, index, src), tol(dtype), tol(dtype)));
    // Without repeats, scatter writes one value per place and must match exactly.
    const Tensor perm = expand(Tensor::from_vector<int64_t>({7, 2, 5, 0, 1, 3}), {5, 6}).contiguous();
    EXPECT_TRUE(all_equal(scatter(gx, 1, perm.to(gpu()), gsrc), scatter(x, 1, perm, src)));
    EXPECT_TRUE(all_equal(scatter(gx, 1, perm.to(gpu()), 3), scatter(x, 1, perm, 3)));
  }
  Tensor x = randn({6, 3}, kFloat64), source = randn({9, 3}, kFloat64);
  const Tensor rows = random_index({9}, 6);
  EXPECT_TRUE(all_close(index_add(x.to(gpu()), 0, rows.to(gpu()), source.to(gpu()), 2),
                        index_add(x, 0, rows, source, 2), 1e-12, 1e-12));
  Tensor m = gt(randn({4, 5, 3}), 0.3);
  EXPECT_TRUE(all_equal(nonzero(m.to(gpu())), nonzero(m)));
  EXPECT_TRUE(all_equal(masked_select(x.to(gpu()), gt(x, 0.0).to(gpu())), masked_select(x, gt(x, 0.0))));
  EXPECT_EQ(nonzero(zeros({3, 4}).to(gpu())).shape(), (Shape{0, 2}));
}

TEST(CudaIndexing, DeterministicScatterAddMatchesCpuBits) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope on(true);
  Tensor src = randn({400, 16}), index = random_index({400, 16}, 7);
  Tensor cpu = scatter_add(zeros({7, 16}), 0, index, src);
  Tensor a = scatter_add(zeros({7, 16}).to(gpu()), 0, index.to(gpu()), src.to(gpu()));
  Tensor b = scatter_add(zeros({7, 16}).to(gpu()), 0, index.to(gpu()), src.to(gpu()));
  EXPECT_TRUE(all_equal(a, b));
  EXPECT_TRUE(all_equal(a, cpu));  // both add in index order
  Tensor x = randn({5, 4});
  const Tensor rows = random_index({30}, 5);
  Tensor values = randn({30, 4});
  Tensor cx = x.clone(), gx = x.to(gpu());
  index_put_(cx, {rows}, values, true);
  index_put_(gx, {rows.to(gpu())}, values.to(gpu()), true);
  EXPECT_TRUE(all_equal(gx, cx));
}

TEST(CudaIndexing, Gradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Tensor i = random_index({4}, 3, true).to(gpu()), j = random_index({2, 1}, 4).to(gpu());
  const Tensor mask = gt(randn({4, 5}), 0.0).to(gpu());
  const Tensor index = random_index({3, 6}, 5).to(gpu());
  const Tensor unique = expand(Tensor::from_vector<int64_t>({4, 0, 2}), {3, 3}).contiguous().to(gpu());
  auto check = [](const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                  std::vector<Tensor> inputs) {
    GradcheckResult r = gradcheck(f, std::move(inputs));
    EXPECT_TRUE(r) << what << ": " << r.message;
  };
  check("index", [&](auto& in) { return in[0].index({i, j}); }, {leaf({3, 4, 5})});
  check("index separated", [&](auto& in) { return in[0].index({i, Slice(), j}); }, {leaf({3, 4, 5})});
  check("index mask", [&](auto& in) { return in[0].index({Slice(), mask}); }, {leaf({3, 4, 5})});
  check("masked_select", [&](auto& in) { return masked_select(in[0], mask); }, {leaf({3, 4, 5})});
  check("index_put_", [&](auto& in) {
    Tensor t = in[0] * 1.0;
    t.index_put_({Slice(), mask}, in[1]);
    return t;
  }, {leaf({3, 4, 5}), leaf({1})});
  check("gather", [&](auto& in) { return gather(in[0], 1, index); }, {leaf({3, 5})});
  check("scatter", [&](auto& in) { return scatter(in[0], 1, unique, in[1]); }, {leaf({3, 5}), leaf({3, 4})});
  check("scatter_add", [&](auto& in) { return scatter_add(in[0], 1, index, in[1]); }, {leaf({3, 5}), leaf({3, 6})});
  check("index_add", [&](auto& in) { return index_add(in[0], 1, index.index({0}), in[1]); },
        {leaf({2, 5}), leaf({2, 6})});
}

TEST(CudaIndexing, ErrorsBeforeAnyKernel) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = zeros({3, 4}).to(gpu());
  try {
    x.index({Tensor::from_vector<int64_t>({0, 3}).to(gpu())});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 3 is out of bounds for dimension 0 with size 3"), std::string::npos)
        << e.what();
  }
  try {
    gather(x, 1, Tensor::from_vector<int64_t>({4}, {1, 1}).to(gpu()));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 4 is out of bounds for dimension 1 with size 4"), std::string::npos)
        << e.what();
  }
  // The device is still usable: nothing out of range reached a kernel.
  EXPECT_EQ(x.index({Tensor::from_vector<int64_t>({2}).to(gpu())}).sum().item<float>(), 0.0f);
  cuda::synchronize();
}

}  // namespace minidl::cuda_indexing_test
