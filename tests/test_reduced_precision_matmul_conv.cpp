// Matrix products and convolutions in bfloat16 and float16, forward and backward, against float32
// on the same device: the same inputs (drawn, then rounded to 16 bits, so both runs see the same
// values), the same output gradient. The 16-bit results may differ from float32's by their own
// roundings: the output's, and intermediate tensors' (a conv's output before its bias, a masked
// gradient) that are 16-bit too. Each element must lie within tol * (|reference| + rms(reference))
// with tol 1e-2 for bfloat16 (8 bits of mantissa) and 2e-3 for float16 (11 bits): for unit-normal
// inputs the reference's rms grows as sqrt(K), the depth of the sums, so the bound scales with it.
//
// The CUDA tests (suite CudaReducedPrecision*) skip without a GPU; on one they run cuBLASLt/cuBLAS in
// 16 bits, cuDNN in tensor-op math (Auto and Cudnn backends), and the Im2col backend, which computes
// 16-bit convolutions in float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/cuda_graph.h"
#include "core/deterministic.h"
#include "minidl.h"
#include "ops/backend_setting.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::reduced_precision_matmul_conv_test {

using namespace minidl::testing;

namespace {

using Op = std::function<Tensor(const std::vector<Tensor>&)>;
// A float32 reference that also sees the 16-bit op's output (see relu_as_in).
using RefOp = std::function<Tensor(const std::vector<Tensor>&, const Tensor&)>;

double tolerance(DType dtype) { return dtype == kBFloat16 ? 1e-2 : 2e-3; }

double rms(const Tensor& t) {
  const std::vector<double> v = t.detach().to(Device::cpu()).to(kFloat64).to_vector<double>();
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0 : std::sqrt(s / static_cast<double>(v.size()));
}

// `low` (16-bit) against `ref` (float32): dtype, shape, and every element within the tolerance.
::testing::AssertionResult close_to_float32(const Tensor& low, const Tensor& ref, DType dtype, double scale = 1) {
  if (!low.defined() || !ref.defined()) return ::testing::AssertionFailure() << "a result is undefined";
  if (low.dtype() != dtype) return ::testing::AssertionFailure() << "dtype " << low.dtype() << ", expected " << dtype;
  const double t = scale * tolerance(dtype);
  return all_close(low.detach().to(kFloat32), ref.detach(), t * rms(ref), t);
}

// Unit-normal values, rounded to `dtype` and back: exactly representable in it.
Tensor draw(const Shape& shape, DType dtype) { return randn(shape).to(dtype).to(kFloat32); }

// `pre` (float32) through a ReLU whose mask is the 16-bit output's. A 16-bit convolution rounds its
// output before the bias and the ReLU, so an output within that rounding of zero may come out with
// the other sign than in float32; its gradient then flows in one and not in the other, a difference
// of a whole gradient element. The reference takes the 16-bit op's mask (the forward still differs
// from relu(pre) only where the value is about zero), and so tests what follows it exactly.
Tensor relu_as_in(const Tensor& pre, const Tensor& low_out) {
  return pre * gt(low_out.detach().to(kFloat32), 0).to(kFloat32);
}

// Runs `op` on 16-bit copies of `inputs` and on float32 ones (or `ref_op` on the float32 ones), as
// leaves on `device`; compares the outputs and the gradients of every input for one drawn output
// gradient.
void expect_matches_float32(const char* what, const Op& op, const std::vector<Tensor>& inputs, DType dtype,
                            Device device, const RefOp& ref_op = nullptr, double tolerance_scale = 1) {
  SCOPED_TRACE(std::string(what) + " in " + dtype_name(dtype) + " on " + (device.is_cpu() ? "cpu" : "cuda"));
  std::vector<Tensor> low, ref;
  for (const Tensor& t : inputs) {
    // Fresh leaves each time: a case's inputs serve several ops.
    low.push_back(t.detach().to(device, dtype).requires_grad_());
    ref.push_back(t.detach().to(device, kFloat32).clone().requires_grad_());
  }
  Tensor y = op(low), y_ref = ref_op ? ref_op(ref, y) : op(ref);
  ASSERT_EQ(shape_str(y.shape()), shape_str(y_ref.shape()));
  EXPECT_TRUE(close_to_float32(y, y_ref, dtype, tolerance_scale)) << "output";
  const Tensor g = draw(y.shape(), dtype);
  y.backward(g.to(device, dtype));
  y_ref.backward(g.to(device));
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(low[i].grad().defined()) << "no gradient for input " << i;
    if (low[i].grad().defined()) {
      EXPECT_TRUE(close_to_float32(low[i].grad(), ref[i].grad(), dtype, tolerance_scale)) << "gradient of input " << i;
    }
  }
}

