// The fused linear path on CUDA: cuBLASLt GEMMs with the bias and ReLU in the epilogue (or split
// along k, then summed with them) against the composed kernels, the one-pass ReLU and
// bias-gradient kernel against the CPU, linear_relu's float64 gradient check on the GPU, a whole
// fused MLP step against the CPU, plain GEMMs on cuBLASLt at unaligned addresses, the narrow
// layer's kernels, and linear_relu_linear's kernels against their composition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/deterministic.h"
#include "nn/nn.h"
#include "ops/kernels.h"
#include "test_cuda_util.h"

#ifdef MINIDL_WITH_CUDA
#include "ops/cuda/cublaslt.h"
#endif

namespace minidl::cuda_linear_test {

using namespace minidl::testing;

namespace {

// Calls the base class's composed gemm_bias (copy, gemm, unary) on the CUDA kernels.
void composed_gemm_bias(Kernels& k, const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& bias, bool relu,
                        Tensor& c) {
  k.Kernels::gemm_bias(a, ta, b, tb, bias, relu, c);
}

}  // namespace

TEST(CudaLinear, EpilogueGemmEqualsComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  struct Case {
    int64_t m, n, kk;
    bool ta, tb;
  };
  for (const Case& c : {Case{64, 512, 784, false, true}, Case{7, 5, 3, false, false}, Case{33, 17, 9, true, false},
                        Case{8, 12, 20, true, true}, Case{512, 256, 512, false, true},
                        // few output tiles over a long k: split along k (each layout of a and b)
                        Case{64, 128, 4096, false, true}, Case{48, 40, 2048, true, false},
                        Case{30, 20, 3072, true, true}, Case{16, 8, 8192, false, false}}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.kk) +
                   (relu ? " relu" : ""));
      // Scaled so that the outputs are about 1 whatever k: the rounding of a sum of k products
      // grows with its terms, and the tolerance is absolute near zero.
      Tensor a = (randn(c.ta ? Shape{c.kk, c.m} : Shape{c.m, c.kk}) * (1 / std::sqrt(double(c.kk)))).to(gpu());
      Tensor b = randn(c.tb ? Shape{c.n, c.kk} : Shape{c.kk, c.n}).to(gpu());
      Tensor bias = randn({c.n}).to(gpu());
      Tensor fused = Tensor::empty({c.m, c.n}, kFloat32, gpu()), composed = Tensor::empty({c.m, c.n}, kFloat32, gpu());
      k.gemm_bias(a, c.ta, b, c.tb, bias, relu, fused);
      composed_gemm_bias(k, a, c.ta, b, c.tb, bias, relu, composed);
      EXPECT_TRUE(all_close(fused, composed, 1e-4, 1e-4));
    }
  }
}

// The second call of a shape times cuBLASLt against splits of k into 2 to 32 equal slices and keeps
// the fastest (ops/cuda/matmul.cpp, gemm_bias_slices): the result of every call, before, during and
// after the timing, equals the composition. The MNIST MLP's first layer at batch 512.
TEST(CudaLinear, TimedSplitOfKEqualsComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  Tensor a = randn({512, 784}).to(gpu()), b = randn({512, 784}).to(gpu()), bias = randn({512}).to(gpu());
  Tensor composed = Tensor::empty({512, 512}, kFloat32, gpu());
  composed_gemm_bias(k, a, false, b, true, bias, true, composed);
  for (int call = 0; call < 3; ++call) {
    Tensor fused = full({512, 512}, std::nan(""), kFloat32, gpu());
    k.gemm_bias(a, false, b, true, bias, true, fused);
    EXPECT_TRUE(all_close(fused, composed, 1e-4, 1e-4)) << "call " << call;
  }
}

TEST(CudaLinear, ReluBiasBackwardMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64}) {
    // A block over all the rows (up to 1024, a last column group cut short), one slice of rows,
    // several (each block's sums finished by the last), more columns than a block.
    for (const Shape& shape : {Shape{1, 1}, Shape{64, 512}, Shape{300, 13}, Shape{5, 1000}, Shape{512, 256},
                               Shape{1024, 130}, Shape{5000, 40}}) {
      Tensor g = randn(shape, dtype), out = relu(randn(shape, dtype));
      Tensor pre = Tensor::empty(shape, dtype), gb = Tensor::empty({shape[1]}, dtype);
      kernels_for(Device::cpu()).relu_bias_backward(g, out, pre, gb);
      Tensor pre_gpu = Tensor::empty(shape, dtype, gpu()), gb_gpu = Tensor::empty({shape[1]}, dtype, gpu());
      kernels_for(gpu()).relu_bias_backward(g.to(gpu()), out.to(gpu()), pre_gpu, gb_gpu);
      EXPECT_TRUE(all_equal(pre_gpu, pre));
      EXPECT_TRUE(all_close(gb_gpu, gb, tol(dtype), tol(dtype)));
    }
  }
}

