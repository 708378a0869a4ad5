// cuDNN's fused attention (ops/cuda/cudnn_attention.cpp), called through kernels_for directly:
// forward output, logsumexp and the three gradients against attention composed on the CPU in
// float64 from the same rounded inputs, for bfloat16 and float16, head sizes 64 and 128, odd and
// unequal lengths, causal or not, 3-D and 4-D strided heads; with dropout, against the composition
// masked by the mask cuDNN drew (read back through v = the identity), and in a CUDA graph, whose
// replays draw new masks. Through the op, the backend switch picks it or minidl's kernels.
// GPU tests skip, saying why, where no CUDA device, no cuDNN or no sm_90 GPU is there.
#include <cmath>
#include <limits>

#include "attention_test_util.h"
#include "ops/backend_setting.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_cudnn_attention_test {

using namespace minidl::testing;

#if defined(MINIDL_WITH_CUDA) && defined(MINIDL_WITH_CUDNN)

namespace {

// Skips a test where the library path cannot run at all (a GPU before sm_90).
#define REQUIRE_CUDNN_ATTENTION()                                                          \
  do {                                                                                     \
    MINIDL_REQUIRE_CUDNN();                                                                \
    if (cuda::device_properties(0).major < 9) GTEST_SKIP() << "cuDNN's fused attention needs sm_90"; \
  } while (0)

// The library's outputs and gradients, and where its dropout mask came from.
struct Result : AttentionResult {
  Tensor rng_state, seed_offset;
};

// The library's forward and backward on q [.., L, E], k, v [.., S, E]; outputs as the op makes them.
Result library(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_out, double scale, bool causal,
               double dropout_p = 0) {
  Kernels& kernels = kernels_for(gpu());
  Result r;
  r.out = Tensor::empty(q.shape(), q.dtype(), gpu());
  r.lse = Tensor::empty({q.numel() / q.size(-1)}, kFloat32, gpu());
  r.rng_state = zeros({3}, kInt64);
  const bool ran = kernels.library_attention_forward(q, k, v, scale, causal, dropout_p, r.out, r.lse, r.rng_state,
                                                     r.seed_offset);
  EXPECT_TRUE(ran) << "cuDNN has no engine for " << q.dtype() << " q " << shape_str(q.shape());
  if (!ran) return r;
  r.grad_q = Tensor::empty(q.shape(), q.dtype(), gpu());
  r.grad_k = Tensor::empty(k.shape(), k.dtype(), gpu());
  r.grad_v = Tensor::empty(v.shape(), v.dtype(), gpu());
  kernels.library_attention_backward(grad_out, q, k, v, r.out, r.lse, r.seed_offset, scale, causal, dropout_p, r.grad_q,
                                     r.grad_k, r.grad_v);
  return r;
}

void expect_close(const AttentionResult& got, const AttentionResult& want, DType dtype) {
  const double tol = attention_tolerance(dtype);
  EXPECT_TRUE(close_at_scale("out", got.out, want.out, tol));
  EXPECT_TRUE(all_close(got.lse.to(Device::cpu()), reshape(want.lse, {-1}).to(kFloat32), 2e-4, 1e-5)) << "logsumexp";
  EXPECT_TRUE(close_at_scale("grad_q", got.grad_q, want.grad_q, tol));
  EXPECT_TRUE(close_at_scale("grad_k", got.grad_k, want.grad_k, tol));
  EXPECT_TRUE(close_at_scale("grad_v", got.grad_v, want.grad_v, tol));
}

}  // namespace

TEST(CudnnAttention, MatchesTheComposedReference) {
  REQUIRE_CUDNN_ATTENTION();
  MINIDL_FRESH_SEED();
  struct Lengths {
    int64_t L, S;
  };
  for (DType dtype : {kBFloat16, kFloat16})
    for (int64_t E : {64, 128})
      for (Lengths n : {Lengths{1, 1}, Lengths{7, 13}, Lengths{129, 77}, Lengths{256, 256}})
        for (bool causal : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dtype << " E=" << E << " L=" << n.L << " S=" << n.S
                                            << (causal ? " causal" : ""));
          const Tensor q = (randn({2, 3, n.L, E}) * 1.5).to(gpu(), dtype), k = randn({2, 3, n.S, E}).to(gpu(), dtype);
          const Tensor v = randn({2, 3, n.S, E}).to(gpu(), dtype), grad_out = randn({2, 3, n.L, E}).to(gpu(), dtype);
          const double scale = 1.0 / std::sqrt(static_cast<double>(E));
          const Result got = library(q, k, v, grad_out, scale, causal);
          if (!got.grad_q.defined()) continue;
          expect_close(got, attention_reference(q, k, v, grad_out, scale, causal), dtype);
        }
}

// q, k, v as a GPT block makes them (transposed views of one projection) and 3-D operands.
TEST(CudnnAttention, ReadsPackedHeadViewsAndThreeDimensionalOperandsInPlace) {
  REQUIRE_CUDNN_ATTENTION();
  MINIDL_FRESH_SEED();
  const Tensor qkv = randn({2, 100, 3 * 4 * 64}).to(gpu(), kBFloat16);
  const std::vector<Tensor> h = packed_heads(qkv, 4);
  const Tensor grad_out = randn({2, 4, 100, 64}).to(gpu(), kBFloat16);
  const Result got = library(h[0], h[1], h[2], grad_out, 0.125, true);
  if (got.grad_q.defined()) expect_close(got, attention_reference(h[0], h[1], h[2], grad_out, 0.125, true), kBFloat16);
  const Tensor q = randn({5, 70, 128}).to(gpu(), kFloat16), k = randn({5, 90, 128}).to(gpu(), kFloat16);
  const Tensor v = randn({5, 90, 128}).to(gpu(), kFloat16), g = randn({5, 70, 128}).to(gpu(), kFloat16);
  const Result flat = library(q, k, v, g, 0.1, false);
  if (flat.grad_q.defined()) expect_close(flat, attention_reference(q, k, v, g, 0.1, false), kFloat16);
}

