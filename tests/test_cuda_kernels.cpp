// Every CUDA kernel against its CPU twin (ops/cpu/, the reference) on the same fresh random inputs:
// float32 within atol = rtol = 1e-3, float64 within 1e-9, integers and indices exactly. Each test
// skips, saying why, where no CUDA device is usable.
#include <array>
#include <cmath>
#include <limits>

#include "ops/kernels.h"
#include "test_cuda_util.h"

#ifdef MINIDL_WITH_CUDA
#include <atomic>
#include <chrono>
#include <thread>

#include "core/cuda/context.h"
#include "ops/cuda/timing.h"
#endif

namespace minidl::cuda_kernels_test {

using namespace minidl::testing;

namespace {

Kernels& cpu_k() { return kernels_for(Device::cpu()); }
Kernels& gpu_k() { return kernels_for(gpu()); }

Tensor empty_on(const Shape& shape, DType dtype, Device device) { return Tensor::empty(shape, dtype, device); }

// A random tensor of `dtype` on the CPU: standard normal, or uniform on [lo, hi).
Tensor rnd(const Shape& shape, DType dtype = kFloat32) { return randn(shape, dtype); }
Tensor positive(const Shape& shape, DType dtype) { return uniform(shape, 0.1, 3.0, dtype); }

// Random int64 in [0, n).
Tensor random_ints(const Shape& shape, int64_t n) {
  std::vector<double> u = rand(shape, kFloat64).to_vector<double>();
  std::vector<int64_t> v(u.size());
  for (size_t i = 0; i < u.size(); ++i) v[i] = std::min<int64_t>(n - 1, static_cast<int64_t>(u[i] * n));
  return Tensor::from_vector(v, shape);
}

const DType kFloats[] = {kFloat32, kFloat64};

}  // namespace

TEST(CudaKernels, CopyAnyStridesAndDtypes) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType from : {kFloat32, kFloat64, kInt64}) {
    for (DType to : {kFloat32, kFloat64, kInt64}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      Tensor base = from == kInt64 ? random_ints({3, 4, 5}, 1000) : rnd({3, 4, 5}, from);
      Tensor src_cpu = base.permute({2, 0, 1});  // non-contiguous
      Tensor src_gpu = base.to(gpu()).permute({2, 0, 1});
      Tensor out_cpu = empty_on(src_cpu.shape(), to, Device::cpu());
      Tensor out_gpu = empty_on(src_cpu.shape(), to, gpu());
      cpu_k().copy(src_cpu, out_cpu);
      gpu_k().copy(src_gpu, out_gpu);
      EXPECT_TRUE(all_equal(out_gpu, out_cpu));
      // Strided destination too: write into a transposed view.
      Tensor dst_cpu = zeros({5, 3, 4}, to).transpose(0, 2);
      Tensor dst_gpu = zeros({5, 3, 4}, to, gpu()).transpose(0, 2);
      Tensor s2_cpu = from == kInt64 ? random_ints({4, 3, 5}, 1000) : rnd({4, 3, 5}, from);
      ASSERT_EQ(s2_cpu.shape(), dst_cpu.shape());
      Tensor s2_gpu = s2_cpu.to(gpu());
      cpu_k().copy(s2_cpu, dst_cpu);
      gpu_k().copy(s2_gpu, dst_gpu);
      EXPECT_TRUE(all_equal(dst_gpu, dst_cpu));
    }
  }
  // The contiguous same-dtype fast path, and a large one (64-bit index path is not reached, but many blocks).
  Tensor big = rnd({1 << 20});
  Tensor out = empty_on(big.shape(), kFloat32, gpu());
  gpu_k().copy(big.to(gpu()), out);
  EXPECT_TRUE(all_equal(out, big));
}

TEST(CudaKernels, CopyMergesDimsAndSplitsBeyondEight) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // 10 dims, a transposed pair and a broadcast one: merging the dims that step together in every
  // operand leaves few enough for the strided walk.
  Tensor base = rnd({2, 3, 2, 2, 2, 2, 2, 1, 2, 3}, kFloat64);
  Tensor view_cpu = expand(base.transpose(0, 1), {3, 2, 2, 2, 2, 2, 2, 4, 2, 3});
  Tensor view_gpu = expand(base.to(gpu()).transpose(0, 1), view_cpu.shape());
  Tensor out_cpu = empty_on(view_cpu.shape(), kFloat64, Device::cpu());
  Tensor out_gpu = empty_on(view_cpu.shape(), kFloat64, gpu());
  cpu_k().copy(view_cpu, out_cpu);
  gpu_k().copy(view_gpu, out_gpu);
  EXPECT_TRUE(all_equal(out_gpu, out_cpu));
  // Nine dims that cannot merge (every other one broadcast) are past the strided walk's eight: the
  // copy splits them along the outer dim, and must still give the CPU's answer.
  Tensor small = rnd({2, 1, 3, 1, 2, 1, 2, 1, 3});
  const Shape wide = {2, 2, 3, 2, 2, 2, 2, 2, 3};
  Tensor alternating_cpu = expand(small, wide), alternating_gpu = expand(small.to(gpu()), wide);
  Tensor expected = empty_on(wide, kFloat32, Device::cpu()), out = empty_on(wide, kFloat32, gpu());
  cpu_k().copy(alternating_cpu, expected);
  gpu_k().copy(alternating_gpu, out);
  EXPECT_TRUE(all_equal(out, expected));
}

