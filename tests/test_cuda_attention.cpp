// The fused attention kernels of the CUDA backend (ops/cuda/attention.cu), called through
// kernels_for directly: forward output, logsumexp and the three gradients against attention
// composed of CPU ops in float64 from the same (rounded) inputs, for float32, bfloat16 and float16,
// head sizes 32 / 64 / 128, odd and unequal lengths, causal or not; and a CUDA graph replay. With
// dropout, against the same composition masked by the very keep mask the kernels draw
// (attention_dropout_mask), with the backward reading the mask the forward stored and redrawing
// it (the 16-bit types then adding dQ by atomics, or in deterministic mode in a dQ pass).
// GPU tests skip, saying why, where no CUDA device is usable.
#include <cmath>
#include <limits>

#include "core/deterministic.h"
#include "attention_test_util.h"
#include "test_cuda_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
namespace minidl::cuda {
// ops/cuda/attention.cu: the fused kernels' dropout keep mask (1 kept, 0 dropped) as float32
// [B, L, S] on `device`, for the draws a forward recorded in rng_state. For tests.
Tensor attention_dropout_mask(int64_t B, int64_t L, int64_t S, const Tensor& rng_state, double dropout_p,
                              Device device);
}  // namespace minidl::cuda
#endif

namespace minidl::cuda_attention_test {

using namespace minidl::testing;

namespace {

using Result = AttentionResult;

// How the backward gets a dropout mask: stored by the forward (as the op has it), or redrawn.
enum class Mask { kStored, kRedrawn };

// The fused forward and backward; rng_state_out (if given) receives the forward's rng_state.
Result fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad_out, double scale, bool causal,
             double dropout_p = 0.0, Tensor* rng_state_out = nullptr, Mask mask = Mask::kStored) {
  Kernels& kernels = kernels_for(gpu());
  Result r;
  r.out = Tensor::empty({q.size(0), q.size(1), v.size(2)}, q.dtype(), gpu());
  r.lse = Tensor::empty({q.size(0), q.size(1)}, kFloat32, gpu());
  Tensor rng_state = zeros({3}, kInt64), keep_mask;
  kernels.attention_forward(q, k, v, scale, causal, dropout_p, r.out, r.lse, rng_state,
                            mask == Mask::kStored ? &keep_mask : nullptr);
  if (dropout_p > 0) {
    EXPECT_EQ(keep_mask.defined(), mask == Mask::kStored) << "the forward stores its mask if asked";
  }
  r.grad_q = Tensor::empty(q.shape(), q.dtype(), gpu());
  r.grad_k = Tensor::empty(k.shape(), k.dtype(), gpu());
  r.grad_v = Tensor::empty(v.shape(), v.dtype(), gpu());
  kernels.attention_backward(grad_out, q, k, v, r.out, r.lse, rng_state, keep_mask, scale, causal, dropout_p,
                             r.grad_q, r.grad_k, r.grad_v);
  if (rng_state_out) *rng_state_out = rng_state;
  return r;
}

void check_case(DType dtype, int64_t B, int64_t L, int64_t S, int64_t E, bool causal) {
  SCOPED_TRACE(::testing::Message() << dtype << " B=" << B << " L=" << L << " S=" << S << " E=" << E
                                    << (causal ? " causal" : ""));
  // Rounded to the dtype first: the reference sees exactly the kernel's inputs.
  Tensor q = (randn({B, L, E}) * 1.5).to(gpu(), dtype);
  Tensor k = randn({B, S, E}).to(gpu(), dtype);
  Tensor v = randn({B, S, E}).to(gpu(), dtype);
  Tensor grad_out = randn({B, L, E}).to(gpu(), dtype);
  const double scale = 1.0 / std::sqrt(static_cast<double>(E));
  ASSERT_TRUE(kernels_for(gpu()).fused_attention_supports(dtype, E, E, false));
  const Result got = fused(q, k, v, grad_out, scale, causal);
  const Result want = attention_reference(q, k, v, grad_out, scale, causal);
  const double tol = attention_tolerance(dtype);
  EXPECT_TRUE(close_at_scale("out", got.out, want.out, tol));
  // logsumexp is float32 from exact products of the inputs: tight for every dtype.
  EXPECT_TRUE(all_close(got.lse, want.lse.to(kFloat32), 2e-4, 1e-5)) << "logsumexp";
  EXPECT_TRUE(close_at_scale("grad_q", got.grad_q, want.grad_q, tol));
  EXPECT_TRUE(close_at_scale("grad_k", got.grad_k, want.grad_k, tol));
  EXPECT_TRUE(close_at_scale("grad_v", got.grad_v, want.grad_v, tol));
}

struct Lengths {
  int64_t L, S;
};
constexpr Lengths kLengths[] = {{1, 1}, {7, 13}, {64, 64}, {129, 77}, {256, 256}};

void check_all_lengths(DType dtype, int64_t E) {
  for (const Lengths& n : kLengths)
    for (bool causal : {false, true}) check_case(dtype, n.L <= 64 ? 3 : 2, n.L, n.S, E, causal);
}

}  // namespace

