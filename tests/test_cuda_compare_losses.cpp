// On CUDA: the bool dtype, comparisons, where / masked_fill / clamp, index_select with its
// atomic index_add backward, in-place ops and slice, and every loss option. CPU-vs-CUDA agreement in
// float32 on the same random inputs, float64 gradchecks on the GPU, and the target errors found by
// kernels. GPU tests skip, saying why, where no CUDA device is usable.
#include <cmath>
#include <limits>
#include <sstream>

#include "nn/nn.h"
#include "float64_util.h"
#include "test_cuda_util.h"

namespace minidl::cuda_compare_losses_test {

using namespace minidl::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A float64 leaf on the GPU that wants a gradient.

// `t` on the device of `like`: lets one function serve the CPU and the CUDA run of a comparison.
Tensor on(const Tensor& t, const Tensor& like) { return t.device() == like.device() ? t : t.to(like.device()); }

// Integers in [0, n) on the CPU, drawn from the seeded generator.
Tensor random_ints(const Shape& shape, int64_t n) {
  std::vector<double> u = rand(shape, kFloat64).to_vector<double>();
  std::vector<int64_t> v(u.size());
  for (size_t i = 0; i < u.size(); ++i) v[i] = std::min<int64_t>(n - 1, static_cast<int64_t>(u[i] * n));
  return Tensor::from_vector(v, shape);
}


}  // namespace