TEST(CudaKernels, FillAndIndexSelect) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    for (double v : {0.0, -2.5, 7.0}) {
      Tensor a = empty_on({17, 3}, dt, Device::cpu()), b = empty_on({17, 3}, dt, gpu());
      cpu_k().fill(a, v);
      gpu_k().fill(b, v);
      EXPECT_TRUE(all_equal(b, a)) << dt << " " << v;
    }
  }
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    Tensor src = dt == kInt64 ? random_ints({50, 4, 3}, 100) : rnd({50, 4, 3}, dt);
    Tensor index = random_ints({64}, 50);
    Tensor a = empty_on({64, 4, 3}, dt, Device::cpu()), b = empty_on({64, 4, 3}, dt, gpu());
    cpu_k().index_select(src, 0, index, a);
    gpu_k().index_select(src.to(gpu()), 0, index.to(gpu()), b);
    EXPECT_TRUE(all_equal(b, a)) << dt;
  }
}

TEST(CudaKernels, UnaryOps) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const UnaryOp ops[] = {UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt,
                         UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh};
  for (DType dt : kFloats) {
    for (UnaryOp op : ops) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " op " + std::to_string(static_cast<int>(op)));
      const bool needs_positive = op == UnaryOp::Log || op == UnaryOp::Sqrt;
      Tensor x = needs_positive ? positive({33, 65}, dt) : rnd({33, 65}, dt);
      for (bool strided : {false, true}) {
        Tensor xc = strided ? x.t() : x;
        Tensor xg = strided ? x.to(gpu()).t() : x.to(gpu());
        Tensor a = empty_on(xc.shape(), dt, Device::cpu()), b = empty_on(xc.shape(), dt, gpu());
        cpu_k().unary(op, xc, a);
        gpu_k().unary(op, xg, b);
        EXPECT_TRUE(all_close(b, a, tol(dt), tol(dt))) << (strided ? "strided" : "contiguous");
      }
    }
  }
  // int64: Neg only; in place (out is x).
  Tensor i = random_ints({100}, 50);
  Tensor ig = i.to(gpu());
  gpu_k().unary(UnaryOp::Neg, ig, ig);
  Tensor ic = i.clone();
  cpu_k().unary(UnaryOp::Neg, ic, ic);
  EXPECT_TRUE(all_equal(ig, ic));
}

TEST(CudaKernels, BinaryOpsWithBroadcasting) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow,
                          BinaryOp::Eq, BinaryOp::ReluBackward, BinaryOp::SigmoidBackward, BinaryOp::TanhBackward};
  struct Case {
    Shape a, b;
  };
  // The last three take the vector walks: 4 (or 8) elements a thread with a broadcast row, 2 with a
  // broadcast middle dim, and a value repeated along the innermost dim.
  const Case cases[] = {{{64, 129}, {64, 129}}, {{64, 129}, {129}}, {{7, 1, 5}, {1, 6, 5}},
                        {{}, {3, 4}},           {{2, 3, 4, 5}, {3, 1, 5}}, {{6, 8, 12}, {8, 12}},
                        {{4, 3, 6}, {4, 1, 6}}, {{5, 8}, {5, 1}}};
  for (DType dt : kFloats) {
    for (BinaryOp op : ops) {
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " op " + std::to_string(static_cast<int>(op)));
        Tensor a = op == BinaryOp::Pow ? positive(c.a, dt) : rnd(c.a, dt);
        Tensor b = op == BinaryOp::Div ? positive(c.b, dt) : rnd(c.b, dt);
        if (op == BinaryOp::Eq) b = random_ints(c.b, 3).to(dt), a = random_ints(c.a, 3).to(dt);
        Shape shape = broadcast_shapes(a.shape(), b.shape(), "test");
        Tensor out_c = empty_on(shape, dt, Device::cpu()), out_g = empty_on(shape, dt, gpu());
        cpu_k().binary(op, expand(a, shape), expand(b, shape), out_c);
        gpu_k().binary(op, expand(a.to(gpu()), shape), expand(b.to(gpu()), shape), out_g);
        EXPECT_TRUE(all_close(out_g, out_c, tol(dt), tol(dt))) << "shapes " << shape_str(c.a) << " and " << shape_str(c.b);
      }
    }
  }
  // A transposed operand, and out aliasing a (in place).
  Tensor a = rnd({40, 30}), b = rnd({30, 40});
  Tensor ac = a.clone(), ag = a.to(gpu());
  cpu_k().binary(BinaryOp::Mul, ac, b.t(), ac);
  gpu_k().binary(BinaryOp::Mul, ag, b.to(gpu()).t(), ag);
  EXPECT_TRUE(all_close(ag, ac, 1e-6, 1e-6));
  // int64 Eq.
  Tensor x = random_ints({1000}, 4), y = random_ints({1000}, 4);
  Tensor eq_c = empty_on({1000}, kInt64, Device::cpu()), eq_g = empty_on({1000}, kInt64, gpu());
  cpu_k().binary(BinaryOp::Eq, x, y, eq_c);
  gpu_k().binary(BinaryOp::Eq, x.to(gpu()), y.to(gpu()), eq_g);
  EXPECT_TRUE(all_equal(eq_g, eq_c));
}