TEST(CudaAttention, SupportsHeadSizes32To128WithAndWithoutDropout) {
  MINIDL_REQUIRE_CUDA();
  Kernels& kernels = kernels_for(gpu());
  for (DType dtype : {kFloat32, kBFloat16, kFloat16})
    for (int64_t e : {32, 64, 128})
      for (bool dropout : {false, true})
        EXPECT_TRUE(kernels.fused_attention_supports(dtype, e, e, dropout)) << dtype << e << dropout;
  EXPECT_FALSE(kernels.fused_attention_supports(kFloat64, 64, 64, true));
  EXPECT_FALSE(kernels.fused_attention_supports(kFloat64, 64, 64, false));
  EXPECT_FALSE(kernels.fused_attention_supports(kBFloat16, 48, 48, false));
  EXPECT_FALSE(kernels.fused_attention_supports(kBFloat16, 64, 32, false));
  EXPECT_FALSE(kernels.fused_attention_supports(kFloat16, 256, 256, false));
}

TEST(CudaAttention, Float32MatchesTheComposedReference) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (int64_t e : {32, 64, 128}) check_all_lengths(kFloat32, e);
}

TEST(CudaAttention, BFloat16MatchesTheComposedReference) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  for (int64_t e : {32, 64, 128}) check_all_lengths(kBFloat16, e);
}

TEST(CudaAttention, Float16MatchesTheComposedReference) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  for (int64_t e : {32, 64, 128}) check_all_lengths(kFloat16, e);
}

// The deterministic backward (dQ in a pass of its own) against the same reference, and bit for bit
// the same on a second run.
TEST(CudaAttention, DeterministicBackwardMatchesTheReferenceAndRepeatsExactly) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope deterministic(true);
  for (DType dtype : {kBFloat16, kFloat16})
    for (int64_t e : {32, 64, 128}) check_all_lengths(dtype, e);
  Tensor q = randn({2, 200, 64}).to(gpu(), kBFloat16), k = randn({2, 150, 64}).to(gpu(), kBFloat16);
  Tensor v = randn({2, 150, 64}).to(gpu(), kBFloat16), grad_out = randn({2, 200, 64}).to(gpu(), kBFloat16);
  const Result first = fused(q, k, v, grad_out, 0.125, false), second = fused(q, k, v, grad_out, 0.125, false);
  EXPECT_TRUE(all_equal(first.grad_q, second.grad_q));
  EXPECT_TRUE(all_equal(first.grad_k, second.grad_k));
  EXPECT_TRUE(all_equal(first.grad_v, second.grad_v));
}

// A long sequence: many key tiles, the causal tile skipping and the online softmax's rescaling
// over 16 tiles of 64 keys.
TEST(CudaAttention, LongCausalSequenceMatchesTheReference) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  check_case(kBFloat16, 1, 1024, 1024, 64, true);
  check_case(kFloat32, 1, 1024, 1024, 64, true);
}

// Through the op: 4-D [batch, heads, L, E] inputs take the fused kernels on the GPU, and the
// autograd gradients agree with the composed ("math") attention in float64 on the CPU.
TEST(CudaAttention, ScaledDotProductAttentionOnTheGpuMatchesTheMathPath) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const Shape q_shape{2, 3, 37, 64}, kv_shape{2, 3, 45, 64};
    const Tensor q0 = randn(q_shape).to(dtype), k0 = randn(kv_shape).to(dtype), v0 = randn(kv_shape).to(dtype);
    const Tensor grad0 = randn(q_shape).to(dtype);
    auto leaf = [](const Tensor& t, Device device, DType dtype) { return t.to(device, dtype).detach().requires_grad_(); };
    Tensor q = leaf(q0, gpu(), dtype), k = leaf(k0, gpu(), dtype), v = leaf(v0, gpu(), dtype);
    Tensor out = scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    out.backward(grad0.to(gpu()));
    Tensor q64 = leaf(q0, Device::cpu(), kFloat64), k64 = leaf(k0, Device::cpu(), kFloat64);
    Tensor v64 = leaf(v0, Device::cpu(), kFloat64);
    Tensor want = scaled_dot_product_attention_math(q64, k64, v64, {}, 0.0, /*is_causal=*/true);
    want.backward(grad0.to(kFloat64));
    const double tol = attention_tolerance(dtype);
    EXPECT_TRUE(close_at_scale("out", out, want.detach(), tol));
    EXPECT_TRUE(close_at_scale("q.grad", q.grad(), q64.grad(), tol));
    EXPECT_TRUE(close_at_scale("k.grad", k.grad(), k64.grad(), tol));
    EXPECT_TRUE(close_at_scale("v.grad", v.grad(), v64.grad(), tol));
  }
}

