// The ops of a mixed-precision model on bfloat16 and float16 tensors, against float32. Each case
// draws float32 inputs, rounds them to the 16-bit dtype, and runs the op twice: on the 16-bit
// tensors and on the same values in float32. The 16-bit result must be the float32 result rounded
// to 16 bits, within a few units in the last place (the 16-bit kernels compute in float32 and round
// once; an op composed of several kernels rounds between them, hence its wider tolerance), and
// must itself be 16-bit. The gradients (where the op has one) are checked the same way, with the
// same upstream gradient rounded to 16 bits. It runs on the CPU, on CUDA, and CPU against CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/deterministic.h"
#include "minidl.h"
#include "ops/pointwise.h"
#include "test_cuda_util.h"

namespace minidl::reduced_precision_ops_test {

namespace {

// Inputs' ranges: anywhere (normal draws), positive (for log, sqrt, pow's base, a divisor), or
// inside (-0.9, 0.9) (asin, acos, tan, probabilities after a shift).
enum class Domain { Any, Positive, Unit };

struct OpCase {
  std::string name;
  std::vector<Shape> shapes;                                       // the floating inputs
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;  // its outputs, first one differentiated
  Domain domain = Domain::Any;
  bool differentiable = true;
  double tolerance = 1;  // in units of the dtype's: more for ops composed of several rounding kernels
};

// About two units in the last place: bfloat16 keeps 8 significant bits, float16 11.
double rtol_of(DType dtype) { return dtype == kBFloat16 ? 1.6e-2 : 2e-3; }

Tensor draw(const Shape& shape, Domain domain) {
  switch (domain) {
    case Domain::Positive: return uniform(shape, 0.25, 2.0);
    case Domain::Unit: return uniform(shape, -0.9, 0.9);
    case Domain::Any: break;
  }
  return randn(shape);
}

// |got - want| <= tol * rtol * (|want| + mean |want|): a few ulps of each element, and of the
// tensor's typical size where a result cancels to near zero. Integer outputs must match exactly.
::testing::AssertionResult close_in(const Tensor& got, const Tensor& want, DType dtype, double tol) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << minidl::testing::shape_str(got.shape()) << " vs "
                                         << minidl::testing::shape_str(want.shape());
  if (!is_floating(want.dtype())) {
    if (got.dtype() != want.dtype())
      return ::testing::AssertionFailure() << "dtype " << got.dtype() << " vs " << want.dtype();
    std::vector<double> a = got.to(Device::cpu()).to(kFloat64).to_vector<double>();
    std::vector<double> b = want.to(Device::cpu()).to(kFloat64).to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    return ::testing::AssertionSuccess();
  }
  if (got.dtype() != dtype)
    return ::testing::AssertionFailure() << "result dtype " << got.dtype() << ", expected " << dtype;
  std::vector<double> a = got.to(Device::cpu()).to(kFloat64).to_vector<double>();
  // The float32 result rounded to the 16-bit dtype: what a kernel computing in float32 stores.
  std::vector<double> b = want.to(Device::cpu()).to(dtype).to(kFloat64).to_vector<double>();
  double scale = 0;
  for (double v : b) scale += std::isfinite(v) ? std::fabs(v) : 0.0;
  scale /= std::max<size_t>(b.size(), 1);
  const double rtol = tol * rtol_of(dtype);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;  // infinities too
    if (!(std::fabs(a[i] - b[i]) <= rtol * (std::fabs(b[i]) + scale)))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i] << " (rtol " << rtol
                                           << ", mean magnitude " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

struct Result {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;
};

// Runs the case on `inputs` (leaves made here), and its backward with upstream gradient `upstream`.
Result run_case(const OpCase& c, const std::vector<Tensor>& inputs, const Tensor& upstream) {
  std::vector<Tensor> leaves;
  for (const Tensor& x : inputs) {
    Tensor leaf = x.clone();
    if (c.differentiable) leaf.requires_grad_();
    leaves.push_back(leaf);
  }
  Result r;
  r.outputs = c.run(leaves);
  if (c.differentiable) {
    r.outputs[0].backward(upstream.to(r.outputs[0].dtype()));
    for (const Tensor& leaf : leaves) r.grads.push_back(leaf.grad());
  }
  for (Tensor& out : r.outputs) out = out.detach();
  return r;
}

void expect_results_close(const Result& got, const Result& want, DType dtype, double tol, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < got.outputs.size(); ++i)
    EXPECT_TRUE(close_in(got.outputs[i], want.outputs[i], dtype, tol)) << what << ": output " << i;
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    // An input the case detaches (a target, running statistics) has a gradient in neither.
    ASSERT_EQ(got.grads[i].defined(), want.grads[i].defined()) << what << ": gradient of input " << i;
    if (!got.grads[i].defined()) continue;
    EXPECT_TRUE(close_in(got.grads[i], want.grads[i], dtype, tol)) << what << ": gradient of input " << i;
  }
}