TEST(CudaBool, ConversionsFillGatherPrintAndCount) {
  MINIDL_REQUIRE_CUDA();
  Tensor b = Tensor::from_vector<bool>({true, false, true, true}, {2, 2}).to(gpu());
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(b.to(Device::cpu()).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(b.to(kFloat32).to_vector<float>(), (std::vector<float>{1, 0, 1, 1}));
  EXPECT_EQ(b.t().contiguous().to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  Tensor f = Tensor::from_vector<float>({0, -3, 0.5f, 0}).to(gpu());
  EXPECT_EQ(f.to(kBool).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(full({3}, 1, kBool, gpu()).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(zeros({3}, kBool, gpu()).to_vector<bool>(), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(index_select(b, 1, Tensor::from_vector<int64_t>({1, 1}).to(gpu())).to_vector<bool>(),
            (std::vector<bool>{false, false, true, true}));
  Tensor count = b.sum();
  EXPECT_EQ(count.dtype(), kInt64);
  EXPECT_EQ(count.item<int64_t>(), 3);
  std::ostringstream os;
  os << b;
  EXPECT_EQ(os.str(), "tensor([[ True, False],\n        [ True,  True]], shape=[2, 2], dtype=bool, device=cuda:0)");
}

TEST(CudaCompare, EveryOpAndDtypeMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"eq", [](auto& a, auto& b) { return a == b; }}, {"ne", [](auto& a, auto& b) { return a != b; }},
      {"lt", [](auto& a, auto& b) { return a < b; }},  {"le", [](auto& a, auto& b) { return a <= b; }},
      {"gt", [](auto& a, auto& b) { return a > b; }},  {"ge", [](auto& a, auto& b) { return a >= b; }}};
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{64, 129}, {64, 129}}, {{64, 129}, {129}}, {{7, 1, 5}, {1, 6, 5}}, {{}, {3, 4}}};
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    for (const Case& c : cases) {
      Tensor a = random_ints(c.a, 3).to(dtype), b = random_ints(c.b, 3).to(dtype);  // ties occur
      for (const auto& [name, op] : ops) {
        SCOPED_TRACE(std::string(name) + " " + dtype_name(dtype) + " " + shape_str(c.a) + " vs " + shape_str(c.b));
        Tensor out = op(a.to(gpu()), b.to(gpu()));
        EXPECT_EQ(out.dtype(), kBool);
        EXPECT_TRUE(all_equal(out, op(a, b)));
      }
    }
  }
  // Transposed operands, NaN, and scalars (int64 against a fraction compares in float64).
  Tensor x = randn({30, 40});
  EXPECT_TRUE(all_equal(x.to(gpu()).t() > x.t().contiguous().to(gpu()), x.t() > x.t().contiguous()));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = Tensor::from_vector<float>({nan, 1, 2}).to(gpu());
  EXPECT_EQ((n == n).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((n != n).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((1.5 < n).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((Tensor::from_vector<int64_t>({0, 1}).to(gpu()) > 0.5).to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(CudaWhere, MatchesCpuAndGradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor cond = random_ints({5, 1, 6}, 2).to(kBool);
  expect_cpu_cuda_agree("where broadcast", [&](auto& in) { return where(on(cond, in[0]), in[0], in[1]); },
                        {randn({4, 1}), randn({5, 4, 6})});
  expect_cpu_cuda_agree("where int64 values", [](auto& in) { return where(in[0], in[1], in[2]); },
                        {random_ints({40}, 2).to(kBool), random_ints({40}, 100), random_ints({1}, 100)});
  expect_cpu_cuda_agree("masked_fill", [](auto& in) { return masked_fill(in[0], in[0] > 0.3, -1e9); }, {randn({8, 9})});
  expect_cpu_cuda_agree("clamp", [](auto& in) { return clamp(in[0], -0.5, 0.7); }, {randn({200})});
  Tensor c = cond.to(gpu());
  expect_gradcheck("where", [&](auto& in) { return where(c, in[0], in[1]); }, {leaf({5, 4, 6}, gpu()), leaf({4, 1}, gpu())});
  expect_gradcheck("where scalar", [&](auto& in) { return where(in[0] > 0.0, in[0], 0.0); }, {leaf({3, 4}, gpu())});
  expect_gradcheck("masked_fill", [&](auto& in) { return masked_fill(in[0], c, in[1]); }, {leaf({5, 4, 6}, gpu()), leaf({}, gpu())});
  Tensor away = Tensor::from_vector<double>({-3, -0.7, 0.2, 0.9, 2.5, -1.6}).to(gpu()).requires_grad_();
  expect_gradcheck("clamp", [](auto& in) { return clamp(in[0], -1.0, 1.0); }, {away});
  // The gradient at the bounds themselves is 1, as PyTorch's.
  Tensor b = Tensor::from_vector<double>({-1.5, -1, -0.5, 1, 1.5}).to(gpu()).requires_grad_();
  clamp(b, -1.0, 1.0).sum().backward();
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 1, 0}));
}

TEST(CudaIndexSelect, ForwardAndAtomicBackwardMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Many repeats of few rows: the atomics of the backward meet on every element.
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    Tensor index = random_ints({300}, 5);
    expect_cpu_cuda_agree("index_select", [&](auto& in) { return index_select(in[0], dim, in[1]); },
                          {narrow(randn({5, 6, 7}), dim, 0, 5), index}, 1e-3);
  }
  Tensor index = Tensor::from_vector<int64_t>({1, 0, 1, 3}).to(gpu());
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    expect_gradcheck("index_select", [&](auto& in) { return index_select(in[0], dim, index); }, {leaf({4, 4, 4}, gpu())});
  }
  expect_gradcheck("index_select of a transposed view", [&](auto& in) { return index_select(in[0].t(), 1, index) * 2.0; },
                   {leaf({4, 3}, gpu())});
  // Whole slices along dim 0 (the batch gather): 16-, 8-, 4- and 1-byte units, out of range too.
  for (const Shape& shape : {Shape{50, 32}, Shape{50, 18}, Shape{50, 33}}) {
    Tensor rows_index = random_ints({70}, 50);
    expect_cpu_cuda_agree("index_select rows", [&](auto& in) { return index_select(in[0], 0, in[1]); },
                          {randn(shape), rows_index}, 1e-6);
  }
  // int64 labels (8-byte slices) and bool rows of 3 bytes, against the CPU.
  Tensor labels = random_ints({50}, 10), flags = gt(randn({50, 3}), zeros({50, 3}));
  Tensor picks = random_ints({70}, 50);
  EXPECT_EQ(index_select(labels.to(gpu()), 0, picks.to(gpu())).to_vector<int64_t>(),
            index_select(labels, 0, picks).to_vector<int64_t>());
  EXPECT_TRUE(all_equal(index_select(flags.to(gpu()), 0, picks.to(gpu())), index_select(flags, 0, picks)));
  Tensor bytes = Tensor::from_vector<float>(std::vector<float>(1 + 40 * 17, 1.5f)).to(gpu());
  Tensor unaligned = narrow(bytes, 0, 1, 40 * 17).view({40, 17});  // 68-byte slices starting 4 bytes in
  Tensor rows_picked = index_select(unaligned, 0, Tensor::from_vector<int64_t>({39, 0, 7}).to(gpu()));
  EXPECT_EQ(rows_picked.to_vector<float>(), std::vector<float>(3 * 17, 1.5f));
  Tensor beyond = index_select(randn({4, 32}, kFloat32, gpu()), 0, Tensor::from_vector<int64_t>({1, 4}).to(gpu()));
  EXPECT_THROW(beyond.to_vector<float>(), Error);
  // Hand-computed accumulation, on the device.
  Tensor x = zeros({3, 2}, kFloat64, gpu()).requires_grad_();
  index_select(x, 0, Tensor::from_vector<int64_t>({0, 2, 0}).to(gpu())).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2, 0, 0, 1, 1}));
  // An index out of range along dim 1 is found by the kernel and reported at the next sync.
  Tensor picked = index_select(randn({2, 3}, kFloat32, gpu()), 1, Tensor::from_vector<int64_t>({0, 3}).to(gpu()));
  EXPECT_THROW(picked.to_vector<float>(), Error);
  EXPECT_NO_THROW(index_select(randn({2, 3}, kFloat32, gpu()), 1, Tensor::from_vector<int64_t>({2}).to(gpu())).to_vector<float>());
}