// A create_graph backward through the fused kernels (their gradients made again with recorded
// ops) gives the second derivatives of the composed path in float64 on the CPU; with dropout, whose
// mask lives in the kernels, it is refused.
TEST(CudaAttention, CreateGraphBackwardGivesTheComposedSecondDerivatives) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Shape q_shape{2, 2, 19, 32}, kv_shape{2, 2, 23, 32};
  const Tensor q0 = randn(q_shape), k0 = randn(kv_shape), v0 = randn(kv_shape), w = randn(q_shape);
  // The gradients of sum over q, k, v of |d<w, attention> / d input|^2.
  auto second = [&](Device device, DType dtype, bool fused) {
    std::vector<Tensor> in;
    for (const Tensor& t : {q0, k0, v0}) in.push_back(t.to(device, dtype).detach().requires_grad_());
    Tensor out = fused ? scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true)
                       : scaled_dot_product_attention_math(in[0], in[1], in[2], {}, 0.0, true);
    std::vector<Tensor> g = autograd::grad({sum(mul(out, w.to(device, dtype)))}, in, {}, std::nullopt, true);
    Tensor penalty = add(add(sum(mul(g[0], g[0])), sum(mul(g[1], g[1]))), sum(mul(g[2], g[2])));
    return autograd::grad({penalty}, in);
  };
  const std::vector<Tensor> got = second(gpu(), kFloat32, true), want = second(Device::cpu(), kFloat64, false);
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(close_at_scale(names[i], got[i], want[i], 1e-4));

  Tensor q = q0.to(gpu()).requires_grad_(), k = k0.to(gpu()), v = v0.to(gpu());
  Tensor dropped = scaled_dot_product_attention(q, k, v, {}, 0.1, true);
  expect_error([&] { autograd::grad({sum(dropped)}, {q}, {}, std::nullopt, true); },
               {"create_graph", "dropout_p", "attn_mask"});
}

namespace {

// A new [B, H, rows, E] tensor in [B, rows, H, E] memory, as the op makes outputs and gradients.
Tensor flash_layout(int64_t B, int64_t H, int64_t rows, int64_t E, DType dtype) {
  return Tensor::empty({B, rows, H, E}, dtype, gpu()).transpose(1, 2);
}

}  // namespace

// Through the op, q, k, v as a GPT block makes them: the kernels read the views in place, the
// output comes in [B, T, H, hs] memory (its transpose(1, 2) contiguous), and the output and the
// projection's gradient (through the merge of the heads, as gpt.h does it) agree with the
// composed path in float64 on the CPU from the same rounded inputs.
TEST(CudaAttention, PackedHeadViewsThroughTheOpMatchTheMathPath) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const int64_t B = 2, H = 3;
  for (DType dtype : {kFloat32, kBFloat16})
    for (int64_t hs : {32, 64, 128})
      for (int64_t T : {37, 100})
        for (bool causal : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dtype << " hs=" << hs << " T=" << T << (causal ? " causal" : ""));
          const int64_t C = H * hs;
          const Tensor qkv0 = randn({B, T, 3 * C}).to(dtype), seed0 = randn({B, T, C}).to(dtype);
          auto run = [&](Device device, DType type, bool fused) {
            Tensor x = qkv0.to(device, type).detach().requires_grad_();
            const std::vector<Tensor> h = packed_heads(x, H);
            Tensor y = fused ? scaled_dot_product_attention(h[0], h[1], h[2], {}, 0.0, causal)
                             : scaled_dot_product_attention_math(h[0], h[1], h[2], {}, 0.0, causal);
            sum(mul(y.transpose(1, 2).contiguous().view({B, T, C}), seed0.to(device, type))).backward();
            return std::pair{y.detach(), x.grad()};
          };
          const auto got = run(gpu(), dtype, true);
          EXPECT_TRUE(got.first.transpose(1, 2).is_contiguous()) << "the output is not in [B, T, H, hs] memory";
          EXPECT_EQ(got.second.dtype(), dtype);
          const auto want = run(Device::cpu(), kFloat64, false);
          const double tol = attention_tolerance(dtype);
          EXPECT_TRUE(close_at_scale("out", got.first, want.first, tol));
          EXPECT_TRUE(close_at_scale("grad of qkv", got.second, want.second, tol));
        }
}