// Runs every case on `device` in `dtype` and in float32, and (with `against_cpu`) on the CPU in dtype.
void sweep(const std::vector<OpCase>& cases, DType dtype, Device device, bool against_cpu) {
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name + " in " + dtype_name(dtype));
    std::vector<Tensor> narrow, wide, narrow_cpu;
    for (const Shape& shape : c.shapes) {
      Tensor x = draw(shape, c.domain).to(dtype);
      narrow_cpu.push_back(x);
      narrow.push_back(x.to(device));
      wide.push_back(x.to(kFloat32).to(device));
    }
    Result r16, r32;
    try {
      // The upstream gradient: the first output's shape, drawn once and rounded to dtype.
      const Shape out_shape = c.run(narrow)[0].shape();
      const Tensor upstream = randn(out_shape).to(dtype);
      r16 = run_case(c, narrow, upstream.to(device));
      r32 = run_case(c, wide, upstream.to(kFloat32).to(device));
      expect_results_close(r16, r32, dtype, c.tolerance, "16-bit vs float32");
      if (against_cpu) {
        Result cpu = run_case(c, narrow_cpu, upstream);
        // Both round the same float32 computation; the CUDA one is the "got" side.
        expect_results_close(r16, cpu, dtype, c.tolerance * 2, "CUDA vs CPU");
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

std::vector<Tensor> max_of(const Tensor& x, int64_t dim) {
  MaxResult r = max(x, dim);
  return {r.values, r.indices};
}

std::vector<OpCase> elementwise_cases() {
  using V = const std::vector<Tensor>&;
  const Shape s{3, 40};  // 120 elements: the 16-byte vectorized CUDA path, no tail
  const Shape odd{5, 7};  // a tail and an unaligned end
  std::vector<OpCase> cases = {
      {"neg", {odd}, [](V x) { return one(neg(x[0])); }},
      {"exp", {s}, [](V x) { return one(exp(x[0])); }},
      {"log", {s}, [](V x) { return one(log(x[0])); }, Domain::Positive},
      {"sqrt", {odd}, [](V x) { return one(sqrt(x[0])); }, Domain::Positive},
      {"relu", {s}, [](V x) { return one(relu(x[0])); }},
      {"relu odd", {odd}, [](V x) { return one(relu(x[0])); }},
      {"sigmoid", {s}, [](V x) { return one(sigmoid(x[0])); }},
      // Its gradient 1 - y^2 comes from the 16-bit output, as PyTorch's does: where |y| nears 1 the
      // output's rounding is doubled in y^2 and the difference loses the leading bits.
      {"tanh", {s}, [](V x) { return one(tanh(x[0])); }, Domain::Any, true, 2},
      {"leaky_relu", {s}, [](V x) { return one(leaky_relu(x[0], 0.1)); }},
      {"gelu", {s}, [](V x) { return one(gelu(x[0])); }},
      {"gelu tanh", {s}, [](V x) { return one(gelu(x[0], "tanh")); }},
      {"silu", {s}, [](V x) { return one(silu(x[0])); }},
      {"abs", {odd}, [](V x) { return one(abs(x[0])); }},
      {"sin", {s}, [](V x) { return one(sin(x[0])); }},
      {"cos", {s}, [](V x) { return one(cos(x[0])); }},
      {"tan", {s}, [](V x) { return one(tan(x[0])); }, Domain::Unit},
      {"asin", {s}, [](V x) { return one(asin(x[0])); }, Domain::Unit},
      {"acos", {s}, [](V x) { return one(acos(x[0])); }, Domain::Unit},
      {"atan", {s}, [](V x) { return one(atan(x[0])); }},
      {"sinh", {s}, [](V x) { return one(sinh(x[0])); }},
      {"cosh", {s}, [](V x) { return one(cosh(x[0])); }},
      {"floor", {s}, [](V x) { return one(floor(x[0])); }},
      {"ceil", {s}, [](V x) { return one(ceil(x[0])); }},
      {"trunc", {s}, [](V x) { return one(trunc(x[0])); }},
      {"round", {s}, [](V x) { return one(round(x[0])); }},
      {"sign", {s}, [](V x) { return one(sign(x[0])); }},
      {"rsqrt", {s}, [](V x) { return one(rsqrt(x[0])); }, Domain::Positive},
      {"reciprocal", {s}, [](V x) { return one(reciprocal(x[0])); }, Domain::Positive},
      {"log1p", {s}, [](V x) { return one(log1p(x[0])); }, Domain::Positive},
      {"expm1", {s}, [](V x) { return one(expm1(x[0])); }},
      {"log2", {s}, [](V x) { return one(log2(x[0])); }, Domain::Positive},
      {"log10", {s}, [](V x) { return one(log10(x[0])); }, Domain::Positive},
      {"erf", {s}, [](V x) { return one(erf(x[0])); }},
      {"softplus", {s}, [](V x) { return one(softplus(x[0])); }},
      {"elu", {s}, [](V x) { return one(elu(x[0])); }},
      {"selu", {s}, [](V x) { return one(selu(x[0])); }},
      {"mish", {s}, [](V x) { return one(mish(x[0])); }},
      {"hardsigmoid", {s}, [](V x) { return one(hardsigmoid(x[0])); }},
      {"hardswish", {s}, [](V x) { return one(hardswish(x[0])); }},
      {"softsign", {s}, [](V x) { return one(softsign(x[0])); }, Domain::Any, true, 2},
      {"tanhshrink", {s}, [](V x) { return one(tanhshrink(x[0])); }, Domain::Any, true, 2},
      {"hardshrink", {s}, [](V x) { return one(hardshrink(x[0])); }},
      {"softshrink", {s}, [](V x) { return one(softshrink(x[0])); }},
      {"celu", {s}, [](V x) { return one(celu(x[0], 0.5)); }, Domain::Any, true, 2},
      {"logit", {s}, [](V x) { return one(logit(add(mul(x[0], 0.5), 0.5))); }, Domain::Unit, true, 4},
      {"logit eps", {s}, [](V x) { return one(logit(x[0], 0.05)); }, Domain::Unit, true, 2},
      {"glu", {s}, [](V x) { return one(glu(x[0])); }, Domain::Any, true, 2},
      {"logaddexp", {s, s}, [](V x) { return one(logaddexp(x[0], x[1])); }, Domain::Any, true, 4},
      {"xlogy", {s, s}, [](V x) { return one(xlogy(x[0], x[1])); }, Domain::Positive, true, 2},
      {"sinc", {s}, [](V x) { return one(sinc(x[0])); }, Domain::Unit, true, 4},
      {"frac", {s}, [](V x) { return one(frac(mul(x[0], 4.0))); }, Domain::Any, true, 2},
      {"add", {s, s}, [](V x) { return one(add(x[0], x[1])); }},
      {"sub", {odd, odd}, [](V x) { return one(sub(x[0], x[1])); }},
      {"mul", {s, s}, [](V x) { return one(mul(x[0], x[1])); }},
      {"div", {s, s}, [](V x) { return one(div(x[0], x[1])); }, Domain::Positive},
      {"pow", {s, s}, [](V x) { return one(pow(x[0], x[1])); }, Domain::Positive},
      {"pow scalar", {s}, [](V x) { return one(pow(x[0], 2.0)); }},
      {"mul scalar", {odd}, [](V x) { return one(mul(x[0], 3.0)); }},
      {"addcmul", {s, s, s}, [](V x) { return one(addcmul(x[0], x[1], x[2], 0.5)); }, Domain::Any, true, 2},
      {"addcdiv", {s, s, s}, [](V x) { return one(addcdiv(x[0], x[1], x[2], 0.5)); }, Domain::Positive, true, 2},
      {"lerp", {s, s}, [](V x) { return one(lerp(x[0], x[1], 0.25)); }, Domain::Any, true, 2},
      {"lerp tensor weight", {s, s, s}, [](V x) { return one(lerp(x[0], x[1], x[2])); }, Domain::Unit, true, 2},
      {"atan2", {s, s}, [](V x) { return one(atan2(x[0], x[1])); }},
      {"maximum", {s, s}, [](V x) { return one(maximum(x[0], x[1])); }},
      {"minimum", {s, s}, [](V x) { return one(minimum(x[0], x[1])); }},
      {"fmod", {s, s}, [](V x) { return one(fmod(x[0], x[1])); }, Domain::Positive, false},
      {"remainder", {s, s}, [](V x) { return one(remainder(x[0], x[1])); }, Domain::Positive, false},
      {"floor_divide", {s, s}, [](V x) { return one(floor_divide(x[0], x[1])); }, Domain::Positive, false},
      // Broadcasts: a bias along rows (the vectorized walk when the row is a multiple of 8), a
      // bias per channel of an image batch, and one of odd size (the element-by-element walk).
      {"bias add", {{4, 16}, {16}}, [](V x) { return one(add(x[0], x[1])); }},
      {"channel bias", {{2, 3, 4, 8}, {1, 3, 1, 1}}, [](V x) { return one(add(x[0], x[1])); }},
      {"channel bias 6x6", {{2, 3, 6, 6}, {1, 3, 1, 1}}, [](V x) { return one(add(x[0], x[1])); }},  // 4 a load
      {"channel bias 5x2", {{2, 3, 5, 2}, {1, 3, 1, 1}}, [](V x) { return one(add(x[0], x[1])); }},  // 2 a load
      {"odd bias mul", {{4, 7}, {7}}, [](V x) { return one(mul(x[0], x[1])); }},
      {"transposed add", {{6, 8}, {8, 6}}, [](V x) { return one(add(x[0], x[1].t())); }},
      {"hardtanh", {s}, [](V x) { return one(hardtanh(x[0])); }},
      {"clamp", {s}, [](V x) { return one(clamp(x[0], Scalar(-0.5), Scalar(0.5))); }},
      {"where", {s, s},
       [](V x) { return one(where(gt(x[0], x[1]), x[0], x[1])); }},
      {"compare", {s, s}, [](V x) { return std::vector<Tensor>{ge(x[0], x[1]).to(kInt64), lt(x[0], 0.0).to(kInt64)}; },
       Domain::Any, false},
  };
  return cases;
}

std::vector<OpCase> reduction_cases() {
  using V = const std::vector<Tensor>&;
  const Shape s{6, 50};
  std::vector<OpCase> cases = {
      {"sum", {s}, [](V x) { return one(sum(x[0])); }, Domain::Any, true, 2},
      {"sum dim 0", {s}, [](V x) { return one(sum(x[0], {0})); }},
      {"sum dim 1", {s}, [](V x) { return one(sum(x[0], {1})); }},
      // [6, 64]: on CUDA, the 16-bit rows read 8 elements a load and the columns 2 per thread.
      {"sum dim 0 even", {{6, 64}}, [](V x) { return one(sum(x[0], {0})); }},
      {"sum dim 1 even", {{6, 64}}, [](V x) { return one(sum(x[0], {1})); }},
      {"max dim 0 even", {{6, 64}}, [](V x) { return max_of(x[0], 0); }},
      {"max dim 1 even", {{6, 64}}, [](V x) { return max_of(x[0], 1); }},
      // Rows long enough for CUDA to split each into several blocks' partial results.
      {"sum long rows", {{2, 10000}}, [](V x) { return one(sum(x[0], {1})); }, Domain::Any, true, 2},
      {"max long rows", {{2, 10000}}, [](V x) { return max_of(x[0], 1); }},
      {"sum long odd rows", {{2, 9999}}, [](V x) { return one(sum(x[0], {1})); }, Domain::Any, true, 2},
      {"mean", {s}, [](V x) { return one(mean(x[0], {1})); }},
      {"max dim", {s}, [](V x) { auto r = max(x[0], 1); return std::vector<Tensor>{r.values, r.indices}; }},
      {"max dim 0", {s}, [](V x) { auto r = max(x[0], 0); return std::vector<Tensor>{r.values, r.indices}; }},
      {"min dim", {s}, [](V x) { auto r = min(x[0], 1); return std::vector<Tensor>{r.values, r.indices}; }},
      {"amax", {s}, [](V x) { return one(amax(x[0], {1})); }},
      {"argmax", {s}, [](V x) { return one(argmax(x[0], 1)); }, Domain::Any, false},
      {"prod", {{4, 6}}, [](V x) { return one(prod(x[0], 1)); }, Domain::Positive},
      {"logsumexp", {s}, [](V x) { return one(logsumexp(x[0], {1})); }, Domain::Any, true, 2},
      {"nansum", {s}, [](V x) { return one(nansum(x[0], {1})); }, Domain::Any, true, 2},
      {"nanmean", {s}, [](V x) { return one(nanmean(x[0], {0})); }, Domain::Any, true, 2},
      {"trace", {{6, 6}}, [](V x) { return one(trace(x[0])); }, Domain::Any, true, 2},
      {"var", {s}, [](V x) { return one(var(x[0], {1})); }, Domain::Any, true, 3},
      {"norm", {s}, [](V x) { return one(norm(x[0])); }, Domain::Any, true, 2},
      {"cumsum", {{4, 30}}, [](V x) { return one(cumsum(x[0], 1)); }, Domain::Any, true, 2},
      {"cumsum dim 0", {{30, 4}}, [](V x) { return one(cumsum(x[0], 0)); }, Domain::Any, true, 2},
      {"cumprod", {{3, 8}}, [](V x) { return one(cumprod(x[0], 1)); }, Domain::Positive, true, 2},
      {"sort", {{4, 33}}, [](V x) { auto [v, i] = sort(x[0], 1); return std::vector<Tensor>{v, i}; }},
      {"sort descending", {{33, 4}}, [](V x) { auto [v, i] = sort(x[0], 0, true); return std::vector<Tensor>{v, i}; }},
      {"topk", {{4, 33}}, [](V x) { auto [v, i] = topk(x[0], 5); return std::vector<Tensor>{v, i}; }},
      {"argsort", {{4, 33}}, [](V x) { return one(argsort(x[0])); }, Domain::Any, false},
  };
  return cases;
}

std::vector<OpCase> layer_cases() {
  using V = const std::vector<Tensor>&;
  std::vector<OpCase> cases = {
      {"softmax", {{4, 10}}, [](V x) { return one(softmax(x[0], 1)); }},
      {"softmax dim 0", {{10, 4}}, [](V x) { return one(softmax(x[0], 0)); }},
      {"log_softmax", {{4, 10}}, [](V x) { return one(log_softmax(x[0], 1)); }},
      {"softmin", {{4, 9}}, [](V x) { return one(softmin(x[0], 1)); }, Domain::Any, true, 2},
      {"log_softmax middle", {{2, 5, 3}}, [](V x) { return one(log_softmax(x[0], 1)); }},
      {"cross_entropy", {{6, 10}},
       [](V x) {
         return one(cross_entropy(x[0], Tensor::from_vector<int64_t>({1, 0, 9, 3, 3, 7}).to(x[0].device())));
       }},
      {"cross_entropy sum", {{6, 10}},
       [](V x) {
         return one(cross_entropy(x[0], Tensor::from_vector<int64_t>({1, 0, 9, 3, 3, 7}).to(x[0].device()), {},
                                  Reduction::Sum));
       },
       Domain::Any, true, 2},
      {"nll_loss", {{6, 10}},
       [](V x) {
         return one(nll_loss(log_softmax(x[0], 1), Tensor::from_vector<int64_t>({1, 0, 9, 3, 3, 7}).to(x[0].device())));
       },
       Domain::Any, true, 2},
      {"mse_loss", {{4, 9}, {4, 9}}, [](V x) { return one(mse_loss(x[0], x[1])); }, Domain::Any, true, 2},
      {"l1_loss", {{4, 9}, {4, 9}}, [](V x) { return one(l1_loss(x[0], x[1])); }, Domain::Any, true, 2},
      {"smooth_l1_loss", {{4, 9}, {4, 9}}, [](V x) { return one(smooth_l1_loss(x[0], x[1])); }, Domain::Any, true, 2},
      {"bce_with_logits", {{4, 9}, {4, 9}},
       [](V x) { return one(binary_cross_entropy_with_logits(x[0], sigmoid(x[1]).detach())); }, Domain::Any, true, 3},
      {"bce", {{4, 9}, {4, 9}},
       [](V x) { return one(binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1]).detach())); }, Domain::Any, true, 3},
      {"log_sigmoid", {{4, 9}}, [](V x) { return one(log_sigmoid(x[0])); }},
      {"layer_norm", {{4, 16}, {16}, {16}}, [](V x) { return one(layer_norm(x[0], {16}, x[1], x[2])); },
       Domain::Any, true, 4},
      {"rms_norm", {{4, 16}, {16}}, [](V x) { return one(rms_norm(x[0], {16}, x[1])); }, Domain::Any, true, 4},
      {"rms_norm float32 weight", {{4, 16}, {16}},
       [](V x) { return one(rms_norm(x[0], {16}, x[1].to(kFloat32))); }, Domain::Any, true, 4},
      {"normalize", {{4, 16}}, [](V x) { return one(normalize(x[0], 2.0, 1)); }, Domain::Any, true, 4},
      {"cosine_similarity", {{4, 16}, {4, 16}}, [](V x) { return one(cosine_similarity(x[0], x[1])); },
       Domain::Any, true, 4},
      {"pairwise_distance", {{4, 16}, {4, 16}}, [](V x) { return one(pairwise_distance(x[0], x[1])); },
       Domain::Any, true, 4},
      {"group_norm", {{2, 4, 3, 3}, {4}, {4}}, [](V x) { return one(group_norm(x[0], 2, x[1], x[2])); },
       Domain::Any, true, 4},
      {"batch_norm training", {{4, 3, 2, 2}, {3}, {3}},
       [](V x) {
         Tensor running_mean = zeros({3}, x[0].dtype(), x[0].device());
         Tensor running_var = ones({3}, x[0].dtype(), x[0].device());
         Tensor y = batch_norm(x[0], running_mean, running_var, x[1], x[2], true);
         return std::vector<Tensor>{y, running_mean, running_var};
       },
       Domain::Any, true, 4},
      {"batch_norm eval", {{4, 3, 2, 2}, {3}, {3}, {3}},
       [](V x) {
         Tensor running_var = add(mul(x[3].detach(), x[3].detach()), 0.5);
         return one(batch_norm(x[0], x[1].detach(), running_var, x[1], x[2], false));
       },
       Domain::Any, true, 4},
      // A 16-bit x with float32 parameters (and running statistics), as mixed precision keeps them:
      // the result is x's dtype.
      {"layer_norm float32 params", {{4, 16}, {16}, {16}},
       [](V x) { return one(layer_norm(x[0], {16}, x[1].to(kFloat32), x[2].to(kFloat32))); }, Domain::Any, true, 4},
      {"group_norm float32 params", {{2, 4, 3, 3}, {4}, {4}},
       [](V x) { return one(group_norm(x[0], 2, x[1].to(kFloat32), x[2].to(kFloat32))); }, Domain::Any, true, 4},
      {"batch_norm float32 params", {{4, 3, 2, 2}, {3}, {3}},
       [](V x) {
         Tensor running_mean = zeros({3}, kFloat32, x[0].device()), running_var = ones({3}, kFloat32, x[0].device());
         Tensor y = batch_norm(x[0], running_mean, running_var, x[1].to(kFloat32), x[2].to(kFloat32), true);
         return std::vector<Tensor>{y, running_mean.to(x[0].dtype()), running_var.to(x[0].dtype())};
       },
       Domain::Any, true, 4},
      {"max_pool2d", {{2, 3, 8, 8}}, [](V x) { return one(max_pool2d(x[0], 2)); }},
      {"max_pool2d overlapping", {{2, 2, 7, 7}}, [](V x) { return one(max_pool2d(x[0], 3, 2, 1)); }},
      {"avg_pool2d", {{2, 3, 8, 8}}, [](V x) { return one(avg_pool2d(x[0], 2)); }},
      {"avg_pool2d padded", {{2, 2, 7, 7}}, [](V x) { return one(avg_pool2d(x[0], 3, 2, 1)); }},
      {"adaptive_avg_pool2d", {{2, 3, 7, 7}}, [](V x) { return one(adaptive_avg_pool2d(x[0], {3, 3})); }},
      {"adaptive_max_pool2d", {{2, 3, 7, 7}},
       [](V x) { auto [v, i] = adaptive_max_pool2d(x[0], {3, 3}); return std::vector<Tensor>{v, i}; }},
      {"upsample_nearest2d", {{2, 3, 4, 4}}, [](V x) { return one(upsample_nearest2d(x[0], {8, 8})); }},
      {"gather", {{4, 6}},
       [](V x) {
         Tensor index = Tensor::from_vector<int64_t>({0, 5, 2, 2, 1, 3, 4, 4}, {4, 2}).to(x[0].device());
         return one(gather(x[0], 1, index));
       }},
      {"scatter_add", {{4, 6}, {4, 2}},
       [](V x) {
         Tensor index = Tensor::from_vector<int64_t>({0, 5, 2, 2, 1, 3, 4, 4}, {4, 2}).to(x[0].device());
         return one(scatter_add(x[0], 1, index, x[1]));
       }},
      {"scatter", {{4, 6}, {4, 2}},
       [](V x) {
         Tensor index = Tensor::from_vector<int64_t>({0, 5, 2, 3, 1, 3, 4, 0}, {4, 2}).to(x[0].device());
         return one(scatter(x[0], 1, index, x[1]));
       }},
      {"index_select", {{5, 6}},
       [](V x) { return one(index_select(x[0], 0, Tensor::from_vector<int64_t>({4, 0, 0, 2}).to(x[0].device()))); }},
      {"index_add", {{5, 6}, {4, 6}},
       [](V x) {
         return one(index_add(x[0], 0, Tensor::from_vector<int64_t>({4, 0, 0, 2}).to(x[0].device()), x[1]));
       }},
      // Data movement: copies in the 16-bit dtype, exact.
      {"pad constant", {{2, 3, 4}}, [](V x) { return one(pad(x[0], {1, 2}, "constant", 0.5)); }},
      {"pad reflect", {{2, 3, 4}}, [](V x) { return one(pad(x[0], {2, 1}, "reflect")); }},
      {"cat and stack", {{2, 3}, {2, 3}},
       [](V x) { return std::vector<Tensor>{cat({x[0], x[1]}, 1), stack({x[0], x[1]})}; }},
      {"flip roll tril repeat", {{3, 4}},
       [](V x) {
         return std::vector<Tensor>{flip(x[0], {1}), roll(x[0], {1}, {0}), tril(x[0]), repeat(x[0], {2, 1})};
       }},
      {"prelu", {{2, 3, 4}, {3}}, [](V x) { return one(prelu(x[0], x[1])); }},
      {"diagonal diag_embed kron", {{3, 4}, {2, 2}},
       [](V x) {
         return std::vector<Tensor>{diagonal(x[0], 1) * 1.0, diag_embed(x[0]), kron(x[0], x[1])};
       }},
      {"take_along_dim index_fill index_copy", {{3, 4}, {3, 2}},
       [](V x) {
         const Tensor cols = Tensor::from_vector<int64_t>({3, 1}).to(x[0].device());
         return std::vector<Tensor>{take_along_dim(x[0], cols.reshape({1, 2}), 1), index_fill(x[0], 1, cols, 0.5),
                                    index_copy(x[0], 1, cols, x[1]), tensor_split(x[0], 3, 1)[0] * 1.0};
       }},
  };
  return cases;
}

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all = elementwise_cases();
    for (auto& c : reduction_cases()) all.push_back(c);
    for (auto& c : layer_cases()) all.push_back(c);
    return all;
  }();
  return cases;
}