TEST(CudaKernels, ReduceSumAndMax) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  struct Case {
    int64_t outer, n, inner;
  };
  // Rows (inner == 1): small, many, at the warp-per-row limit and past it, long (split into
  // partials); columns (inner > 1): bias grads, middle dims, long columns, a few columns (one
  // kernel of their own up to 16, past 65535 slabs too); empty reductions.
  const Case cases[] = {{64, 10, 1},   {1000, 37, 1}, {3001, 576, 1}, {9, 1024, 1}, {9, 1025, 1},
                        {1, 300000, 1}, {3, 70000, 1}, {1, 64, 10},   {5, 7, 13},   {2, 5000, 33},
                        {1, 1, 1},      {4, 1, 9},     {1, 3, 100000}, {1, 512, 10}, {3, 2000, 2},
                        {2, 300, 16},   {1, 5, 16},    {70000, 3, 4}};
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " [" + std::to_string(c.outer) + ", " + std::to_string(c.n) + ", " +
                   std::to_string(c.inner) + "]");
      Tensor x = dt == kInt64 ? random_ints({c.outer, c.n, c.inner}, 1000) : rnd({c.outer, c.n, c.inner}, dt);
      Tensor xg = x.to(gpu());
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
        Tensor oc = empty_on({c.outer, c.inner}, dt, Device::cpu()), og = empty_on({c.outer, c.inner}, dt, gpu());
        Tensor ic = empty_on({c.outer, c.inner}, kInt64, Device::cpu()), ig = empty_on({c.outer, c.inner}, kInt64, gpu());
        cpu_k().reduce(op, x, c.outer, c.n, c.inner, oc, op == ReduceOp::Max ? &ic : nullptr);
        gpu_k().reduce(op, xg, c.outer, c.n, c.inner, og, op == ReduceOp::Max ? &ig : nullptr);
        const double t = dt == kFloat32 ? 1e-3 : 1e-9;
        EXPECT_TRUE(all_close(og, oc, t, t)) << (op == ReduceOp::Sum ? "sum" : "max");
        // Integer maxima may tie: the first one must win on both.
        if (op == ReduceOp::Max) {
          EXPECT_TRUE(all_equal(ig, ic)) << "argmax";
        }
      }
    }
  }
  // Empty sum: zeros.
  Tensor e = empty_on({3, 0, 2}, kFloat32, gpu());
  Tensor s = empty_on({3, 2}, kFloat32, gpu());
  gpu_k().reduce(ReduceOp::Sum, e, 3, 0, 2, s, nullptr);
  EXPECT_TRUE(all_equal(s, zeros({3, 2})));
}

TEST(CudaKernels, MaxTiesAndNaN) {
  MINIDL_REQUIRE_CUDA();
  // Ties: the first maximum wins. NaN: the first NaN wins, as on the CPU.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(5000, 1.0f);
  v[1234] = 3.0f;
  v[4000] = 3.0f;
  for (int64_t inner : {1, 5}) {
    Tensor x = Tensor::from_vector(v, {1, 5000 / inner, inner});
    Tensor xn = x.clone();
    xn.data<float>()[2000] = nan;
    xn.data<float>()[3000] = nan;
    for (const Tensor& in : {x, xn}) {
      Tensor oc = empty_on({1, inner}, kFloat32, Device::cpu()), og = empty_on({1, inner}, kFloat32, gpu());
      Tensor ic = empty_on({1, inner}, kInt64, Device::cpu()), ig = empty_on({1, inner}, kInt64, gpu());
      cpu_k().reduce(ReduceOp::Max, in, 1, 5000 / inner, inner, oc, &ic);
      gpu_k().reduce(ReduceOp::Max, in.to(gpu()), 1, 5000 / inner, inner, og, &ig);
      EXPECT_TRUE(all_equal(og, oc)) << "inner " << inner;
      EXPECT_TRUE(all_equal(ig, ic)) << "inner " << inner;
    }
  }
}