// The kernels on strided operands (q, k, v views of one packed projection, one of them on a start
// off 16 bytes, which the kernels copy; grad_out a transposed view; out, logsumexp [B, H, T] and the
// gradients in [B, T, H, E] memory) give bit for bit what they give on contiguous copies: a layout
// moves where rows are read and written, not the arithmetic. With dropout (the same generator
// state, so the same mask), the forwards store their masks, and the backwards read them.
TEST(CudaAttention, StridedOperandsGiveTheBitsOfContiguousOnes) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  Kernels& kernels = kernels_for(gpu());
  const int64_t B = 2, H = 3, T = 37;
  for (DType dtype : {kFloat32, kBFloat16, kFloat16})
    for (int64_t E : {32, 64, 128})
      for (bool causal : {false, true})
        for (double dropout_p : {0.0, 0.3}) {
          SCOPED_TRACE(::testing::Message() << dtype << " E=" << E << (causal ? " causal" : "")
                                            << " dropout " << dropout_p);
          const std::vector<Tensor> h = packed_heads(randn({B, T, 3 * H * E}).to(gpu(), dtype), H);
          Tensor q = h[0];
          const Tensor &k = h[1], &v = h[2];
          if (E == 64) {  // q on a start 2 or 4 bytes past 16: the kernels read a copy
            Tensor buffer = Tensor::empty({B * H * T * E + 8}, dtype, gpu());
            Tensor odd = buffer.narrow(0, 1, B * H * T * E).view({B, H, T, E});
            copy_(odd, h[0]);
            q = odd;
          }
          const Tensor grad_out = randn({B, T, H, E}).to(gpu(), dtype).transpose(1, 2);
          const double scale = 1.0 / std::sqrt(static_cast<double>(E));

          Result strided;
          strided.out = flash_layout(B, H, T, E, dtype);
          strided.lse = Tensor::empty({B, H, T}, kFloat32, gpu());
          strided.grad_q = flash_layout(B, H, T, E, dtype);
          strided.grad_k = flash_layout(B, H, T, E, dtype);
          strided.grad_v = flash_layout(B, H, T, E, dtype);
          Tensor rng_state = zeros({3}, kInt64), keep_mask;
          manual_seed(77);
          kernels.attention_forward(q, k, v, scale, causal, dropout_p, strided.out, strided.lse, rng_state,
                                    &keep_mask);
          kernels.attention_backward(grad_out, q, k, v, strided.out, strided.lse, rng_state, keep_mask, scale, causal,
                                     dropout_p, strided.grad_q, strided.grad_k, strided.grad_v);

          Result dense;
          const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(), gc = grad_out.contiguous();
          dense.out = Tensor::empty({B, H, T, E}, dtype, gpu());
          dense.lse = Tensor::empty({B * H, T}, kFloat32, gpu());
          dense.grad_q = Tensor::empty({B, H, T, E}, dtype, gpu());
          dense.grad_k = Tensor::empty({B, H, T, E}, dtype, gpu());
          dense.grad_v = Tensor::empty({B, H, T, E}, dtype, gpu());
          manual_seed(77);
          kernels.attention_forward(qc, kc, vc, scale, causal, dropout_p, dense.out, dense.lse, rng_state,
                                    &keep_mask);
          kernels.attention_backward(gc, qc, kc, vc, dense.out, dense.lse, rng_state, keep_mask, scale, causal,
                                     dropout_p, dense.grad_q, dense.grad_k, dense.grad_v);

          EXPECT_TRUE(all_equal(strided.out, dense.out)) << "out";
          EXPECT_TRUE(all_equal(strided.lse.view({B * H, T}), dense.lse)) << "logsumexp";
          EXPECT_TRUE(all_equal(strided.grad_k, dense.grad_k)) << "grad_k";
          EXPECT_TRUE(all_equal(strided.grad_v, dense.grad_v)) << "grad_v";
          EXPECT_TRUE(all_equal(strided.grad_q, dense.grad_q)) << "grad_q";
        }
  // An output the kernels' vector stores cannot write in place is refused, saying why.
  Tensor q = randn({2, 3, 9, 32}).to(gpu()), buffer = Tensor::empty({2 * 3 * 9 * 32 + 4}, kFloat32, gpu());
  Tensor odd_out = buffer.narrow(0, 1, 2 * 3 * 9 * 32).view({2, 3, 9, 32});
  Tensor lse = Tensor::empty({6, 9}, kFloat32, gpu()), rng_state = zeros({3}, kInt64);
  expect_error([&] { kernels.attention_forward(q, q, q, 0.2, false, 0.0, odd_out, lse, rng_state, nullptr); },
               {"fused attention", "out", "16 bytes"});
}