// Dropout draws its own mask, so its check is structural: each output is 0 or the input times
// 1 / keep_prob (exact: a power of two), about half are kept, and the gradient takes the same mask.
void check_dropout(DType dtype, Device device) {
  SCOPED_TRACE(std::string("dropout in ") + dtype_name(dtype));
  Tensor x = randn({64, 40}).to(dtype).to(device).requires_grad_();
  Tensor y = dropout(x, 0.5, true);
  EXPECT_EQ(y.dtype(), dtype);
  Tensor g = randn({64, 40}).to(dtype).to(device);
  y.backward(g);
  std::vector<double> xs = x.detach().to(Device::cpu()).to(kFloat64).to_vector<double>();
  std::vector<double> ys = y.detach().to(Device::cpu()).to(kFloat64).to_vector<double>();
  std::vector<double> gs = g.to(Device::cpu()).to(kFloat64).to_vector<double>();
  std::vector<double> grads = x.grad().to(Device::cpu()).to(kFloat64).to_vector<double>();
  int64_t kept = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const bool keep = ys[i] != 0;
    kept += keep;
    if (keep) {
      ASSERT_EQ(ys[i], 2 * xs[i]) << i;
    }
    // 2 * g is exact in 16 bits; a dropped element's gradient is 0 (x itself is never 0 here).
    if (xs[i] != 0) {
      ASSERT_EQ(grads[i], keep ? 2 * gs[i] : 0.0) << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(xs.size()), 0.5, 0.08);
}