TEST(CudaKernels, GemmAllTransposesAndBatches) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const int64_t m = 37, k = 53, n = 29, batch = 3;
  for (DType dt : kFloats) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (int mode = 0; mode < 4; ++mode) {  // 0: 2-D; 1: both batched; 2: a shared; 3: b shared
          SCOPED_TRACE(std::string(dtype_name(dt)) + " ta " + std::to_string(ta) + " tb " + std::to_string(tb) +
                       " mode " + std::to_string(mode));
          const bool a3 = mode == 1 || mode == 3, b3 = mode == 1 || mode == 2;
          Shape as = ta ? Shape{k, m} : Shape{m, k};
          Shape bs = tb ? Shape{n, k} : Shape{k, n};
          if (a3) as.insert(as.begin(), batch);
          if (b3) bs.insert(bs.begin(), batch);
          Shape cs = mode == 0 ? Shape{m, n} : Shape{batch, m, n};
          Tensor a = rnd(as, dt), b = rnd(bs, dt), c0 = rnd(cs, dt);
          for (auto [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{0.5, 1.0}, std::pair{-2.0, 0.25}}) {
            Tensor cc = c0.clone(), cg = c0.to(gpu());
            cpu_k().gemm(a, ta, b, tb, cc, alpha, beta);
            gpu_k().gemm(a.to(gpu()), ta, b.to(gpu()), tb, cg, alpha, beta);
            EXPECT_TRUE(all_close(cg, cc, tol(dt), tol(dt))) << "alpha " << alpha << " beta " << beta;
          }
        }
      }
    }
  }
  // beta = 0 must ignore whatever C held (NaN included).
  Tensor a = rnd({8, 4}), b = rnd({4, 6});
  Tensor cg = full({8, 6}, std::nan(""), kFloat32, gpu()), cc = empty_on({8, 6}, kFloat32, Device::cpu());
  cpu_k().gemm(a, false, b, false, cc, 1, 0);
  gpu_k().gemm(a.to(gpu()), false, b.to(gpu()), false, cg, 1, 0);
  EXPECT_TRUE(all_close(cg, cc, 1e-4, 1e-4));
}

TEST(CudaKernels, SoftmaxForwardBackward) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  struct Case {
    int64_t outer, n, inner;
  };
  // Warp rows, block rows (n > 1024), columns (inner > 1).
  const Case cases[] = {{64, 10, 1}, {3, 1, 1}, {5, 3000, 1}, {4, 5, 6}, {2, 7, 300}};
  for (DType dt : kFloats) {
    for (const Case& c : cases) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (log ? " log_softmax" : " softmax") + " [" +
                     std::to_string(c.outer) + ", " + std::to_string(c.n) + ", " + std::to_string(c.inner) + "]");
        Shape s{c.outer, c.n, c.inner};
        Tensor x = rnd(s, dt) * 4.0, g = rnd(s, dt);
        Tensor yc = empty_on(s, dt, Device::cpu()), yg = empty_on(s, dt, gpu());
        cpu_k().softmax(x, c.outer, c.n, c.inner, log, yc);
        gpu_k().softmax(x.to(gpu()), c.outer, c.n, c.inner, log, yg);
        EXPECT_TRUE(all_close(yg, yc, tol(dt), tol(dt))) << "forward";
        Tensor gc = empty_on(s, dt, Device::cpu()), gg = empty_on(s, dt, gpu());
        cpu_k().softmax_backward(g, yc, c.outer, c.n, c.inner, log, gc);
        gpu_k().softmax_backward(g.to(gpu()), yc.to(gpu()), c.outer, c.n, c.inner, log, gg);
        EXPECT_TRUE(all_close(gg, gc, tol(dt), tol(dt))) << "backward";
      }
    }
  }
}