TEST(CudaAttention, RejectsMismatchedShapesAndAShortRngState) {
  MINIDL_REQUIRE_CUDA();
  Kernels& kernels = kernels_for(gpu());
  Tensor q = randn({2, 8, 64}).to(gpu()), k = randn({2, 9, 64}).to(gpu());
  Tensor out = Tensor::empty({2, 8, 64}, kFloat32, gpu()), lse = Tensor::empty({2, 8}, kFloat32, gpu());
  Tensor rng_state = Tensor::empty({3}, kInt64, Device::cpu());
  const Tensor v = randn({2, 9, 64}).to(gpu());
  EXPECT_THROW(
      kernels.attention_forward(q, k, randn({2, 8, 64}).to(gpu()), 0.125, false, 0.0, out, lse, rng_state, nullptr),
      Error);  // v's length differs from k's
  Tensor short_state = Tensor::empty({2}, kInt64, Device::cpu());
  EXPECT_THROW(kernels.attention_forward(q, k, v, 0.125, false, 0.1, out, lse, short_state, nullptr),
               Error);  // dropout needs [seed, offset, device state]
  EXPECT_THROW(kernels.attention_forward(q, k, v, 0.125, false, 1.5, out, lse, rng_state, nullptr),
               Error);  // dropout_p past 1
  EXPECT_THROW(kernels.attention_forward(randn({2, 8, 48}).to(gpu()), randn({2, 9, 48}).to(gpu()),
                                         randn({2, 9, 48}).to(gpu()), 0.125, false, 0.0, out, lse, rng_state, nullptr),
               Error);  // head size
  // A stored mask of another problem's size (here 1 x 8 x 9 scores, against 2 x 8 x 9).
  Tensor keep_mask, other_mask, state = zeros({3}, kInt64);
  kernels.attention_forward(q, k, v, 0.125, false, 0.1, out, lse, state, &keep_mask);
  Tensor first_out = out.narrow(0, 0, 1), first_lse = lse.narrow(0, 0, 1);
  kernels.attention_forward(q.narrow(0, 0, 1), k.narrow(0, 0, 1), v.narrow(0, 0, 1), 0.125, false, 0.1, first_out,
                            first_lse, state, &other_mask);
  Tensor gq = Tensor::empty(q.shape(), kFloat32, gpu()), gk = Tensor::empty(k.shape(), kFloat32, gpu());
  Tensor gv = Tensor::empty(v.shape(), kFloat32, gpu());
  expect_error([&] {
    kernels.attention_backward(out, q, k, v, out, lse, state, other_mask, 0.125, false, 0.1, gq, gk, gv);
  }, {"fused attention", "keep_mask", "uint8"});
}

// The forward's and the backward's launches, captured once and replayed on new inputs, give what
// eager calls give on those inputs, bit for bit.
TEST(CudaAttention, ForwardAndBackwardReplayInACudaGraph) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  for (DType dtype : {kBFloat16, kFloat32}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const int64_t B = 2, L = 100, S = 90, E = 64;
    Tensor q = randn({B, L, E}).to(gpu(), dtype), k = randn({B, S, E}).to(gpu(), dtype);
    Tensor v = randn({B, S, E}).to(gpu(), dtype), grad_out = randn({B, L, E}).to(gpu(), dtype);
    Result graphed;
    cuda::Graph graph;
    graph.capture_begin();
    graphed = fused(q, k, v, grad_out, 0.125, true);
    graph.capture_end();
    for (int replay = 0; replay < 2; ++replay) {
      for (Tensor* t : {&q, &k, &v, &grad_out}) {
        Tensor fresh = randn(t->shape()).to(gpu(), dtype);
        copy_(*t, fresh);
      }
      graph.replay();
      const Result eager = fused(q, k, v, grad_out, 0.125, true);
      EXPECT_TRUE(all_equal(graphed.out, eager.out)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.lse, eager.lse)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.grad_q, eager.grad_q)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.grad_k, eager.grad_k)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.grad_v, eager.grad_v)) << "replay " << replay;
    }
  }
}