TEST(CudaLinear, GradcheckLinearRelu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Pre-activations clear of ReLU's kink: central differences across it are wrong.
  for (;;) {
    Tensor x = randn({5, 4}, kFloat64).to(gpu()), w = randn({3, 4}, kFloat64).to(gpu()), b = randn({3}, kFloat64).to(gpu());
    std::vector<double> pre = linear(x, w, b).to(Device::cpu()).to_vector<double>();
    if (std::any_of(pre.begin(), pre.end(), [](double v) { return std::abs(v) < 1e-3; })) continue;
    GradcheckResult r = gradcheck([](auto& t) { return linear_relu(t[0], t[1], t[2]); },
                                  {x.requires_grad_(), w.requires_grad_(), b.requires_grad_()});
    EXPECT_TRUE(r) << r.message;
    break;
  }
}

TEST(CudaLinear, FusedMlpStepMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  nn::Sequential cpu_net(nn::Linear(50, 40), nn::ReLU(), nn::Linear(40, 30), nn::ReLU(), nn::Linear(30, 10));
  nn::Sequential gpu_net(nn::Linear(50, 40), nn::ReLU(), nn::Linear(40, 30), nn::ReLU(), nn::Linear(30, 10));
  gpu_net->load_state_dict(cpu_net->state_dict());
  gpu_net->to(gpu());
  Tensor x = randn({64, 50});
  Tensor target = Tensor::from_vector(std::vector<int64_t>(64, 3), {64});
  Tensor cpu_loss = cross_entropy(cpu_net(x), target);
  cpu_loss.backward();
  Tensor gpu_loss = cross_entropy(gpu_net(x.to(gpu())), target.to(gpu()));
  gpu_loss.backward();
  EXPECT_TRUE(all_close(gpu_loss, cpu_loss, 1e-4, 1e-4));
  auto cpu_params = cpu_net->named_parameters(), gpu_params = gpu_net->named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    SCOPED_TRACE(cpu_params[i].first);
    EXPECT_TRUE(all_close(gpu_params[i].second.grad(), cpu_params[i].second.grad(), 1e-4, 1e-3));
  }
}

TEST(CudaLinear, GemmAtUnalignedAddresses) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Views starting one float into their storage: cuBLASLt must be told, or its kernels fault.
  Tensor a_storage = randn({1 + 37 * 29}), b_storage = randn({1 + 29 * 23});
  Tensor a = narrow(a_storage, 0, 1, 37 * 29).view({37, 29}), b = narrow(b_storage, 0, 1, 29 * 23).view({29, 23});
  Tensor expected = matmul(a, b);
  Tensor a_gpu = narrow(a_storage.to(gpu()), 0, 1, 37 * 29).view({37, 29});
  Tensor b_gpu = narrow(b_storage.to(gpu()), 0, 1, 29 * 23).view({29, 23});
  EXPECT_TRUE(all_close(matmul(a_gpu, b_gpu), expected, 1e-4, 1e-4));
}

// 16-bit products whose rows are not 16 bytes long run on zero-padded copies (ops/cuda/matmul.cpp):
// a language model's head over 113 classes, its input gradient (k = 113) and its weight gradient
// (a^T with 113 columns, with and without row sums beside it), against float64 on the CPU.
TEST(CudaLinear, SixteenBitProductsWithOddRowLengths) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  const int64_t rows = 1024, vocab = 113, width = 384;
  for (DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = randn({rows, width}).to(dtype), w = randn({vocab, width}).to(dtype);
    const Tensor g = randn({rows, vocab}).to(dtype);
    const auto gpu_product = [&](const Tensor& a, bool ta, const Tensor& b, bool tb, Shape shape) {
      Tensor c = Tensor::empty(shape, dtype, gpu());
      k.gemm(a.to(gpu()), ta, b.to(gpu()), tb, c, 1, 0);
      return c.cpu().to(kFloat64);
    };
    const Tensor x64 = x.to(kFloat64), w64 = w.to(kFloat64), g64 = g.to(kFloat64);
    // Scale: a sum of `width` (or `rows`) unit products, each rounded once to 8 bits of mantissa.
    const double tol = dtype == kBFloat16 ? 0.02 : 0.004;
    const auto close = [&](const Tensor& got, const Tensor& want, double terms) {
      return all_close(got, want, tol * std::sqrt(terms), tol);
    };
    EXPECT_TRUE(close(gpu_product(x, false, w, true, {rows, vocab}), matmul(x64, transpose(w64, 0, 1)), width))
        << "logits";
    EXPECT_TRUE(close(gpu_product(g, false, w, false, {rows, width}), matmul(g64, w64), vocab)) << "input gradient";
    EXPECT_TRUE(close(gpu_product(g, true, x, false, {vocab, width}), matmul(transpose(g64, 0, 1), x64), rows))
        << "weight gradient";
    // Beside the input gradient, with the bias gradient's row sums.
    Tensor gx = Tensor::empty({rows, width}, dtype, gpu()), gw = Tensor::empty({vocab, width}, dtype, gpu());
    Tensor gb = Tensor::empty({vocab}, dtype, gpu());
    const Tensor g_gpu = g.to(gpu());
    k.gemm_concurrent({g_gpu, false, w.to(gpu()), false, gx}, {g_gpu, true, x.to(gpu()), false, gw, &gb});
    cuda::join_side_streams();
    EXPECT_TRUE(close(gx.cpu().to(kFloat64), matmul(g64, w64), vocab)) << "concurrent input gradient";
    EXPECT_TRUE(close(gw.cpu().to(kFloat64), matmul(transpose(g64, 0, 1), x64), rows)) << "concurrent weight gradient";
    EXPECT_TRUE(close(gb.cpu().to(kFloat64), sum(g64, {0}), rows)) << "row sums";
  }
}