TEST(CudaKernels, LossesForwardBackward) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  struct Case {
    int64_t n, c;
  };
  const Case cases[] = {{64, 10}, {1, 3}, {1000, 10}, {7, 2000}};
  for (DType dt : kFloats) {
    for (const Case& cs : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " N " + std::to_string(cs.n) + " C " + std::to_string(cs.c));
      Tensor logits = rnd({cs.n, cs.c}, dt) * 3.0;
      Tensor target = random_ints({cs.n}, cs.c);
      // Fused cross-entropy, with and without its gradient.
      const int64_t ignore = -100;
      Tensor lc = empty_on({}, dt, Device::cpu()), lg = empty_on({}, dt, gpu()), lg2 = empty_on({}, dt, gpu());
      Tensor cc = empty_on({}, dt, Device::cpu()), cg = empty_on({}, dt, gpu()), cg2 = empty_on({}, dt, gpu());
      Tensor gc = empty_on({cs.n, cs.c}, dt, Device::cpu()), gg = empty_on({cs.n, cs.c}, dt, gpu());
      cpu_k().cross_entropy(logits, target, ignore, lc, cc, &gc);
      gpu_k().cross_entropy(logits.to(gpu()), target.to(gpu()), ignore, lg, cg, &gg);
      gpu_k().cross_entropy(logits.to(gpu()), target.to(gpu()), ignore, lg2, cg2, nullptr);
      EXPECT_TRUE(all_close(lg, lc, tol(dt), tol(dt))) << "cross_entropy loss";
      EXPECT_TRUE(all_equal(lg2, lg)) << "cross_entropy loss without the gradient";
      EXPECT_TRUE(all_equal(cg, cc)) << "cross_entropy count";
      EXPECT_TRUE(all_close(gg, gc, tol(dt), tol(dt))) << "cross_entropy gradient";
      Tensor pc = log_softmax(logits, 1);
      // NLL rows on the same log-probs.
      Tensor nc = empty_on({cs.n}, dt, Device::cpu()), ng = empty_on({cs.n}, dt, gpu());
      Tensor wc = empty_on({}, dt, Device::cpu()), wg = empty_on({}, dt, gpu());
      cpu_k().nll_loss(pc, target, nullptr, ignore, nc, wc);
      gpu_k().nll_loss(pc.to(gpu()), target.to(gpu()), nullptr, ignore, ng, wg);
      EXPECT_TRUE(all_close(ng, nc, tol(dt), tol(dt))) << "nll_loss";
      EXPECT_TRUE(all_equal(wg, wc)) << "nll_loss total weight";
      Tensor grad_rows = full({cs.n}, 0.7, dt);
      Tensor bc = empty_on({cs.n, cs.c}, dt, Device::cpu()), bg = empty_on({cs.n, cs.c}, dt, gpu());
      cpu_k().nll_loss_backward(grad_rows, target, nullptr, ignore, bc);
      gpu_k().nll_loss_backward(grad_rows.to(gpu()), target.to(gpu()), nullptr, ignore, bg);
      EXPECT_TRUE(all_close(bg, bc, tol(dt), tol(dt))) << "nll_loss backward";
    }
  }
}

namespace {

ConvGeometry geometry(int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                      int64_t pw, int64_t dh, int64_t dw) {
  ConvGeometry g{};
  g.channels = c, g.height = h, g.width = w, g.kernel_h = kh, g.kernel_w = kw, g.stride_h = sh, g.stride_w = sw;
  g.pad_h = ph, g.pad_w = pw, g.dilation_h = dh, g.dilation_w = dw;
  g.out_h = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  g.out_w = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  return g;
}

const ConvGeometry kConvGeometries[] = {
    geometry(1, 28, 28, 3, 3, 1, 1, 0, 0, 1, 1),  // MNIST conv1
    geometry(3, 7, 5, 3, 2, 1, 1, 1, 1, 1, 1),    // odd, non-square, padding
    geometry(2, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1),    // stride 2
    geometry(2, 9, 7, 3, 3, 1, 1, 2, 2, 2, 2),    // dilation 2
    geometry(3, 8, 6, 2, 3, 2, 1, 0, 2, 1, 1),    // stride (2, 1), padding (0, 2)
    geometry(2, 4, 4, 2, 2, 3, 3, 1, 1, 1, 1),    // stride > kernel
};

}  // namespace

TEST(CudaKernels, Im2colCol2im) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dt : kFloats) {
    for (const ConvGeometry& g : kConvGeometries) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C " + std::to_string(g.channels) + " " + std::to_string(g.height) +
                   "x" + std::to_string(g.width) + " k " + std::to_string(g.kernel_h) + "x" +
                   std::to_string(g.kernel_w) + " s " + std::to_string(g.stride_h) + " p " + std::to_string(g.pad_h) +
                   " d " + std::to_string(g.dilation_h));
      const int64_t n = 3, k = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w;
      Tensor x = rnd({n, g.channels, g.height, g.width}, dt);
      Tensor cc = empty_on({n, k, l}, dt, Device::cpu()), cg = empty_on({n, k, l}, dt, gpu());
      cpu_k().im2col(x, g, cc);
      gpu_k().im2col(x.to(gpu()), g, cg);
      EXPECT_TRUE(all_equal(cg, cc)) << "im2col";
      Tensor cols = rnd({n, k, l}, dt);
      Tensor xc = empty_on(x.shape(), dt, Device::cpu()), xg = full(x.shape(), 123.0, dt, gpu());  // overwritten
      cpu_k().col2im(cols, g, xc);
      gpu_k().col2im(cols.to(gpu()), g, xg);
      EXPECT_TRUE(all_close(xg, xc, tol(dt), tol(dt))) << "col2im";
    }
  }
}