#ifdef MINIDL_WITH_CUDA
// ---- dropout ----

namespace {

constexpr double kDropoutP = 0.3;

// The keep mask a forward drew (float32 1 / 0 [B, L, S] on the CPU), from its rng_state.
Tensor drawn_mask(int64_t B, int64_t L, int64_t S, const Tensor& rng_state) {
  return cuda::attention_dropout_mask(B, L, S, rng_state, kDropoutP, gpu()).to(Device::cpu());
}

double kept_fraction(const Tensor& mask) {
  const std::vector<float> x = mask.contiguous().to_vector<float>();
  double kept = 0;
  for (float m : x) kept += m;
  return kept / static_cast<double>(x.size());
}

// The fraction of elements where two 1 / 0 masks agree (0.7^2 + 0.3^2 = 0.58 for independent ones).
double agreement(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) same += x[i] == y[i];
  return static_cast<double>(same) / static_cast<double>(x.size());
}

void check_dropout_case(DType dtype, int64_t B, int64_t L, int64_t S, int64_t E, bool causal, Mask mask) {
  SCOPED_TRACE(::testing::Message() << dtype << " B=" << B << " L=" << L << " S=" << S << " E=" << E
                                    << (causal ? " causal" : "") << (is_deterministic() ? " deterministic" : "")
                                    << (mask == Mask::kStored ? " stored mask" : " redrawn mask"));
  Tensor q = (randn({B, L, E}) * 1.5).to(gpu(), dtype);
  Tensor k = randn({B, S, E}).to(gpu(), dtype);
  Tensor v = randn({B, S, E}).to(gpu(), dtype);
  Tensor grad_out = randn({B, L, E}).to(gpu(), dtype);
  const double scale = 1.0 / std::sqrt(static_cast<double>(E));
  Tensor rng_state;
  const Result got = fused(q, k, v, grad_out, scale, causal, kDropoutP, &rng_state, mask);
  const Tensor keep = drawn_mask(B, L, S, rng_state);
  const double kept = kept_fraction(keep);
  ASSERT_GT(kept, 0.4) << "the mask drops far more than p = " << kDropoutP;
  ASSERT_LT(kept, 0.95) << "the mask drops far less than p = " << kDropoutP;
  const Result want = attention_reference(q, k, v, grad_out, scale, causal, keep, kDropoutP);
  // The backward's rowsum(dO O) reads the 16-bit output, as FlashAttention's does, and the kept
  // weights' 1 / (1 - p) enlarges that rounding: in bfloat16 with few rows (L = 7) a key's gradient
  // was 2.2% of the largest off the float64 reference in 2 of 61 runs on an H100 (the rest under
  // 2%), so the dropout cases allow 3.5% there. A wrong mask or a missing scale is off by far more.
  const double tol = attention_tolerance(dtype) * (dtype == kBFloat16 ? 1.75 : 1.0);
  EXPECT_TRUE(close_at_scale("out", got.out, want.out, tol));
  EXPECT_TRUE(all_close(got.lse, want.lse.to(kFloat32), 2e-4, 1e-5)) << "logsumexp (undropped)";
  EXPECT_TRUE(close_at_scale("grad_q", got.grad_q, want.grad_q, tol));
  EXPECT_TRUE(close_at_scale("grad_k", got.grad_k, want.grad_k, tol));
  EXPECT_TRUE(close_at_scale("grad_v", got.grad_v, want.grad_v, tol));
}

void check_dropout_cases(DType dtype, Mask mask) {
  constexpr Lengths lengths[] = {{7, 13}, {129, 77}};
  for (int64_t e : {32, 64, 128})
    for (const Lengths& n : lengths)
      for (bool causal : {false, true}) check_dropout_case(dtype, 2, n.L, n.S, e, causal, mask);
}

}  // namespace

// Forward and backward with dropout 0.3 equal the composition that applies the kernels' own mask,
// whether the backward reads the mask the forward stored or redraws it.
TEST(CudaAttention, DropoutFloat32MatchesTheReferenceWithTheSameMask) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (Mask mask : {Mask::kStored, Mask::kRedrawn}) check_dropout_cases(kFloat32, mask);
}