// Random and constant fills straight into a 16-bit tensor.
void check_creation(DType dtype, Device device) {
  SCOPED_TRACE(std::string("creation in ") + dtype_name(dtype));
  Tensor u = rand({4000}, dtype, device), z = randn({4000}, dtype, device);
  EXPECT_EQ(u.dtype(), dtype);
  EXPECT_EQ(z.dtype(), dtype);
  std::vector<double> us = u.to(Device::cpu()).to(kFloat64).to_vector<double>();
  std::vector<double> zs = z.to(Device::cpu()).to(kFloat64).to_vector<double>();
  double mean_u = 0, mean_z = 0, square_z = 0;
  for (double v : us) {
    EXPECT_TRUE(v >= 0 && v <= 1) << v;
    mean_u += v / 4000;
  }
  for (double v : zs) mean_z += v / 4000, square_z += v * v / 4000;
  EXPECT_NEAR(mean_u, 0.5, 0.03);
  EXPECT_NEAR(mean_z, 0.0, 0.06);
  EXPECT_NEAR(square_z, 1.0, 0.1);
  Tensor a = arange(0, 20, 1, dtype, device);
  EXPECT_EQ(a.dtype(), dtype);
  std::vector<double> as = a.to(Device::cpu()).to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < as.size(); ++i) EXPECT_EQ(as[i], static_cast<double>(i));
  Tensor f = full({3}, 0.1, dtype, device);
  EXPECT_EQ(f.dtype(), dtype);
  // 0.1 rounded once to the dtype.
  EXPECT_EQ(f.to(Device::cpu()).to(kFloat64).to_vector<double>()[0],
            scalar_tensor(0.1, kFloat32).to(dtype).to(kFloat64).item<double>());
}