void matmul_cases(DType dtype, Device device) {
  manual_seed(301);
  const auto mm2 = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  expect_matches_float32("matmul [24, 40] @ [40, 18]", mm2, {draw({24, 40}, dtype), draw({40, 18}, dtype)}, dtype,
                         device);
  // A transposed operand goes to the GEMM as a trans flag.
  expect_matches_float32(
      "matmul a^T @ b", [](const std::vector<Tensor>& t) { return matmul(transpose(t[0], 0, 1), t[1]); },
      {draw({40, 24}, dtype), draw({40, 18}, dtype)}, dtype, device);
  expect_matches_float32("bmm [3, 8, 20] @ [3, 20, 12]", [](const std::vector<Tensor>& t) { return bmm(t[0], t[1]); },
                         {draw({3, 8, 20}, dtype), draw({3, 20, 12}, dtype)}, dtype, device);
  // A 2-D side shared by the batch: its gradient sums over the batch.
  expect_matches_float32("matmul [3, 8, 20] @ [20, 12]", mm2, {draw({3, 8, 20}, dtype), draw({20, 12}, dtype)}, dtype,
                         device);
  expect_matches_float32("matmul [20, 8] @ [3, 8, 12]", mm2, {draw({20, 8}, dtype), draw({3, 8, 12}, dtype)}, dtype,
                         device);
}

// addmm and its family: one GEMM into the input's copy (addmm, baddbmm), linear's bias epilogue
// (a bias row, beta = alpha = 1), and the vector forms.
void blas_product_cases(DType dtype, Device device) {
  manual_seed(303);
  using V = const std::vector<Tensor>&;
  expect_matches_float32("addmm bias row", [](V t) { return addmm(t[0], t[1], t[2].t()); },
                         {draw({18}, dtype), draw({24, 40}, dtype), draw({18, 40}, dtype)}, dtype, device);
  expect_matches_float32("addmm beta alpha", [](V t) { return addmm(t[0], t[1], t[2], 0.5, 2.0); },
                         {draw({24, 18}, dtype), draw({24, 40}, dtype), draw({40, 18}, dtype)}, dtype, device);
  expect_matches_float32("baddbmm broadcast mask",
                         [](V t) { return baddbmm(t[0], t[1], t[2].transpose(1, 2), 1.0, 0.25); },
                         {draw({1, 8, 12}, dtype), draw({3, 8, 20}, dtype), draw({3, 12, 20}, dtype)}, dtype, device);
  expect_matches_float32("addbmm", [](V t) { return addbmm(t[0], t[1], t[2]); },
                         {draw({8, 12}, dtype), draw({3, 8, 20}, dtype), draw({3, 20, 12}, dtype)}, dtype, device);
  expect_matches_float32("addmv", [](V t) { return addmv(t[0], t[1], t[2], 0.5, 2.0); },
                         {draw({24}, dtype), draw({24, 40}, dtype), draw({40}, dtype)}, dtype, device);
  expect_matches_float32("addr", [](V t) { return addr(t[0], t[1], t[2]); },
                         {draw({24, 18}, dtype), draw({24}, dtype), draw({18}, dtype)}, dtype, device);
  expect_matches_float32("mv", [](V t) { return mv(t[0], t[1]); }, {draw({24, 40}, dtype), draw({40}, dtype)}, dtype,
                         device);
  expect_matches_float32("dot", [](V t) { return dot(t[0], t[1]); }, {draw({40}, dtype), draw({40}, dtype)}, dtype,
                         device);
  expect_matches_float32("outer", [](V t) { return outer(t[0], t[1]); }, {draw({24}, dtype), draw({18}, dtype)},
                         dtype, device);
  // cdist from one product (more than 25 rows) and from the differences.
  expect_matches_float32("cdist by a product", [](V t) { return cdist(t[0], t[1]); },
                         {draw({30, 16}, dtype), draw({28, 16}, dtype)}, dtype, device, nullptr, 4);
  expect_matches_float32("cdist by differences", [](V t) { return cdist(t[0], t[1], 1.0); },
                         {draw({6, 16}, dtype), draw({5, 16}, dtype)}, dtype, device, nullptr, 2);
}