// bfloat16 with the stored mask (the dQ pass) and with the redrawn one, both ways (dQ by atomics,
// and the dQ pass); float16 on one size.
TEST(CudaAttention, DropoutBFloat16MatchesTheReferenceWithTheSameMask) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  check_dropout_cases(kBFloat16, Mask::kStored);
  check_dropout_cases(kBFloat16, Mask::kRedrawn);
  {
    DeterministicScope scope(true);
    check_dropout_cases(kBFloat16, Mask::kRedrawn);
  }
  for (Mask mask : {Mask::kStored, Mask::kRedrawn}) check_dropout_case(kFloat16, 2, 129, 77, 64, true, mask);
}

// The mask the forward stores is the one every pass would draw: the deterministic backward (a dQ
// pass either way) gives the same bits from the stored mask as from the redrawn one, for query and
// key counts that end inside a row block and a tile, causal or not, in every dtype.
TEST(CudaAttention, StoredDropoutMaskGivesTheRedrawnMasksGradientsBitForBit) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope deterministic(true);
  for (DType dtype : {kFloat32, kBFloat16, kFloat16})
    for (int64_t E : {32, 128})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype << " E=" << E << (causal ? " causal" : ""));
        const int64_t B = 3, L = 150, S = 141;
        Tensor q = randn({B, L, E}).to(gpu(), dtype), k = randn({B, S, E}).to(gpu(), dtype);
        Tensor v = randn({B, S, E}).to(gpu(), dtype), grad_out = randn({B, L, E}).to(gpu(), dtype);
        const Generator::State before = default_generator().state();
        const Result stored = fused(q, k, v, grad_out, 0.2, causal, kDropoutP, nullptr, Mask::kStored);
        default_generator().set_state(before);
        const Result redrawn = fused(q, k, v, grad_out, 0.2, causal, kDropoutP, nullptr, Mask::kRedrawn);
        EXPECT_TRUE(all_equal(stored.out, redrawn.out)) << "out";
        EXPECT_TRUE(all_equal(stored.grad_q, redrawn.grad_q)) << "grad_q";
        EXPECT_TRUE(all_equal(stored.grad_k, redrawn.grad_k)) << "grad_k";
        EXPECT_TRUE(all_equal(stored.grad_v, redrawn.grad_v)) << "grad_v";
      }
}

// The mask keeps 1 - p of a large draw (within 5 binomial standard deviations), differs between
// forwards, batches and rows, and repeats under the same manual_seed.
TEST(CudaAttention, DropoutMaskKeepsOneMinusPAndFollowsTheGenerator) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const int64_t B = 4, L = 300, S = 301, E = 32;
  Tensor q = randn({B, L, E}).to(gpu()), k = randn({B, S, E}).to(gpu()), v = randn({B, S, E}).to(gpu());
  Tensor grad_out = randn({B, L, E}).to(gpu());
  Tensor state1, state2;
  const Result first = fused(q, k, v, grad_out, 0.2, false, kDropoutP, &state1);
  const Result second = fused(q, k, v, grad_out, 0.2, false, kDropoutP, &state2);
  const Tensor mask1 = drawn_mask(B, L, S, state1), mask2 = drawn_mask(B, L, S, state2);
  const double n = static_cast<double>(mask1.numel());
  EXPECT_NEAR(kept_fraction(mask1), 1 - kDropoutP, 5 * std::sqrt(kDropoutP * (1 - kDropoutP) / n));
  EXPECT_LT(agreement(mask1, mask2), 0.65) << "two forwards drew the same mask";
  EXPECT_LT(agreement(select(mask1, 0, 0), select(mask1, 0, 1)), 0.65) << "batches 0 and 1 share a mask";
  EXPECT_LT(agreement(select(mask1, 1, 0), select(mask1, 1, 1)), 0.65) << "rows 0 and 1 share a mask";
  // One Philox block serves rows i and i + 8 and keys j, j + 1, j + 8 and j + 9: each its own 16 bits.
  EXPECT_LT(agreement(select(mask1, 1, 0), select(mask1, 1, 8)), 0.65) << "rows 0 and 8 share a mask";
  EXPECT_LT(agreement(select(mask1, 2, 16), select(mask1, 2, 24)), 0.65) << "keys 16 and 24 share a mask";
  EXPECT_LT(agreement(select(mask1, 2, 16), select(mask1, 2, 17)), 0.65) << "keys 16 and 17 share a mask";
  EXPECT_FALSE(all_equal(first.out, second.out));
  EXPECT_FALSE(all_equal(first.grad_k, second.grad_k));

  manual_seed(1234);
  const Result again1 = fused(q, k, v, grad_out, 0.2, false, kDropoutP);
  manual_seed(1234);
  const Result again2 = fused(q, k, v, grad_out, 0.2, false, kDropoutP);
  EXPECT_TRUE(all_equal(again1.out, again2.out));
  EXPECT_TRUE(all_equal(again1.grad_v, again2.grad_v));
}