TEST(CudaLinear, ConcurrentGemmsEqualSequentialOnes) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  for (DType dtype : {kFloat32, kFloat64}) {  // float64 is not on cuBLASLt: both run on the compute stream
    Tensor g = randn({64, 40}, dtype).to(gpu()), w = randn({40, 30}, dtype).to(gpu()), x = randn({64, 30}, dtype).to(gpu());
    Tensor gx = Tensor::empty({64, 30}, dtype, gpu()), gw = Tensor::empty({40, 30}, dtype, gpu());
    k.gemm_concurrent({g, false, w, false, gx}, {g, true, x, false, gw});
    cuda::join_side_streams();
    Tensor gx_ref = Tensor::empty({64, 30}, dtype, gpu()), gw_ref = Tensor::empty({40, 30}, dtype, gpu());
    k.gemm(g, false, w, false, gx_ref, 1, 0);
    k.gemm(g, true, x, false, gw_ref, 1, 0);
    // Read after the join: without it, these reads would race the side stream's GEMM.
    EXPECT_TRUE(all_close(gx, gx_ref, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(gw, gw_ref, 1e-5, 1e-5));
  }
}

#ifdef MINIDL_WITH_CUDA
// Once timed, a weight gradient with a configuration of few blocks starts after the input gradient
// and runs on at most cuda::side_stream_blocks() of them (ops/cuda/matmul.cpp). The MNIST MLP's
// second layer at batch 512, where cuBLASLt has such configurations on an H100 and an H200: the
// results of every call, before and after the timing, equal the products run one at a time.
TEST(CudaLinear, WeightGradientOnFewBlocksAfterTheInputGradient) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  Tensor g = randn({512, 256}).to(gpu()), w = randn({256, 512}).to(gpu()), x = randn({512, 512}).to(gpu());
  Tensor gx_ref = Tensor::empty({512, 512}, kFloat32, gpu()), gw_ref = Tensor::empty({256, 512}, kFloat32, gpu());
  k.gemm(g, false, w, false, gx_ref, 1, 0);
  k.gemm(g, true, x, false, gw_ref, 1, 0);
  const int64_t blocks = cuda::side_stream_blocks(gpu().index);
  const auto within = [&](const Tensor& gw) {
    return cuda::lt_keeps_within(gpu().index, 512, 256, 512, false, static_cast<const float*>(x.raw_data()), true,
                                 static_cast<const float*>(g.raw_data()), static_cast<const float*>(gw.raw_data()),
                                 blocks);
  };
  Tensor gx = Tensor::empty({512, 512}, kFloat32, gpu()), gw = Tensor::empty({256, 512}, kFloat32, gpu());
  for (int call = 0; call < 3; ++call) {  // timed on the second, run after the input gradient on the third
    k.fill(gx, std::nan(""));
    k.fill(gw, std::nan(""));
    k.gemm_concurrent({g, false, w, false, gx}, {g, true, x, false, gw});
    cuda::join_side_streams();
    EXPECT_TRUE(all_close(gx, gx_ref, 1e-4, 1e-4)) << "call " << call;
    EXPECT_TRUE(all_close(gw, gw_ref, 1e-4, 1e-4)) << "call " << call;
  }
  if (cuda::gemm_tuning_enabled() && !is_deterministic()) {
    EXPECT_TRUE(within(gw)) << "no configuration of at most " << blocks << " blocks was taken";
  }
}
#endif  // MINIDL_WITH_CUDA