void linear_cases(DType dtype, Device device) {
  manual_seed(302);
  // 40 outputs: cuBLASLt's epilogues; 8 outputs: a narrow layer (minidl's own float32 kernels refuse
  // 16 bits, so cuBLASLt again).
  for (const int64_t out : {40, 8}) {
    const std::vector<Tensor> in{draw({33, 56}, dtype), draw({out, 56}, dtype), draw({out}, dtype)};
    expect_matches_float32("linear", [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); }, in, dtype,
                           device);
    expect_matches_float32("linear without bias", [](const std::vector<Tensor>& t) { return linear(t[0], t[1]); },
                           {in[0], in[1]}, dtype, device);
    expect_matches_float32("linear_relu", [](const std::vector<Tensor>& t) { return linear_relu(t[0], t[1], t[2]); },
                           in, dtype, device);
  }
  expect_matches_float32("linear on [2, 5, 24]", [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); },
                         {draw({2, 5, 24}, dtype), draw({16, 24}, dtype), draw({16}, dtype)}, dtype, device);
  for (const int64_t out : {10, 24}) {
    expect_matches_float32(
        "linear_relu_linear",
        [](const std::vector<Tensor>& t) { return linear_relu_linear(t[0], t[1], t[2], t[3], t[4]); },
        {draw({48, 64}, dtype), draw({32, 64}, dtype), draw({32}, dtype), draw({out, 32}, dtype), draw({out}, dtype)},
        dtype, device, nullptr,
        // Two layers round twice: the first weight's gradient comes from a hidden gradient already
        // rounded to 16 bits. On an H200, 200 random bfloat16 cases of this shape erred by up to 2.3%
        // of the gradient's rms, the fused kernel and the composition of 16-bit linear and relu alike.
        3);
  }
}

void conv_cases(DType dtype, Device device) {
  manual_seed(303);
  const std::vector<Tensor> in{draw({2, 3, 9, 8}, dtype), draw({5, 3, 3, 3}, dtype), draw({5}, dtype)};
  expect_matches_float32("conv2d", [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2]); }, in, dtype,
                         device);
  expect_matches_float32(
      "conv2d stride 2, padding 1, dilation 2",
      [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], Size2(2, 2), Size2(1, 1), Size2(2, 2)); }, in,
      dtype, device);
  expect_matches_float32("conv2d without bias", [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1]); },
                         {in[0], in[1]}, dtype, device);
  expect_matches_float32(
      "conv2d_relu",
      [](const std::vector<Tensor>& t) { return conv2d_relu(t[0], t[1], t[2], Size2(1, 1), Size2(1, 1)); }, in, dtype,
      device, [](const std::vector<Tensor>& t, const Tensor& low) {
        return relu_as_in(conv2d(t[0], t[1], t[2], Size2(1, 1), Size2(1, 1)), low);
      });
  expect_matches_float32(
      "conv1d", [](const std::vector<Tensor>& t) { return conv1d(t[0], t[1], t[2], 1, 1); },
      {draw({2, 4, 15}, dtype), draw({6, 4, 3}, dtype), draw({6}, dtype)}, dtype, device);
  expect_matches_float32(
      "conv_transpose2d",
      [](const std::vector<Tensor>& t) {
        return conv_transpose2d(t[0], t[1], t[2], Size2(2, 2), Size2(1, 1), Size2(1, 1));
      },
      {draw({2, 4, 5, 6}, dtype), draw({4, 3, 3, 3}, dtype), draw({3}, dtype)}, dtype, device);
  // Two groups: computed in float32 on every device (cuDNN's path here takes one group).
  expect_matches_float32(
      "conv_transpose2d, 2 groups",
      [](const std::vector<Tensor>& t) {
        return conv_transpose2d(t[0], t[1], t[2], Size2(1, 1), Size2(0, 0), Size2(0, 0), 2);
      },
      {draw({2, 4, 5, 6}, dtype), draw({4, 2, 3, 3}, dtype), draw({4}, dtype)}, dtype, device);
}