TEST(CudaKernels, MaxPool2dForwardBackward) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const ConvGeometry pools[] = {
      geometry(4, 24, 24, 2, 2, 2, 2, 0, 0, 1, 1),  // MNIST CNN: windows tile the input
      geometry(2, 6, 9, 2, 3, 2, 3, 0, 0, 1, 1),    // tiling, non-square windows
      geometry(2, 7, 7, 2, 2, 2, 2, 0, 0, 1, 1),    // stride = kernel, a row and column left over
      geometry(3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1),    // overlapping windows with padding
      geometry(2, 8, 5, 3, 2, 1, 2, 1, 0, 1, 1),    // stride 1 (heavy overlap), non-square
      geometry(2, 9, 9, 2, 2, 2, 2, 1, 1, 2, 2),    // dilation
  };
  for (DType dt : kFloats) {
    for (const ConvGeometry& g : pools) {
      const int64_t n = 3;
      Tensor x = rnd({n, g.channels, g.height, g.width}, dt);
      Shape os{n, g.channels, g.out_h, g.out_w};
      Tensor oc = empty_on(os, dt, Device::cpu()), og = empty_on(os, dt, gpu());
      Tensor ic = empty_on(os, kInt64, Device::cpu()), ig = empty_on(os, kInt64, gpu());
      cpu_k().max_pool2d(x, g, oc, ic);
      gpu_k().max_pool2d(x.to(gpu()), g, og, ig);
      EXPECT_TRUE(all_equal(og, oc));
      EXPECT_TRUE(all_equal(ig, ic));
      Tensor go = rnd(os, dt);
      Tensor gc = empty_on(x.shape(), dt, Device::cpu()), gg = full(x.shape(), 5.0, dt, gpu());
      cpu_k().max_pool2d_backward(go, ic, g, gc);
      gpu_k().max_pool2d_backward(go.to(gpu()), ig, g, gg);
      EXPECT_TRUE(all_close(gg, gc, tol(dt), tol(dt)));
    }
  }
}

TEST(CudaKernels, MultiTensorSgdEqualsTheCpuStepPerParameter) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // 30 parameters (more than one launch takes), sizes from empty to several blocks' worth.
  const int64_t sizes[] = {1, 7, 0, 2048, 2049, 5000, 100000, 3};
  for (DType dt : kFloats) {
    for (const SgdConfig& c : {SgdConfig{0.1, 0.0, 0.0, 0.0, false, false}, SgdConfig{0.01, 0.9, 0.1, 1e-4, false, false},
                               SgdConfig{0.05, 0.8, 0.0, 0.0, true, true}}) {
      std::vector<Tensor> params, grads, bufs, ref_params, ref_grads, ref_bufs;
      for (int i = 0; i < 30; ++i) {
        const int64_t n = sizes[i % 8];
        ref_params.push_back(rnd({n}, dt));
        ref_grads.push_back(rnd({n}, dt));
        params.push_back(ref_params.back().to(gpu()));
        grads.push_back(ref_grads.back().to(gpu()));
        if (c.momentum != 0) {
          ref_bufs.push_back(rnd({n}, dt));
          bufs.push_back(ref_bufs.back().to(gpu()));
        }
      }
      gpu_k().sgd_step_multi(params, grads, bufs, c);
      for (int i = 0; i < 30; ++i)
        cpu_k().sgd_step(ref_params[i], ref_grads[i], c.momentum != 0 ? &ref_bufs[i] : nullptr, c);
      for (int i = 0; i < 30; ++i) {
        EXPECT_TRUE(all_close(params[i], ref_params[i], tol(dt), tol(dt))) << "parameter " << i << " momentum " << c.momentum;
        if (c.momentum != 0) {
          EXPECT_TRUE(all_close(bufs[i], ref_bufs[i], tol(dt), tol(dt))) << "buffer " << i;
        }
      }
    }
  }
}