TEST(CudaInPlaceAndViews, MatchCpuAndGradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor x = randn({4, 5}), y = randn({5});
  Tensor xg = x.to(gpu());
  xg += y.to(gpu());
  xg *= 2.0;
  xg -= 1.0;
  Tensor xc = x.clone();
  xc += y;
  xc *= 2.0;
  xc -= 1.0;
  EXPECT_TRUE(all_close(xg, xc, 1e-6, 1e-6));
  Tensor base = ones({3, 4}, kFloat32, gpu());
  base.slice(1, 1, std::nullopt, 2).zero_();
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0}));
  Tensor w = ones({3}, kFloat64, gpu()).requires_grad_();
  EXPECT_THROW(w += 1.0, Error);
  {
    NoGradGuard no_grad;
    w += 1.0;
  }
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{2, 2, 2}));
  expect_gradcheck("slice", [](auto& in) { return slice(in[0], 1, 1, std::nullopt, 2) * 3.0; }, {leaf({3, 6}, gpu())});
  expect_gradcheck("slice negative", [](auto& in) { return slice(in[0], 0, -2); }, {leaf({5, 2}, gpu())});
  expect_gradcheck("squeeze all", [](auto& in) { return in[0].squeeze() * 2.0; }, {leaf({1, 3, 1}, gpu())});
}