// The fused ReLU and max pool. Near-equal values in a window may swap order when rounded to 16 bits,
// which would route a gradient to another element than float32's: so each 2 x 2 window of the input
// holds a permutation of four values 1 apart (plus noise), and the convolution is 1 x 1 over one
// channel with weights of magnitude at least 0.5, which keeps every window's maximum clear. The
// image has an odd row past the last window (the pool drops it).
void conv_pool_cases(DType dtype, Device device) {
  manual_seed(304);
  const int64_t n = 2, h = 7, w = 6, out_channels = 4;
  std::vector<float> image(static_cast<size_t>(n * h * w));
  const std::vector<float> noise = randn({n * h * w}).mul(0.05).to_vector<float>();
  const std::vector<float> order = rand({n * h * w}).to_vector<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        const size_t at = static_cast<size_t>((b * h + i) * w + j);
        // The rank of this element's draw among its window's four draws picks its level.
        const int64_t i0 = i / 2 * 2, j0 = j / 2 * 2;
        int rank = 0;
        for (int64_t di = 0; di < 2; ++di)
          for (int64_t dj = 0; dj < 2; ++dj) {
            const int64_t ii = std::min(i0 + di, h - 1);
            if (order[static_cast<size_t>((b * h + ii) * w + j0 + dj)] < order[at]) ++rank;
          }
        image[at] = static_cast<float>(rank) - 1.5f + noise[at];
      }
  std::vector<float> weight = randn({out_channels}).to_vector<float>();
  for (float& v : weight) v = std::copysign(0.5f + std::abs(v), v);
  const Tensor x = Tensor::from_vector(image, {n, 1, h, w}).to(dtype).to(kFloat32);
  const Tensor wt = Tensor::from_vector(weight, {out_channels, 1, 1, 1}).to(dtype).to(kFloat32);
  expect_matches_float32(
      "conv2d_relu_max_pool2d",
      [](const std::vector<Tensor>& t) {
        return conv2d_relu_max_pool2d(t[0], t[1], t[2], Size2(1, 1), Size2(0, 0), Size2(1, 1), 2);
      },
      {x, wt, draw({out_channels}, dtype).mul(0.2)}, dtype, device,
      // The pool's maximum before the ReLU, masked as the 16-bit output: relu_as_in says why.
      [](const std::vector<Tensor>& t, const Tensor& low) {
        return relu_as_in(max_pool2d(conv2d(t[0], t[1], t[2]), Size2(2, 2)), low);
      });
}

class ReducedPrecision : public ::testing::TestWithParam<DType> {};
class CudaReducedPrecision : public ::testing::TestWithParam<DType> {};

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

}  // namespace

TEST_P(ReducedPrecision, MatmulAndBmm) { matmul_cases(GetParam(), Device::cpu()); }
TEST_P(ReducedPrecision, LinearAndFusedLinear) { linear_cases(GetParam(), Device::cpu()); }
TEST_P(ReducedPrecision, BlasProducts) { blas_product_cases(GetParam(), Device::cpu()); }
TEST_P(ReducedPrecision, Convolutions) { conv_cases(GetParam(), Device::cpu()); }
TEST_P(ReducedPrecision, ConvReluMaxPool) { conv_pool_cases(GetParam(), Device::cpu()); }

// The CPU computes 16-bit convolutions in float32 on every backend; Im2col is the path without
// oneDNN.
TEST_P(ReducedPrecision, ConvolutionsOnIm2col) {
  ConvBackendScope scope(ConvBackend::Im2col);
  conv_cases(GetParam(), Device::cpu());
}

TEST_P(CudaReducedPrecision, MatmulAndBmm) {
  MINIDL_REQUIRE_CUDA();
  matmul_cases(GetParam(), gpu());
}

TEST_P(CudaReducedPrecision, LinearAndFusedLinear) {
  MINIDL_REQUIRE_CUDA();
  linear_cases(GetParam(), gpu());
}

TEST_P(CudaReducedPrecision, BlasProducts) {
  MINIDL_REQUIRE_CUDA();
  blas_product_cases(GetParam(), gpu());
}

// A shape run twice: the second call times cuBLASLt's configurations in 16 bits; the result must not
// change beyond the tolerance.
TEST_P(CudaReducedPrecision, LinearAfterGemmTiming) {
  MINIDL_REQUIRE_CUDA();
  for (int call = 0; call < 3; ++call) linear_cases(GetParam(), gpu());
}