// With v the identity, out is the dropped probabilities themselves, so the mask cuDNN drew can be
// read back (a kept weight is positive): it keeps about 1 - p, and the output and gradients are
// the composition's under that mask; the next call draws another mask.
TEST(CudnnAttention, DropoutKeepsOneMinusPAndTheGradientsFollowTheDrawnMask) {
  REQUIRE_CUDNN_ATTENTION();
  MINIDL_FRESH_SEED();
  constexpr double p = 0.2;
  const int64_t B = 4, H = 6, L = 64, E = 64;
  const Tensor q = randn({B, H, L, E}).to(gpu(), kBFloat16), k = randn({B, H, L, E}).to(gpu(), kBFloat16);
  const Tensor v = expand(eye(L), {B, H, L, E}).contiguous().to(gpu(), kBFloat16);
  const Tensor grad_out = randn({B, H, L, E}).to(gpu(), kBFloat16);
  const Result got = library(q, k, v, grad_out, 0.125, false, p);
  if (!got.grad_q.defined()) return;
  const Tensor keep = gt(got.out.to(Device::cpu()).to(kFloat64), zeros({1}, kFloat64)).to(kFloat64);
  const double kept = sum(keep).item<double>() / static_cast<double>(keep.numel());
  EXPECT_NEAR(kept, 1 - p, 0.02) << "fraction of weights kept";
  expect_close(got, attention_reference(q, k, v, grad_out, 0.125, false, keep, p), kBFloat16);
  const Result again = library(q, k, v, grad_out, 0.125, false, p);
  EXPECT_FALSE(all_equal(again.out, got.out)) << "two calls drew the same mask";
}

// Captured with dropout, each replay draws a new mask and equals an eager run from the generator
// state the replay started at, bit for bit.
TEST(CudnnAttention, DropoutInACudaGraphDrawsANewMaskEachReplay) {
  REQUIRE_CUDNN_ATTENTION();
  MINIDL_FRESH_SEED();
  const Tensor q = randn({2, 3, 100, 64}).to(gpu(), kBFloat16), k = randn({2, 3, 100, 64}).to(gpu(), kBFloat16);
  const Tensor v = randn({2, 3, 100, 64}).to(gpu(), kBFloat16), grad_out = randn({2, 3, 100, 64}).to(gpu(), kBFloat16);
  library(q, k, v, grad_out, 0.125, true, 0.2);  // builds the plans outside the capture
  Result graphed;
  cuda::Graph graph;
  graph.capture_begin();
  graphed = library(q, k, v, grad_out, 0.125, true, 0.2);
  graph.capture_end();
  Tensor previous;
  for (int replay = 0; replay < 2; ++replay) {
    const Generator::State before = default_generator().state();
    graph.replay();
    default_generator().set_state(before);
    const Result eager = library(q, k, v, grad_out, 0.125, true, 0.2);
    EXPECT_TRUE(all_equal(graphed.out, eager.out)) << "replay " << replay;
    EXPECT_TRUE(all_equal(graphed.grad_k, eager.grad_k)) << "replay " << replay;
    EXPECT_TRUE(all_equal(graphed.grad_v, eager.grad_v)) << "replay " << replay;
    if (replay == 1) {
      EXPECT_FALSE(all_equal(graphed.out, previous)) << "two replays drew the same mask";
    }
    previous = graphed.out.clone();
  }
}

// Through the op: Auto takes cuDNN for 16-bit inputs and agrees with minidl's kernels; float32 and
// head size 32 stay on minidl's kernels (the names the switch parses: test_cuda_ops.cpp).
TEST(CudnnAttention, TheBackendSwitchPicksTheLibraryOrMinidlsKernels) {
  REQUIRE_CUDNN_ATTENTION();
  MINIDL_FRESH_SEED();
  Kernels& kernels = kernels_for(gpu());
  const Tensor q = randn({2, 3, 40, 64}).to(gpu(), kBFloat16);
  {
    AttentionBackendScope scope(AttentionBackend::Minidl);
    EXPECT_FALSE(kernels.library_attention_supports(q, q, q, 0.0));
  }
  AttentionBackendScope scope(AttentionBackend::Auto);
  EXPECT_TRUE(kernels.library_attention_supports(q, q, q, 0.0));
  EXPECT_FALSE(kernels.library_attention_supports(q.to(kFloat32), q.to(kFloat32), q.to(kFloat32), 0.0));
  const Tensor small = randn({2, 3, 40, 32}).to(gpu(), kBFloat16);
  EXPECT_FALSE(kernels.library_attention_supports(small, small, small, 0.0));
  Tensor library_out = scaled_dot_product_attention(q, q, q, {}, 0.0, true);
  set_attention_backend(AttentionBackend::Minidl);
  Tensor minidl_out = scaled_dot_product_attention(q, q, q, {}, 0.0, true);
  EXPECT_TRUE(close_at_scale("out", library_out, minidl_out, 2e-2));
}

#endif  // MINIDL_WITH_CUDA && MINIDL_WITH_CUDNN

}  // namespace minidl::cuda_cudnn_attention_test