TEST(CudaLosses, MatchCpuInFloat32) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const int64_t n = 37, c = 11;
  Tensor t = random_ints({n}, c);
  std::vector<int64_t> tv = t.to_vector<int64_t>();
  for (int64_t i = 0; i < n; i += 4) tv[i] = -100;  // ignored rows
  Tensor ti = Tensor::from_vector(tv);
  Tensor w = uniform({c}, 0.5, 2);
  expect_cpu_cuda_agree("cross_entropy (fused)", [&](auto& in) { return cross_entropy(in[0], on(ti, in[0])); },
                        {randn({n, c}) * 3.0});
  expect_cpu_cuda_agree("cross_entropy (fused, ignore_index 3)",
                        [&](auto& in) { return cross_entropy(in[0], on(t, in[0]), {}, Reduction::Mean, 3); }, {randn({n, c})});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_cpu_cuda_agree("cross_entropy smoothing, weight",
                          [&](auto& in) { return cross_entropy(in[0], on(ti, in[0]), on(w, in[0]), r, -100, 0.1); },
                          {randn({n, c})});
    expect_cpu_cuda_agree("nll_loss weight",
                          [&](auto& in) { return nll_loss(log_softmax(in[0], 1), on(ti, in[0]), on(w, in[0]), r, -100); },
                          {randn({n, c})});
    expect_cpu_cuda_agree("l1_loss", [r](auto& in) { return l1_loss(in[0], in[1], r); }, {randn({5, 7}), randn({5, 7})});
    expect_cpu_cuda_agree("bce with logits",
                          [r](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], in[3], in[2], r); },
                          {randn({6, 4}) * 4.0, rand({6, 4}), uniform({4}, 0.5, 3), uniform({6, 1}, 0.5, 2)});
  }
  expect_cpu_cuda_agree("bce large logits",
                        [](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], {}, {}, Reduction::None); },
                        {Tensor::from_vector<float>({1000, -1000, 1000, -1000, 0, 88}), Tensor::from_vector<float>({1, 0, 0, 1, 1, 0})});
  expect_cpu_cuda_agree("log_sigmoid", [](auto& in) { return log_sigmoid(in[0]); }, {randn({1000}) * 30.0});
  // A training batch in one block (up to 1024 rows), and one past it (per-row kernel, then the mean).
  for (int64_t rows : {1024, 1500}) {
    Tensor tt = random_ints({rows}, 10);
    expect_cpu_cuda_agree((rows == 1024 ? "cross_entropy, 1024 rows" : "cross_entropy, 1500 rows"),
                          [&](auto& in) { return cross_entropy(in[0], on(tt, in[0])); }, {randn({rows, 10}) * 3.0});
  }
  // From 1 to 200 classes, with ignored rows among them: the one-block kernel up to 8192 logits
  // (1, 3 and 17 classes here), a warp per row past it (1, 2, 4 and 8 logits a lane), then the mean.
  for (int64_t classes : {1, 3, 17, 32, 50, 64, 113, 200}) {
    std::vector<int64_t> targets = random_ints({300}, classes).to_vector<int64_t>();
    for (size_t i = 0; i < targets.size(); i += 7) targets[i] = -100;
    Tensor tc = Tensor::from_vector(targets);
    const std::string what = "cross_entropy, " + std::to_string(classes) + " classes";
    expect_cpu_cuda_agree(what.c_str(),
                          [&](auto& in) { return cross_entropy(in[0], on(tc, in[0])); }, {randn({300, classes}) * 3.0});
  }
  // Wide rows (the block-per-row softmax) and a batch past one block of the mean.
  Tensor tw = random_ints({600}, 1500);
  expect_cpu_cuda_agree("cross_entropy wide", [&](auto& in) { return cross_entropy(in[0], on(tw, in[0])); },
                        {randn({600, 1500})}, 1e-3);
}