TEST_P(CudaReducedPrecision, ConvolutionsOnCudnn) {
  MINIDL_REQUIRE_CUDNN();
  ConvBackendScope scope(ConvBackend::Cudnn);
  conv_cases(GetParam(), gpu());
  conv_pool_cases(GetParam(), gpu());
}

TEST_P(CudaReducedPrecision, ConvolutionsOnAuto) {
  MINIDL_REQUIRE_CUDA();
  ConvBackendScope scope(ConvBackend::Auto);
  conv_cases(GetParam(), gpu());
  conv_pool_cases(GetParam(), gpu());
}

TEST_P(CudaReducedPrecision, ConvolutionsOnIm2col) {
  MINIDL_REQUIRE_CUDA();
  ConvBackendScope scope(ConvBackend::Im2col);
  conv_cases(GetParam(), gpu());
  conv_pool_cases(GetParam(), gpu());
}


// A 16-bit operand with a float32 one is refused with both dtypes named (autocast casts first).
TEST(ReducedPrecisionErrors, MixedDtypesAreRefused) {
  expect_error([] { matmul(randn({2, 3}).to(kBFloat16), randn({3, 2})); }, {"matmul", "bfloat16", "float32"});
  expect_error([] { linear(randn({2, 3}).to(kHalf), randn({4, 3})); }, {"linear", "float16", "float32"});
  expect_error([] { conv2d(randn({1, 1, 4, 4}).to(kBFloat16), randn({1, 1, 3, 3})); },
               {"conv2d", "bfloat16", "float32"});
}

// Deterministic mode takes no timed choice: 16-bit convolutions then compute in float32 on im2col,
// the same bits run to run, within the dtype's tolerance of float32.
TEST_P(CudaReducedPrecision, ConvolutionsInDeterministicMode) {
  MINIDL_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Restore {
    bool was = is_deterministic();
    ~Restore() { set_deterministic(was); }
  } restore;
  set_deterministic(true);
  conv_cases(dtype, gpu());
  manual_seed(305);
  const Tensor x = draw({2, 3, 9, 8}, dtype).to(gpu(), dtype), w = draw({5, 3, 3, 3}, dtype).to(gpu(), dtype);
  EXPECT_TRUE(all_equal(conv2d_relu(x, w, Tensor(), Size2(1, 1), Size2(1, 1)),
                        conv2d_relu(x, w, Tensor(), Size2(1, 1), Size2(1, 1))));
}

// Shapes first met inside a CUDA graph capture: the GEMM runs cuBLASLt's heuristic pick and the
// convolution cuDNN's heuristic algorithms (nothing is timed while capturing); the replay gives the
// eager result within the dtype's tolerance. Each op runs eagerly first at another shape, so that
// handles and workspaces exist before the capture.
TEST_P(CudaReducedPrecision, ShapesFirstMetInAGraphCapture) {
  MINIDL_REQUIRE_CUDA();
  const DType dtype = GetParam();
  manual_seed(306);
  const auto on_gpu = [dtype](const Shape& shape) { return draw(shape, dtype).to(gpu(), dtype); };
  NoGradGuard no_grad;
  linear_relu(on_gpu({5, 7}), on_gpu({3, 7}), on_gpu({3}));
  conv2d_relu(on_gpu({1, 2, 6, 6}), on_gpu({2, 2, 3, 3}), on_gpu({2}));
  const Tensor x = on_gpu({20, 48}), w = on_gpu({32, 48}), b = on_gpu({32});
  const Tensor image = on_gpu({2, 4, 11, 10}), filter = on_gpu({6, 4, 3, 3}), bias = on_gpu({6});
  Tensor y1, y2;
  cuda::Graph graph;
  graph.capture_begin();
  y1 = linear_relu(x, w, b);
  y2 = conv2d_relu(image, filter, bias, Size2(1, 1), Size2(1, 1));
  graph.capture_end();
  graph.replay();
  EXPECT_TRUE(close_to_float32(y1, linear_relu(x, w, b).to(kFloat32), dtype));
  EXPECT_TRUE(close_to_float32(y2, conv2d_relu(image, filter, bias, Size2(1, 1), Size2(1, 1)).to(kFloat32), dtype));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReducedPrecision, ::testing::Values(kBFloat16, kHalf), dtype_param_name);
INSTANTIATE_TEST_SUITE_P(Dtypes, CudaReducedPrecision, ::testing::Values(kBFloat16, kHalf), dtype_param_name);

}  // namespace minidl::reduced_precision_matmul_conv_test