// The narrow-layer kernels (ops/cuda/linear_narrow.cu) against the CPU: a forward with at most 16
// outputs, a product over k <= 16, and a weight gradient with at most 16 rows plus its bias
// gradient, at the edges of each kernel's shape rules (one row, one column, 16 outputs, k of one,
// k split into slices of 64 whose last is short).
TEST(CudaLinear, NarrowForwardMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (int64_t rows : {1, 9, 513}) {
      for (int64_t n : {1, 10, 16}) {
        for (int64_t kk : {1, 33, 256}) {
          for (bool relu : {false, true}) {
            SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(n) + "x" + std::to_string(kk) + (relu ? " relu" : ""));
            Tensor x = randn({rows, kk}, dtype), w = randn({n, kk}, dtype), bias = randn({n}, dtype);
            Tensor expected = Tensor::empty({rows, n}, dtype);
            kernels_for(Device::cpu()).gemm_bias(x, false, w, true, bias, relu, expected);
            Tensor got = Tensor::empty({rows, n}, dtype, gpu());
            kernels_for(gpu()).gemm_bias(x.to(gpu()), false, w.to(gpu()), true, bias.to(gpu()), relu, got);
            EXPECT_TRUE(all_close(got, expected, tol(dtype), tol(dtype)));
          }
        }
      }
    }
  }
}

TEST(CudaLinear, SmallKGemmMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (int64_t kk : {1, 10, 16}) {
      for (const auto& [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{0.5, 2.0}}) {
        SCOPED_TRACE("k " + std::to_string(kk) + " beta " + std::to_string(beta));
        Tensor a = randn({300, kk}, dtype), b = randn({kk, 257}, dtype), c = randn({300, 257}, dtype);
        Tensor expected = c.clone();
        kernels_for(Device::cpu()).gemm(a, false, b, false, expected, alpha, beta);
        Tensor got = c.to(gpu());
        kernels_for(gpu()).gemm(a.to(gpu()), false, b.to(gpu()), false, got, alpha, beta);
        EXPECT_TRUE(all_close(got, expected, tol(dtype), tol(dtype)));
      }
    }
  }
}

TEST(CudaLinear, NarrowWeightGradMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  for (DType dtype : {kFloat32, kFloat64}) {
    for (int64_t m : {1, 10, 16}) {
      for (int64_t n : {1, 31, 300}) {
        for (int64_t kk : {1, 64, 65, 512, 5000}) {
          SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk));
          // c = g^T x, the bias gradient g summed over its rows: as a linear layer's backward asks.
          Tensor g = randn({kk, m}, dtype), x = randn({kk, n}, dtype);
          Tensor expected = Tensor::empty({m, n}, dtype), expected_sums = Tensor::empty({m}, dtype);
          kernels_for(Device::cpu()).gemm_row_sums({g, true, x, false, expected, &expected_sums});
          Tensor g_gpu = g.to(gpu()), x_gpu = x.to(gpu());
          Tensor got = Tensor::empty({m, n}, dtype, gpu()), sums = Tensor::empty({m}, dtype, gpu());
          k.gemm_row_sums({g_gpu, true, x_gpu, false, got, &sums});
          EXPECT_TRUE(all_close(got, expected, tol(dtype), tol(dtype)));
          EXPECT_TRUE(all_close(sums, expected_sums, tol(dtype), tol(dtype)));
          // The same on the side stream, next to the input gradient g @ w.
          Tensor w = randn({m, 7}, dtype).to(gpu());
          Tensor gx = Tensor::empty({kk, 7}, dtype, gpu()), gx_ref = Tensor::empty({kk, 7}, dtype, gpu());
          Tensor got_side = Tensor::empty({m, n}, dtype, gpu()), sums_side = Tensor::empty({m}, dtype, gpu());
          k.gemm_concurrent({g_gpu, false, w, false, gx}, {g_gpu, true, x_gpu, false, got_side, &sums_side});
          cuda::join_side_streams();
          k.gemm(g_gpu, false, w, false, gx_ref, 1, 0);
          EXPECT_TRUE(all_close(gx, gx_ref, tol(dtype), tol(dtype)));
          EXPECT_TRUE(all_equal(got_side, got));
          EXPECT_TRUE(all_equal(sums_side, sums));
        }
      }
    }
  }
}