TEST(CudaKernels, OptimizerSteps) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dt : kFloats) {
    const SgdConfig sgds[] = {{0.1, 0.0, 0.0, 0.0, false, false},
                              {0.01, 0.9, 0.0, 1e-4, false, true},
                              {0.01, 0.9, 0.1, 1e-4, false, false},
                              {0.05, 0.8, 0.0, 0.0, true, false}};
    for (const SgdConfig& c : sgds) {
      Tensor p = rnd({1000}, dt), g = rnd({1000}, dt), buf = rnd({1000}, dt);
      Tensor pc = p.clone(), bc = buf.clone(), pg = p.to(gpu()), bg = buf.to(gpu());
      const bool mom = c.momentum != 0;
      cpu_k().sgd_step(pc, g, mom ? &bc : nullptr, c);
      gpu_k().sgd_step(pg, g.to(gpu()), mom ? &bg : nullptr, c);
      EXPECT_TRUE(all_close(pg, pc, tol(dt), tol(dt))) << "sgd lr " << c.lr << " momentum " << c.momentum;
      if (mom) {
        EXPECT_TRUE(all_close(bg, bc, tol(dt), tol(dt))) << "momentum buffer";
      }
    }
    const AdamConfig adams[] = {{1e-3, 0.9, 0.999, 1e-8, 0.0, false, 1},
                                {1e-2, 0.8, 0.99, 1e-6, 1e-2, false, 5},
                                {1e-3, 0.9, 0.999, 1e-8, 1e-2, true, 3}};
    for (const AdamConfig& c : adams) {
      Tensor p = rnd({1000}, dt), g = rnd({1000}, dt), m = rnd({1000}, dt), v = positive({1000}, dt);
      Tensor pc = p.clone(), mc = m.clone(), vc = v.clone();
      Tensor pg = p.to(gpu()), mg = m.to(gpu()), vg = v.to(gpu());
      cpu_k().adam_step(pc, g, mc, vc, c);
      gpu_k().adam_step(pg, g.to(gpu()), mg, vg, c);
      EXPECT_TRUE(all_close(pg, pc, tol(dt), tol(dt))) << "adam step " << c.step;
      EXPECT_TRUE(all_close(mg, mc, tol(dt), tol(dt)));
      EXPECT_TRUE(all_close(vg, vc, tol(dt), tol(dt)));
    }
  }
}

namespace {

// Philox4x32-10 on the host (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
// ten rounds of two 32 x 32 -> 64-bit products, the key bumped by the Weyl constants between rounds.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1, uint32_t(p0)};
  }
  return c;
}

}  // namespace

// A fill's element i is the 32-bit draw at position offset + i of the seed's Philox stream (word
// p % 4 of the block at counter p / 4), as curand_init and curand4 give it: float32 uniform draws
// against the host's Philox, for the first fill after manual_seed, the fill after it, and one from
// an offset inside a block (a restored state), where the kernels take curand_init's own path.
TEST(CudaKernels, UniformDrawsAreThePhiloxStreamAtTheGeneratorsOffset) {
  MINIDL_REQUIRE_CUDA();
  const uint64_t seed = 0x0123456789abcdefull;
  auto expect_stream = [&](const Tensor& t, uint64_t offset) {
    const std::vector<float> v = t.cpu().to_vector<float>();
    for (int64_t i = 0; i < int64_t(v.size()); ++i) {
      const uint64_t position = offset + uint64_t(i), block = position / 4;
      const auto words =
          philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0u, 0u}, uint32_t(seed), uint32_t(seed >> 32));
      const float u = float(words[position % 4]) * 2.3283064e-10f + 2.3283064e-10f / 2.0f;  // cuRAND's (0, 1]
      ASSERT_EQ(v[i], u < 1.f ? u : 0.f) << "element " << i << " from offset " << offset;
    }
  };
  manual_seed(seed);
  const int64_t first = 1001, second = 4096;
  Tensor a = empty_on({first}, kFloat32, gpu()), b = empty_on({second}, kFloat32, gpu());
  gpu_k().uniform(a, 0, 1);
  gpu_k().uniform(b, 0, 1);
  expect_stream(a, 0);
  expect_stream(b, (first + 3) / 4 * 4);  // the first fill reserved whole blocks
  Generator::State inside = default_generator().state();
  inside.offset = 6;
  default_generator().set_state(inside);
  Tensor c = empty_on({second + 1}, kFloat32, gpu());
  gpu_k().uniform(c, 0, 1);
  expect_stream(c, 6);
}