// nan_to_num puts the dtype's own largest finite value in place of an infinity, as PyTorch does.
void check_nan_to_num(DType dtype, Device device) {
  SCOPED_TRACE(std::string("nan_to_num in ") + dtype_name(dtype));
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({std::nanf(""), inf, -inf, 1.5f}).to(dtype).to(device);
  Tensor y = nan_to_num(x);
  EXPECT_EQ(y.dtype(), dtype);
  const double largest = dtype == kBFloat16 ? 3.3895313892515355e38 : 65504.0;
  EXPECT_EQ(y.to(Device::cpu()).to(kFloat64).to_vector<double>(), (std::vector<double>{0, largest, -largest, 1.5}));
}

}  // namespace

TEST(ReducedPrecisionOps, CpuBFloat16MatchesFloat32) {
  manual_seed(321);
  sweep(all_cases(), kBFloat16, Device::cpu(), false);
}

TEST(ReducedPrecisionOps, CpuFloat16MatchesFloat32) {
  manual_seed(654);
  sweep(all_cases(), kFloat16, Device::cpu(), false);
}

TEST(ReducedPrecisionOps, CpuDropoutCreationNanToNum) {
  manual_seed(7);
  for (DType dtype : {kBFloat16, kFloat16}) {
    check_dropout(dtype, Device::cpu());
    check_creation(dtype, Device::cpu());
    check_nan_to_num(dtype, Device::cpu());
  }
}