// A float32 weight gradient over at most 64 rows (ops/cuda/linear_short_k.cu) against float64 on the
// CPU: at the edges of its tiles (rows and columns past a multiple of 64, k of one), with and without
// the bias gradient beside it, and masked by a ReLU's output as an MLP's first layer asks
// (relu_weight_grad). With TF32 allowed it still multiplies in float32: the tolerance is float32's,
// which cuBLAS's TF32 kernels (a relative error near 1e-3) would fail.
TEST(CudaLinear, ShortKWeightGradMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  Kernels& cpu = kernels_for(Device::cpu());
  const bool tf32_before = allow_tf32_matmul();
  for (bool tf32 : {false, true}) {
    set_allow_tf32_matmul(tf32);
    for (int64_t m : {4, 68, 512}) {
      for (int64_t n : {4, 100, 784}) {
        for (int64_t kk : {1, 7, 33, 64}) {
          SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk) + (tf32 ? " tf32" : ""));
          Tensor g = randn({kk, m}), x = randn({kk, n}), out = relu(randn({kk, m}));
          Tensor g64 = g.to(kFloat64), x64 = x.to(kFloat64);
          Tensor expected = Tensor::empty({m, n}, kFloat64), expected_sums = Tensor::empty({m}, kFloat64);
          cpu.gemm_row_sums({g64, true, x64, false, expected, &expected_sums});
          Tensor g_gpu = g.to(gpu()), x_gpu = x.to(gpu());
          Tensor got = Tensor::empty({m, n}, kFloat32, gpu()), sums = Tensor::empty({m}, kFloat32, gpu());
          k.gemm_row_sums({g_gpu, true, x_gpu, false, got, &sums});
          EXPECT_TRUE(all_close(got.to(kFloat64), expected, 1e-5, 1e-5));
          EXPECT_TRUE(all_close(sums.to(kFloat64), expected_sums, 1e-5, 1e-5));
          Tensor alone = Tensor::empty({m, n}, kFloat32, gpu());
          k.gemm_row_sums({g_gpu, true, x_gpu, false, alone, nullptr});
          EXPECT_TRUE(all_equal(alone, got));
          // Through the ReLU whose output is `out`.
          Tensor relu_expected = Tensor::empty({m, n}, kFloat64), relu_sums = Tensor::empty({m}, kFloat64);
          cpu.relu_weight_grad(g64, out.to(kFloat64), x64, false, relu_expected, &relu_sums);
          Tensor relu_got = Tensor::empty({m, n}, kFloat32, gpu()), relu_got_sums = Tensor::empty({m}, kFloat32, gpu());
          k.relu_weight_grad(g_gpu, out.to(gpu()), x_gpu, false, relu_got, &relu_got_sums);
          EXPECT_TRUE(all_close(relu_got.to(kFloat64), relu_expected, 1e-5, 1e-5));
          EXPECT_TRUE(all_close(relu_got_sums.to(kFloat64), relu_sums, 1e-5, 1e-5));
        }
      }
    }
  }
  set_allow_tf32_matmul(tf32_before);
}

// Float32 products over at most 64 rows (ops/cuda/linear_short_m.cu: a thread block cluster for 32
// columns, each block over an eighth of k) against float64 on the CPU: a linear layer's forward
// (w [N, K] transposed) with and without bias and ReLU, and its input gradient (w [K, N]), at the
// edges of the clusters' columns and of k's slices (k = 32, one float4 a slice; 100, a short last
// slice; 800, the longest; 804, past it, on cuBLAS), and linear_relu_linear's first layer before its
// narrow one. The parts are added in a fixed order: a second call gives the same bits.
TEST(CudaLinear, ShortMProductsMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  Kernels& cpu = kernels_for(Device::cpu());
  for (int64_t m : {1, 7, 64}) {
    for (int64_t n : {4, 36, 512}) {
      for (int64_t kk : {32, 100, 784, 800, 804}) {
        for (bool trans_b : {true, false}) {
          SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk) + (trans_b ? " w^T" : " w"));
          Tensor a = randn({m, kk}), b = trans_b ? randn({n, kk}) : randn({kk, n}), bias = randn({n});
          Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64), bias64 = bias.to(kFloat64);
          Tensor a_gpu = a.to(gpu()), b_gpu = b.to(gpu()), bias_gpu = bias.to(gpu());
          for (bool relu : {false, true}) {
            Tensor expected = Tensor::empty({m, n}, kFloat64);
            cpu.gemm_bias(a64, false, b64, trans_b, bias64, relu, expected);
            Tensor got = Tensor::empty({m, n}, kFloat32, gpu()), again = Tensor::empty({m, n}, kFloat32, gpu());
            k.gemm_bias(a_gpu, false, b_gpu, trans_b, bias_gpu, relu, got);
            k.gemm_bias(a_gpu, false, b_gpu, trans_b, bias_gpu, relu, again);
            EXPECT_TRUE(all_close(got.to(kFloat64), expected, 1e-4, 1e-5)) << (relu ? "relu" : "bias");
            if (kk <= 800) {  // past it, cuBLAS: its split of k for a shape is timed on the second call
              EXPECT_TRUE(all_equal(got, again));
            }
          }
          Tensor expected = Tensor::empty({m, n}, kFloat64);
          cpu.gemm(a64, false, b64, trans_b, expected, 1, 0);
          Tensor got = Tensor::empty({m, n}, kFloat32, gpu());
          k.gemm(a_gpu, false, b_gpu, trans_b, got, 1, 0);
          EXPECT_TRUE(all_close(got.to(kFloat64), expected, 1e-4, 1e-5)) << "no bias";
        }
      }
    }
  }
  // The MLP's second and last layers at batch 64.
  Tensor x = randn({64, 512}), w1 = randn({256, 512}), b1 = randn({256}), w2 = randn({10, 256}), b2 = randn({10});
  Tensor hidden_ref = Tensor::empty({64, 256}, kFloat64), out_ref = Tensor::empty({64, 10}, kFloat64);
  cpu.linear_relu_linear(x.to(kFloat64), false, w1.to(kFloat64), true, b1.to(kFloat64), w2.to(kFloat64), true,
                         b2.to(kFloat64), hidden_ref, out_ref);
  Tensor hidden = Tensor::empty({64, 256}, kFloat32, gpu()), out = Tensor::empty({64, 10}, kFloat32, gpu());
  k.linear_relu_linear(x.to(gpu()), false, w1.to(gpu()), true, b1.to(gpu()), w2.to(gpu()), true, b2.to(gpu()), hidden,
                       out);
  EXPECT_TRUE(all_close(hidden.to(kFloat64), hidden_ref, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(out.to(kFloat64), out_ref, 1e-3, 1e-5));
}