// Through the op: scaled_dot_product_attention with dropout takes the fused kernels on the GPU (its
// draw is the generator's next one), and matches the masked math attention in float64.
TEST(CudaAttention, ScaledDotProductAttentionWithDropoutMatchesTheMaskedMathPath) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Shape q_shape{2, 3, 37, 64}, kv_shape{2, 3, 45, 64};
  const Tensor q0 = randn(q_shape), k0 = randn(kv_shape), v0 = randn(kv_shape), grad0 = randn(q_shape);
  auto leaf = [](const Tensor& t, Device device, DType dtype) {
    return t.to(device, dtype).detach().requires_grad_();
  };
  Tensor q = leaf(q0, gpu(), kFloat32), k = leaf(k0, gpu(), kFloat32), v = leaf(v0, gpu(), kFloat32);
  const Generator::State before = default_generator().state();
  Tensor out = scaled_dot_product_attention(q, k, v, {}, kDropoutP, /*is_causal=*/true);
  out.backward(grad0.to(gpu()));
  Tensor rng_state = zeros({3}, kInt64);
  rng_state.data_ptr<int64_t>()[0] = static_cast<int64_t>(before.seed);
  rng_state.data_ptr<int64_t>()[1] = static_cast<int64_t>(before.offset);
  const Tensor keep = reshape(drawn_mask(6, 37, 45, rng_state), {2, 3, 37, 45}).to(kFloat64);
  Tensor q64 = leaf(q0, Device::cpu(), kFloat64), k64 = leaf(k0, Device::cpu(), kFloat64);
  Tensor v64 = leaf(v0, Device::cpu(), kFloat64);
  Tensor scores = matmul(q64, transpose(k64, 2, 3)) * 0.125;
  scores = masked_fill(scores, gt(triu(ones({37, 45}, kFloat64), 1), zeros({37, 45}, kFloat64)),
                       -std::numeric_limits<double>::infinity());
  Tensor want = matmul(softmax(scores, -1) * (keep * (1.0 / (1.0 - kDropoutP))), v64);
  want.backward(grad0.to(kFloat64));
  const double tol = attention_tolerance(kFloat32);
  EXPECT_TRUE(close_at_scale("out", out, want.detach(), tol));
  EXPECT_TRUE(close_at_scale("q.grad", q.grad(), q64.grad(), tol));
  EXPECT_TRUE(close_at_scale("k.grad", k.grad(), k64.grad(), tol));
  EXPECT_TRUE(close_at_scale("v.grad", v.grad(), v64.grad(), tol));
}

// Captured with dropout, each replay draws a new mask (the graph's device-side Philox state) and
// its backward uses its own forward's: each replay equals an eager run from the generator state
// the replay started at, bit for bit, and the two replays differ.
TEST(CudaAttention, DropoutInACudaGraphDrawsANewMaskEachReplay) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  DeterministicScope atomics(false);
  for (DType dtype : {kBFloat16, kFloat32}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const int64_t B = 2, L = 100, S = 90, E = 64;
    Tensor q = randn({B, L, E}).to(gpu(), dtype), k = randn({B, S, E}).to(gpu(), dtype);
    Tensor v = randn({B, S, E}).to(gpu(), dtype), grad_out = randn({B, L, E}).to(gpu(), dtype);
    Result graphed;
    cuda::Graph graph;
    graph.capture_begin();
    graphed = fused(q, k, v, grad_out, 0.125, true, kDropoutP);
    graph.capture_end();
    Tensor previous_out;
    for (int replay = 0; replay < 2; ++replay) {
      const Generator::State before = default_generator().state();
      graph.replay();
      default_generator().set_state(before);
      const Result eager = fused(q, k, v, grad_out, 0.125, true, kDropoutP);
      EXPECT_TRUE(all_equal(graphed.out, eager.out)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.lse, eager.lse)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.grad_q, eager.grad_q)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.grad_k, eager.grad_k)) << "replay " << replay;
      EXPECT_TRUE(all_equal(graphed.grad_v, eager.grad_v)) << "replay " << replay;
      if (replay == 1) {
        EXPECT_FALSE(all_equal(graphed.out, previous_out)) << "two replays drew the same mask";
      }
      previous_out = graphed.out.clone();
    }
  }
}
#endif  // MINIDL_WITH_CUDA

}  // namespace minidl::cuda_attention_test