TEST(CudaReducedPrecisionOps, BFloat16MatchesFloat32AndCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  sweep(all_cases(), kBFloat16, Device::cuda(0), true);
}

TEST(CudaReducedPrecisionOps, Float16MatchesFloat32AndCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  sweep(all_cases(), kFloat16, Device::cuda(0), true);
}

// scatter_add and index_add (the backward of gather and index_select too) in deterministic mode,
// which takes the ordered kernels instead of the atomic adds.
TEST(CudaReducedPrecisionOps, DeterministicScatterAndIndexAdd) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  std::vector<OpCase> cases;
  for (const OpCase& c : all_cases())
    if (c.name == "scatter_add" || c.name == "index_add" || c.name == "gather" || c.name == "index_select")
      cases.push_back(c);
  ASSERT_EQ(cases.size(), 4u);
  const bool was = is_deterministic();
  set_deterministic(true);
  for (DType dtype : {kBFloat16, kFloat16}) sweep(cases, dtype, Device::cuda(0), true);
  set_deterministic(was);
}

TEST(CudaReducedPrecisionOps, DropoutCreationNanToNum) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kBFloat16, kFloat16}) {
    check_dropout(dtype, Device::cuda(0));
    check_creation(dtype, Device::cuda(0));
    check_nan_to_num(dtype, Device::cuda(0));
  }
}