// The weight gradient left on the side stream joins the compute stream where it is next used
// (core/cuda/side_stream.cpp): its tensors are marked until then, a free of what it writes joins,
// and the autograd engine joins before it adds to a gradient, before hooks and at the end.
TEST(CudaLinear, SideStreamWorkJoinsWhereItIsUsed) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  Tensor g = randn({512, 10}).to(gpu()), x = randn({512, 300}).to(gpu()), w = randn({10, 7}).to(gpu());
  Tensor gx = Tensor::empty({512, 7}, kFloat32, gpu());
  Tensor gw = Tensor::empty({10, 300}, kFloat32, gpu()), sums = Tensor::empty({10}, kFloat32, gpu());
  k.gemm_concurrent({g, false, w, false, gx}, {g, true, x, false, gw, &sums});
  EXPECT_TRUE(cuda::uses_unjoined_side_work(gw));
  EXPECT_TRUE(cuda::uses_unjoined_side_work(sums));
  EXPECT_TRUE(cuda::uses_unjoined_side_work(x));  // read there: held until the join
  EXPECT_FALSE(cuda::uses_unjoined_side_work(gx));
  gw = Tensor();  // its block may be reused at once: the free joins first
  EXPECT_FALSE(cuda::uses_unjoined_side_work(x));
  EXPECT_FALSE(cuda::uses_unjoined_side_work(sums));

  // Through the tape: one narrow weight used by two layers, so the second gradient is added to
  // the first (in place, after a join), and a hook that must see the sum; a gradient hook on the
  // other weight, whose one gradient may still be being written, must see it finished.
  Tensor xc = randn({300, 12}), w1c = randn({12, 12}), w2c = randn({12, 12});
  auto loss_of = [](const Tensor& in, const Tensor& a, const Tensor& b) {
    return linear(relu(linear(relu(linear(in, a)), b)), a).sum();
  };
  Tensor a_cpu = w1c.clone().requires_grad_(), b_cpu = w2c.clone().requires_grad_();
  loss_of(xc, a_cpu, b_cpu).backward();
  Tensor a = w1c.to(gpu()).requires_grad_(), b = w2c.to(gpu()).requires_grad_();
  bool hook_saw_joined = false;
  a.register_post_accumulate_grad_hook([&](Tensor& p) { hook_saw_joined = !cuda::uses_unjoined_side_work(p.grad()); });
  bool gradient_hook_saw_joined = false;
  b.register_hook([&](const Tensor& g) { gradient_hook_saw_joined = !cuda::uses_unjoined_side_work(g); });
  loss_of(xc.to(gpu()), a, b).backward();
  EXPECT_TRUE(hook_saw_joined);
  EXPECT_TRUE(gradient_hook_saw_joined);
  EXPECT_FALSE(cuda::uses_unjoined_side_work(a.grad()));
  EXPECT_FALSE(cuda::uses_unjoined_side_work(b.grad()));
  EXPECT_TRUE(all_close(a.grad(), a_cpu.grad(), 1e-3, 1e-3));
  EXPECT_TRUE(all_close(b.grad(), b_cpu.grad(), 1e-3, 1e-3));
}