// Random kernels draw from cuRAND's Philox, not the CPU's engine: the values differ from the CPU's,
// so they are checked for their distribution and for repeating after manual_seed.
TEST(CudaKernels, RandomDistributionsAndSeeding) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dt : kFloats) {
    const int64_t n = 1 << 18;
    Tensor u = empty_on({n}, dt, gpu());
    gpu_k().uniform(u, -2, 3);
    std::vector<double> uv = u.to(kFloat64).to_vector<double>();
    double mean = 0, lo = 1e9, hi = -1e9;
    for (double v : uv) mean += v, lo = std::min(lo, v), hi = std::max(hi, v);
    mean /= n;
    EXPECT_NEAR(mean, 0.5, 0.02);
    EXPECT_GE(lo, -2.0);
    EXPECT_LT(hi, 3.0);
    EXPECT_LT(lo, -1.99);
    EXPECT_GT(hi, 2.99);

    Tensor z = empty_on({n + 3}, dt, gpu());  // a size that is not a multiple of 4
    gpu_k().normal(z, 1.0, 2.0);
    std::vector<double> zv = z.to(kFloat64).to_vector<double>();
    double zm = 0, zs = 0;
    for (double v : zv) zm += v;
    zm /= zv.size();
    for (double v : zv) zs += (v - zm) * (v - zm);
    zs = std::sqrt(zs / zv.size());
    EXPECT_NEAR(zm, 1.0, 0.02);
    EXPECT_NEAR(zs, 2.0, 0.02);

    Tensor x = rand({n}, dt).to(gpu());
    Tensor out = empty_on({n}, dt, gpu()), mask = empty_on({n}, kBool, gpu()), grad_in = empty_on({n}, dt, gpu());
    gpu_k().dropout(x, 0.7, out, mask);
    gpu_k().dropout_backward(x, mask, 0.7, grad_in);
    std::vector<double> xv = x.to(kFloat64).to_vector<double>(), ov = out.to(kFloat64).to_vector<double>();
    std::vector<double> gv = grad_in.to(kFloat64).to_vector<double>();
    std::vector<bool> mv = mask.to(Device::cpu()).to_vector<bool>();
    int64_t kept = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      const double expected = mv[i] ? xv[i] / 0.7 : 0.0;
      ASSERT_NEAR(ov[i], expected, 1e-6 * (1 + std::abs(expected))) << i;
      ASSERT_EQ(gv[i], ov[i]) << i;  // the backward applies the same mask and scale
      kept += mv[i];
    }
    EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);
  }
  // Same seed, same draws; the next draw differs.
  manual_seed(42);
  Tensor a = randn({1001}, kFloat32, gpu());
  Tensor x = ones({500}, kFloat64).to(gpu());
  Tensor d1 = empty_on({500}, kFloat64, gpu()), m1 = empty_on({500}, kBool, gpu());
  gpu_k().dropout(x, 0.5, d1, m1);
  manual_seed(42);
  Tensor b = randn({1001}, kFloat32, gpu());
  Tensor d2 = empty_on({500}, kFloat64, gpu()), m2 = empty_on({500}, kBool, gpu());
  gpu_k().dropout(x, 0.5, d2, m2);
  EXPECT_TRUE(all_equal(a, b));
  EXPECT_TRUE(all_equal(d1, d2));
  Tensor c = randn({1001}, kFloat32, gpu());
  EXPECT_FALSE(all_equal(a, c));
  // Keep probability 1 keeps everything.
  Tensor all = empty_on({999}, kFloat32, gpu()), all_mask = empty_on({999}, kBool, gpu());
  gpu_k().dropout(ones({999}).to(gpu()), 1.0, all, all_mask);
  EXPECT_TRUE(all_equal(all, ones({999})));
}

#ifdef MINIDL_WITH_CUDA
// What is queued on a held stream waits for the release, then runs back to back: the events around
// a host pause of 20 ms measure the GPU's time, not the pause.
TEST(CudaTiming, AHeldStreamRunsWhatWasQueuedOnlyOnceReleased) {
  MINIDL_REQUIRE_CUDA();
  cudaStream_t stream;
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  {
    cuda::StreamHold hold(stream);
    ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(cudaEventQuery(stop), cudaErrorNotReady) << "the stream ran before it was released";
    hold.release();
  }
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float ms = -1;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_LT(ms, 5.0f) << "the events timed the host's pause";
  // A later hold on the same thread takes a new ticket: the earlier release does not let it go.
  {
    cuda::StreamHold hold(stream);
    ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(cudaEventQuery(stop), cudaErrorNotReady);
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

// A capture for timing keeps other threads' uploads out, as a graph's capture does: a data loader's
// batch arriving while a GEMM's first shape is timed mid-epoch reaches the device, and the staging
// buffers' events stay usable (an upload captured into the timing graph left its event recorded in
// a capture: the next upload through that buffer failed, or the process crashed).
TEST(CudaTiming, ReplayTimingKeepsAnotherThreadsUploadsOut) {
  MINIDL_REQUIRE_CUDA();
  constexpr int64_t kCount = 4096;
  std::atomic<bool> timing{true};
  std::vector<Tensor> uploaded;
  std::string upload_error;
  std::thread loader([&] {
    try {
      while ((timing || uploaded.size() < 8) && uploaded.size() < 3000) {
        const double value = static_cast<double>(uploaded.size());
        uploaded.push_back(cuda::to_device_pinned(full({kCount}, value, kFloat32), gpu()));
      }
    } catch (const std::exception& e) {
      upload_error = e.what();
    }
  });
  Tensor scratch = zeros({1024}, kFloat32, gpu());
  std::string timing_error;
  try {
    for (int r = 1; r <= 150; ++r)
      cuda::time_per_replay_us(cuda::compute_stream(gpu().index), [&] { fill_(scratch, r); }, 8, 1);
  } catch (const std::exception& e) {
    timing_error = e.what();
  }
  timing = false;
  loader.join();
  EXPECT_EQ(timing_error, "");
  ASSERT_EQ(upload_error, "");
  ASSERT_GE(uploaded.size(), 8u);
  for (size_t i = 0; i < uploaded.size(); ++i)
    ASSERT_EQ(uploaded[i].sum().item<float>(), static_cast<float>(i * kCount)) << "upload " << i;
}
#endif

}  // namespace minidl::cuda_kernels_test