// float32 + a 16-bit tensor of one shape takes one widening kernel on CUDA (ops/elementwise.cpp):
// the bits and gradients of promotion (widen, then add), in either order, at sizes with a tail and at
// a start that is not 16-byte aligned.
TEST(CudaReducedPrecisionOps, AddWideningEqualsPromotion) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Device gpu = Device::cuda(0);
  for (DType dtype : {kBFloat16, kFloat16}) {
    for (int64_t n : {int64_t(1), int64_t(8), int64_t(1003), int64_t(4096)}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n " + std::to_string(n));
      const Tensor wide = randn({n + 1}, kFloat32, gpu), narrow = randn({n + 1}, kFloat32, gpu).to(dtype);
      for (int64_t start : {int64_t(0), int64_t(1)}) {
        Tensor a = wide.narrow(0, start, n).detach().requires_grad_();
        Tensor b = narrow.narrow(0, start, n).detach().requires_grad_();
        Tensor out = a + b, promoted = a.detach() + b.detach().to(kFloat32);
        ASSERT_EQ(out.dtype(), kFloat32);
        EXPECT_TRUE(out.detach().equal(promoted));
        EXPECT_TRUE((b + a).detach().equal(promoted));
        const Tensor g = randn({n}, kFloat32, gpu);
        out.backward(g);
        EXPECT_TRUE(a.grad().equal(g));
        ASSERT_EQ(b.grad().dtype(), dtype);
        EXPECT_TRUE(b.grad().equal(g.to(dtype)));
      }
    }
  }
}

}  // namespace minidl::reduced_precision_ops_test