// Side work that holds much alive joins before the next is queued (core/cuda/side_stream.cpp):
// the first product's 69 MB input is let go when the second weight gradient starts, not at the
// end of a backward; a small one waits for its own use as before.
TEST(CudaLinear, SideStreamWorkHoldingMuchJoinsBeforeTheNext) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  // Every operand made first: a copy from the host joins the side stream by itself.
  struct Layer {
    Tensor g, x, w, gx, gw;
  };
  const auto layer = [](int64_t rows, int64_t in) {
    Layer l{randn({rows, 16}).to(gpu()), randn({rows, in}).to(gpu()), randn({16, in}).to(gpu()),
            Tensor::empty({rows, in}, kFloat32, gpu()), Tensor::empty({16, in}, kFloat32, gpu())};
    return l;
  };
  Layer big = layer(8192, 2100), small = layer(64, 32), next = layer(64, 32);
  cuda::synchronize();
  const auto weight_gradient = [&](Layer& l) {
    k.gemm_concurrent({l.g, false, l.w, false, l.gx}, {l.g, true, l.x, false, l.gw});
  };
  weight_gradient(big);
  EXPECT_TRUE(cuda::uses_unjoined_side_work(big.x));
  weight_gradient(small);
  EXPECT_FALSE(cuda::uses_unjoined_side_work(big.x)) << "69 MB held past the next side work";
  EXPECT_TRUE(cuda::uses_unjoined_side_work(small.x));
  weight_gradient(next);
  EXPECT_TRUE(cuda::uses_unjoined_side_work(small.x)) << "a few kB joined early";
  EXPECT_TRUE(cuda::uses_unjoined_side_work(next.x));
  cuda::join_side_streams();
  EXPECT_TRUE(all_close(big.gw, matmul(transpose(big.g, 0, 1), big.x), 1e-2, 1e-3));
  EXPECT_TRUE(all_close(next.gw, matmul(transpose(next.g, 0, 1), next.x), 1e-3, 1e-3));
}