TEST(CudaLosses, GradcheckFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor t = Tensor::from_vector<int64_t>({2, -100, 0, 4}).to(gpu());
  Tensor w = uniform({5}, 0.5, 2, kFloat64).to(gpu());
  expect_gradcheck("cross_entropy fused, ignore_index", [&](auto& in) { return cross_entropy(in[0], t); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("cross_entropy sum", [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::Sum); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("cross_entropy none", [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::None); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("cross_entropy smoothing",
                   [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::Mean, -100, 0.1); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("cross_entropy weight, smoothing",
                   [&](auto& in) { return cross_entropy(in[0], t, w, Reduction::Mean, -100, 0.2); }, {leaf({4, 5}, gpu())});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck("nll_loss weight", [&](auto& in) { return nll_loss(in[0], t, w, r, -100); }, {leaf({4, 5}, gpu())});
    expect_gradcheck("l1_loss", [r](auto& in) { return l1_loss(in[0], in[1], r); }, {leaf({3, 4}, gpu()), leaf({3, 4}, gpu())});
  }
  expect_gradcheck("bce with logits, pos_weight, weight",
                   [](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], in[3], in[2], Reduction::Mean); },
                   {leaf({3, 4}, gpu()), rand({3, 4}, kFloat64).to(gpu()).requires_grad_(),
                    uniform({4}, 0.5, 2, kFloat64).to(gpu()).requires_grad_(),
                    uniform({3, 1}, 0.5, 2, kFloat64).to(gpu()).requires_grad_()});
  expect_gradcheck("log_sigmoid", [](auto& in) { return log_sigmoid(in[0]); }, {leaf({2, 5}, gpu())});
}

// The gradient the forward writes and a backward from the loss takes as it is, on both kernel paths
// (one block up to 1024 rows, three passes beyond), against the CPU's, with ignored rows.
TEST(CudaLosses, CrossEntropyGradientFromItsOwnSeed) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (int64_t rows : {64, 1500}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    Tensor x = randn({rows, 10}, kFloat64) * 3.0;
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = i % 9 == 4 ? -100 : static_cast<int64_t>((i * 7 + 3) % 10);
    Tensor t = Tensor::from_vector(labels);
    std::vector<Tensor> grads;
    for (Device d : {Device::cpu(), gpu()}) {
      Tensor leaf = x.to(d).detach().requires_grad_();
      cross_entropy(leaf, t.to(d)).backward();
      grads.push_back(leaf.grad().to(Device::cpu()));
      Tensor scaled = leaf.detach().requires_grad_();
      cross_entropy(scaled, t.to(d)).backward(full({}, 0.5, kFloat64, d));
      EXPECT_TRUE(all_close(scaled.grad().to(Device::cpu()), grads.back() * 0.5, 1e-15, 1e-15)) << d;
    }
    EXPECT_TRUE(all_close(grads[1], grads[0], 1e-13, 1e-13));
  }
}

TEST(CudaLosses, IgnoredTargetsRaiseNothingAndBadOnesStillDo) {
  MINIDL_REQUIRE_CUDA();
  Tensor logits = randn({4, 10}, kFloat32, gpu());
  Tensor ignored = Tensor::from_vector<int64_t>({1, -100, 9, -100}).to(gpu());
  const float both = cross_entropy(logits, ignored).item<float>();  // no device error for -100
  const float first = cross_entropy(narrow(logits, 0, 0, 1), narrow(ignored, 0, 0, 1)).item<float>();
  const float third = cross_entropy(narrow(logits, 0, 2, 1), narrow(ignored, 0, 2, 1)).item<float>();
  EXPECT_NEAR(both, (first + third) / 2, 1e-5);
  EXPECT_NO_THROW(nll_loss(log_softmax(logits, 1), ignored, {}, Reduction::Sum).item<float>());
  EXPECT_TRUE(std::isnan(cross_entropy(logits, full({4}, -100, kInt64, gpu())).item<float>()));
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    SCOPED_TRACE(op);
    Tensor bad = Tensor::from_vector<int64_t>({1, -100, 10, 3}).to(gpu());
    Tensor loss = std::string(op) == "nll_loss" ? nll_loss(logits, bad) : cross_entropy(logits, bad);
    try {
      loss.item<float>();
      ADD_FAILURE() << "a target out of range went unreported";
    } catch (const Error& e) {
      // The op, the sample and its target, and the range, from the kernel that found it.
      for (const std::string& part : {std::string(op) + " on cuda:0", std::string("target 10 of sample 2"),
                                     std::string("expected 0 <= target < 10 classes")})
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  // A warp per row (past one block's 1024 rows) reports one as well.
  std::vector<int64_t> many(1500, 5);
  many[777] = 113;
  try {
    cross_entropy(randn({1500, 113}, kFloat32, gpu()), Tensor::from_vector(many).to(gpu())).item<float>();
    ADD_FAILURE() << "a target out of range went unreported by the per-row kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 113 of sample 777"), std::string::npos) << e.what();
  }
  // The module path moves its weight buffer with the module.
  nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().weight(uniform({10}, 0.5, 2)).label_smoothing(0.1));
  criterion->to(gpu());
  EXPECT_TRUE(std::isfinite(criterion(logits, ignored).item<float>()));
}

}  // namespace minidl::cuda_compare_losses_test