TEST(CudaLinear, GradcheckNarrowLinear) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // 10 outputs: the forward, input-gradient (k = 10) and weight-gradient kernels of a narrow layer;
  // 130 rows: the weight gradient in three slices.
  Tensor x = randn({130, 20}, kFloat64).to(gpu()), w = randn({10, 20}, kFloat64).to(gpu());
  Tensor b = randn({10}, kFloat64).to(gpu());
  GradcheckResult r = gradcheck([](auto& t) { return linear(t[0], t[1], t[2]); },
                                {x.requires_grad_(), w.requires_grad_(), b.requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

// linear_relu_linear's kernels (ops/cuda/matmul.cpp, linear_narrow.cu) against the base class's
// composition on the GPU: a first product split along k (k = 2048, by the rule) whose sum, bias
// and ReLU feed the narrow second product in one kernel, and a backward that masks the input
// gradient of the narrow layer in one kernel and makes the three weight and bias gradients beside
// it (without the narrow layer's own, the composition). Also 1 and 16 outputs, 1,500 rows, and what falls
// back to the composition: a second layer of 20 outputs, a first that is not split, float64's
// forward. Then the op's values and gradients against linear_relu followed by linear.
TEST(CudaLinear, LinearReluLinearEqualsComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  struct Case {
    int64_t rows, in, hidden, out;
    DType dtype;
  };
  for (const Case& c : {Case{64, 2048, 64, 10, kFloat32}, Case{33, 2048, 40, 1, kFloat32},
                        Case{64, 2048, 64, 16, kFloat32}, Case{64, 2048, 64, 20, kFloat32},
                        Case{64, 30, 50, 10, kFloat32}, Case{1500, 2048, 32, 10, kFloat32},
                        Case{64, 2048, 64, 10, kFloat64}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.in) + "x" + std::to_string(c.hidden) + "x" +
                 std::to_string(c.out) + " " + dtype_name(c.dtype));
    const double eps = tol(c.dtype);
    // x scaled so that the hidden layer is about 1 whatever its k (EpilogueGemmEqualsComposition says why).
    Tensor x = (randn({c.rows, c.in}, c.dtype) * (1 / std::sqrt(double(c.in)))).to(gpu());
    Tensor w1 = randn({c.hidden, c.in}, c.dtype).to(gpu());
    Tensor b1 = randn({c.hidden}, c.dtype).to(gpu()), w2 = randn({c.out, c.hidden}, c.dtype).to(gpu());
    Tensor b2 = randn({c.out}, c.dtype).to(gpu());
    Tensor hidden = Tensor::empty({c.rows, c.hidden}, c.dtype, gpu()), out = Tensor::empty({c.rows, c.out}, c.dtype, gpu());
    Tensor hidden_ref = Tensor::empty({c.rows, c.hidden}, c.dtype, gpu());
    Tensor out_ref = Tensor::empty({c.rows, c.out}, c.dtype, gpu());
    k.linear_relu_linear(x, false, w1, true, b1, w2, true, b2, hidden, out);
    k.Kernels::linear_relu_linear(x, false, w1, true, b1, w2, true, b2, hidden_ref, out_ref);
    EXPECT_TRUE(all_close(hidden, hidden_ref, eps, eps));
    EXPECT_TRUE(all_close(out, out_ref, eps, eps));

    Tensor g = randn({c.rows, c.out}, c.dtype).to(gpu());
    Tensor pre = Tensor::empty({c.rows, c.hidden}, c.dtype, gpu()), gb1 = Tensor::empty({c.hidden}, c.dtype, gpu());
    Tensor gw2 = Tensor::empty({c.out, c.hidden}, c.dtype, gpu()), gb2 = Tensor::empty({c.out}, c.dtype, gpu());
    Tensor pre_ref = pre.clone(), gb1_ref = gb1.clone(), gw2_ref = gw2.clone(), gb2_ref = gb2.clone();
    const Kernels::GemmCall second{g, true, hidden, false, gw2, &gb2};
    const Kernels::GemmCall second_ref{g, true, hidden, false, gw2_ref, &gb2_ref};
    k.linear_relu_linear_backward(g, w2, false, hidden, pre, gb1, &second);
    k.Kernels::linear_relu_linear_backward(g, w2, false, hidden, pre_ref, gb1_ref, &second_ref);
    cuda::join_side_streams();
    EXPECT_TRUE(all_close(pre, pre_ref, eps, eps));
    EXPECT_TRUE(all_close(gb1, gb1_ref, eps, eps));
    EXPECT_TRUE(all_close(gw2, gw2_ref, eps, eps));
    EXPECT_TRUE(all_close(gb2, gb2_ref, eps, eps));
    // Without the second layer's gradients (its weight frozen): the composition's path.
    k.fill(pre, std::nan(""));
    k.fill(gb1, std::nan(""));
    k.linear_relu_linear_backward(g, w2, false, hidden, pre, gb1, nullptr);
    cuda::join_side_streams();
    EXPECT_TRUE(all_close(pre, pre_ref, eps, eps));
    EXPECT_TRUE(all_close(gb1, gb1_ref, eps, eps));

    // The op, each parameter's gradient against the unfused ops' (which run the kernels composed).
    std::vector<Tensor> params{w1, b1, w2, b2};
    for (Tensor& p : params) p.requires_grad_();
    Tensor xr = x.clone().requires_grad_();
    Tensor fused = linear_relu_linear(xr, params[0], params[1], params[2], params[3]);
    (fused * g).sum().backward();
    std::vector<Tensor> fused_grads{xr.grad()};
    for (Tensor& p : params) fused_grads.push_back(p.grad()), p.set_grad(Tensor());
    xr.set_grad(Tensor());
    Tensor composed = linear(linear_relu(xr, params[0], params[1]), params[2], params[3]);
    (composed * g).sum().backward();
    EXPECT_TRUE(all_close(fused, composed, eps, eps));
    std::vector<Tensor> composed_grads{xr.grad()};
    for (Tensor& p : params) composed_grads.push_back(p.grad());
    for (size_t i = 0; i < fused_grads.size(); ++i)
      EXPECT_TRUE(all_close(fused_grads[i], composed_grads[i], 10 * eps, 10 * eps)) << "gradient " << i;
  }
}

TEST(CudaLinear, GradcheckLinearReluLinear) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // 10 outputs: the float64 backward's masked input gradient and the side pass's three gradients.
  for (;;) {
    Tensor x = randn({6, 5}, kFloat64).to(gpu()), w1 = randn({7, 5}, kFloat64).to(gpu());
    Tensor b1 = randn({7}, kFloat64).to(gpu());
    std::vector<double> pre = linear(x, w1, b1).to(Device::cpu()).to_vector<double>();
    if (std::any_of(pre.begin(), pre.end(), [](double v) { return std::abs(v) < 1e-3; })) continue;
    Tensor w2 = randn({10, 7}, kFloat64).to(gpu()), b2 = randn({10}, kFloat64).to(gpu());
    GradcheckResult r = gradcheck([](auto& t) { return linear_relu_linear(t[0], t[1], t[2], t[3], t[4]); },
                                  {x.requires_grad_(), w1.requires_grad_(), b1.requires_grad_(), w2.requires_grad_(),
                                   b2.requires_grad_()});
    EXPECT_TRUE(r) << r.message;
    break;
  }
}

}  // namespace minidl::cuda_linear_test
