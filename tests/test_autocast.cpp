// Autocast: the guard's state, the policy table (which op runs in which dtype, on the CPU in bfloat16
// and on CUDA in bfloat16 and float16), the weight cast cache, and gradients of a small MLP and CNN
// under autocast against float32. The CUDA cases skip where no GPU is usable; the last one checks
// autocast inside a captured cuda::GraphedStep against the same steps run eagerly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "minidl.h"
#include "ops/autocast_masters.h"
#include "ops/autocast_policy.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::autocast_test {

using autocast::Op;
using autocast::Policy;

namespace {

// Rounding tolerance of one result computed in `dtype` against float32, relative to the float32
// result's largest magnitude (sums of a few dozen products).
double tolerance(DType dtype) {
  if (dtype == kBFloat16) return 3e-2;
  if (dtype == kFloat16) return 4e-3;
  return 2e-5;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.detach().to(Device::cpu()).to(kFloat32).contiguous().to_vector<float>();
  const std::vector<float> w = want.detach().to(Device::cpu()).to(kFloat32).contiguous().to_vector<float>();
  double scale = 1e-6;  // relative to the largest magnitude of the float32 result
  for (float v : w) scale = std::max(scale, double(std::fabs(v)));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - double(w[i])));
  EXPECT_LE(worst, tol * scale) << what << ": largest difference " << worst << " against a scale of " << scale;
}

// One row of the test table: the op run on its inputs, and the policy the test expects of it.
struct Case {
  const char* name;  // the table's name of the op, which autocast::last_dispatch() reports
  Policy cuda, cpu;
  std::function<std::vector<Tensor>()> inputs;  // float32, on the CPU
  std::function<Tensor(const std::vector<Tensor>&)> run;
};

Tensor r(IntArrayRef shape) { return randn(shape, kFloat32); }
Tensor positive(IntArrayRef shape) { return add(abs(randn(shape, kFloat32)), 0.5); }
Tensor labels(int64_t n, int64_t classes) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((2 * i + 1) % classes);
  return Tensor::from_vector<int64_t>(v);
}

const Policy LP = Policy::LowerPrecision, F32 = Policy::Float32, PRO = Policy::Promote, NONE = Policy::None;

std::vector<Case> cases() {
  return {
      {"matmul", LP, LP, [] { return std::vector<Tensor>{r({4, 8}), r({8, 5})}; },
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }},
      {"mm", LP, LP, [] { return std::vector<Tensor>{r({4, 8}), r({8, 5})}; },
       [](const std::vector<Tensor>& t) { return mm(t[0], t[1]); }},
      {"bmm", LP, LP, [] { return std::vector<Tensor>{r({2, 4, 8}), r({2, 8, 5})}; },
       [](const std::vector<Tensor>& t) { return bmm(t[0], t[1]); }},
      {"mv", LP, NONE, [] { return std::vector<Tensor>{r({4, 8}), r({8})}; },
       [](const std::vector<Tensor>& t) { return mv(t[0], t[1]); }},
      {"dot", PRO, NONE, [] { return std::vector<Tensor>{r({8}), r({8})}; },
       [](const std::vector<Tensor>& t) { return dot(t[0], t[1]); }},
      {"addmm", LP, LP, [] { return std::vector<Tensor>{r({4, 5}), r({4, 8}), r({8, 5})}; },
       [](const std::vector<Tensor>& t) { return addmm(t[0], t[1], t[2], 0.5, 2); }},
      {"baddbmm", LP, LP, [] { return std::vector<Tensor>{r({4, 5}), r({2, 4, 8}), r({2, 8, 5})}; },
       [](const std::vector<Tensor>& t) { return baddbmm(t[0], t[1], t[2]); }},
      {"addbmm", LP, LP, [] { return std::vector<Tensor>{r({4, 5}), r({2, 4, 8}), r({2, 8, 5})}; },
       [](const std::vector<Tensor>& t) { return addbmm(t[0], t[1], t[2]); }},
      {"addmv", LP, NONE, [] { return std::vector<Tensor>{r({4}), r({4, 8}), r({8})}; },
       [](const std::vector<Tensor>& t) { return addmv(t[0], t[1], t[2]); }},
      {"addr", LP, NONE, [] { return std::vector<Tensor>{r({4, 5}), r({4}), r({5})}; },
       [](const std::vector<Tensor>& t) { return addr(t[0], t[1], t[2]); }},
      {"linear", LP, LP, [] { return std::vector<Tensor>{r({4, 8}), r({5, 8}), r({5})}; },
       [](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); }},
      {"linear_relu", LP, LP, [] { return std::vector<Tensor>{r({4, 8}), r({5, 8}), r({5})}; },
       [](const std::vector<Tensor>& t) { return linear_relu(t[0], t[1], t[2]); }},
      {"linear_relu_linear", LP, LP,
       [] { return std::vector<Tensor>{r({4, 8}), r({6, 8}), r({6}), r({3, 6}), r({3})}; },
       [](const std::vector<Tensor>& t) { return linear_relu_linear(t[0], t[1], t[2], t[3], t[4]); }},
      {"linear_gelu_linear", LP, LP,
       [] { return std::vector<Tensor>{r({4, 8}), r({6, 8}), r({6}), r({3, 6}), r({3})}; },
       [](const std::vector<Tensor>& t) { return linear_gelu_linear(t[0], t[1], t[2], t[3], t[4]); }},
      {"conv1d", LP, LP, [] { return std::vector<Tensor>{r({2, 3, 10}), r({4, 3, 3}), r({4})}; },
       [](const std::vector<Tensor>& t) { return conv1d(t[0], t[1], t[2], 1, 1); }},
      {"conv2d", LP, LP, [] { return std::vector<Tensor>{r({2, 3, 8, 8}), r({4, 3, 3, 3}), r({4})}; },
       [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], 1, 1); }},
      {"conv2d_relu", LP, LP, [] { return std::vector<Tensor>{r({2, 3, 8, 8}), r({4, 3, 3, 3}), r({4})}; },
       [](const std::vector<Tensor>& t) { return conv2d_relu(t[0], t[1], t[2], 1, 1); }},
      {"conv2d_relu_max_pool2d", LP, LP, [] { return std::vector<Tensor>{r({2, 3, 8, 8}), r({4, 3, 3, 3}), r({4})}; },
       [](const std::vector<Tensor>& t) { return conv2d_relu_max_pool2d(t[0], t[1], t[2], 1, 1, 1, 2); }},
      {"conv_transpose2d", LP, LP, [] { return std::vector<Tensor>{r({2, 3, 5, 5}), r({3, 4, 3, 3}), r({4})}; },
       [](const std::vector<Tensor>& t) { return conv_transpose2d(t[0], t[1], t[2], 2, 1); }},
      {"einsum", LP, LP, [] { return std::vector<Tensor>{r({4, 8}), r({8, 5})}; },
       [](const std::vector<Tensor>& t) { return einsum("ij,jk->ik", {t[0], t[1]}); }},
      {"scaled_dot_product_attention", LP, LP, [] { return std::vector<Tensor>{r({2, 5, 8}), r({2, 6, 8}), r({2, 6, 8})}; },
       [](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2]); }},
      {"softmax", F32, NONE, [] { return std::vector<Tensor>{r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return softmax(t[0], 1); }},
      {"log_softmax", F32, NONE, [] { return std::vector<Tensor>{r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return log_softmax(t[0], 1); }},
      {"layer_norm", F32, NONE, [] { return std::vector<Tensor>{r({4, 8}), r({8}), r({8})}; },
       [](const std::vector<Tensor>& t) { return layer_norm(t[0], {8}, t[1], t[2]); }},
      {"rms_norm", F32, NONE, [] { return std::vector<Tensor>{r({4, 8}), r({8})}; },
       [](const std::vector<Tensor>& t) { return rms_norm(t[0], {8}, t[1]); }},
      {"group_norm", F32, NONE, [] { return std::vector<Tensor>{r({2, 4, 3, 3}), r({4}), r({4})}; },
       [](const std::vector<Tensor>& t) { return group_norm(t[0], 2, t[1], t[2]); }},
      {"batch_norm", F32, F32, [] { return std::vector<Tensor>{r({4, 3, 5}), r({3}), r({3})}; },
       [](const std::vector<Tensor>& t) { return batch_norm(t[0], {}, {}, t[1], t[2], true); }},
      {"exp", F32, NONE, [] { return std::vector<Tensor>{r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return exp(t[0]); }},
      {"log", F32, NONE, [] { return std::vector<Tensor>{positive({4, 7})}; },
       [](const std::vector<Tensor>& t) { return log(t[0]); }},
      {"pow", F32, NONE, [] { return std::vector<Tensor>{positive({4, 7}), r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return pow(t[0], t[1]); }},
      {"sum", F32, NONE, [] { return std::vector<Tensor>{r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return sum(t[0], {1}); }},
      {"prod", F32, F32, [] { return std::vector<Tensor>{positive({4, 5})}; },
       [](const std::vector<Tensor>& t) { return prod(t[0], 1); }},
      {"logsumexp", F32, NONE, [] { return std::vector<Tensor>{r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return logsumexp(t[0], {1}); }},
      {"norm", F32, NONE, [] { return std::vector<Tensor>{r({4, 7})}; },
       [](const std::vector<Tensor>& t) { return norm(t[0], 2); }},
      {"addcmul", PRO, NONE, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5}), r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return addcmul(t[0], t[1], t[2], 0.5); }},
      {"addcdiv", PRO, NONE, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5}), positive({4, 5})}; },
       [](const std::vector<Tensor>& t) { return addcdiv(t[0], t[1], t[2], 0.5); }},
      {"cross_entropy", F32, F32, [] { return std::vector<Tensor>{r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return cross_entropy(t[0], labels(4, 5).to(t[0].device())); }},
      {"nll_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return nll_loss(t[0], labels(4, 5).to(t[0].device())); }},
      {"mse_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return mse_loss(t[0], t[1]); }},
      {"l1_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return l1_loss(t[0], t[1]); }},
      {"smooth_l1_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return smooth_l1_loss(t[0], t[1]); }},
      {"huber_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return huber_loss(t[0], t[1]); }},
      {"kl_div", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), rand({4, 5}, kFloat32)}; },
       [](const std::vector<Tensor>& t) { return kl_div(t[0], t[1]); }},
      {"binary_cross_entropy_with_logits", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), rand({4, 5}, kFloat32)}; },
       [](const std::vector<Tensor>& t) { return binary_cross_entropy_with_logits(t[0], t[1]); }},
      {"margin_ranking_loss", F32, F32, [] { return std::vector<Tensor>{r({6}), r({6}), sign(r({6}))}; },
       [](const std::vector<Tensor>& t) { return margin_ranking_loss(t[0], t[1], t[2], 0.1); }},
      {"hinge_embedding_loss", F32, F32, [] { return std::vector<Tensor>{r({6}), sign(r({6}))}; },
       [](const std::vector<Tensor>& t) { return hinge_embedding_loss(t[0], t[1]); }},
      {"soft_margin_loss", F32, F32, [] { return std::vector<Tensor>{r({6}), sign(r({6}))}; },
       [](const std::vector<Tensor>& t) { return soft_margin_loss(t[0], t[1]); }},
      {"cosine_embedding_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5}), sign(r({4}))}; },
       [](const std::vector<Tensor>& t) { return cosine_embedding_loss(t[0], t[1], t[2]); }},
      {"triplet_margin_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({4, 5}), r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return triplet_margin_loss(t[0], t[1], t[2]); }},
      {"multi_margin_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5})}; },
       [](const std::vector<Tensor>& t) { return multi_margin_loss(t[0], labels(4, 5).to(t[0].device())); }},
      {"multilabel_margin_loss", F32, F32, [] { return std::vector<Tensor>{r({2, 3})}; },
       [](const std::vector<Tensor>& t) {
         const Tensor target = Tensor::from_vector<int64_t>({2, -1, 0, 0, 1, -1}, {2, 3}).to(t[0].device());
         return multilabel_margin_loss(t[0], target);
       }},
      {"poisson_nll_loss", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), rand({4, 5}, kFloat32)}; },
       [](const std::vector<Tensor>& t) { return poisson_nll_loss(t[0], t[1]); }},
      {"cdist", F32, F32, [] { return std::vector<Tensor>{r({4, 5}), r({3, 5})}; },
       [](const std::vector<Tensor>& t) { return cdist(t[0], t[1]); }},
  };
}

// Runs every case under AutocastGuard(device, dtype). A lower-precision op gets float32 inputs and
// must return `dtype`, close to its float32 result; a float32 op gets `dtype` inputs and must return
// float32 equal to the float32 op on the same (widened) values, which tells that it computed in
// float32; a promoting op gets its first input in float32 and the others in `dtype`, and must
// return float32 as above; an op without a policy on the device must return `dtype`.
void check_policy_table(Device device, DType dtype) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(c.name) + " on " + (device.is_cuda() ? "cuda" : "cpu") + " in " + dtype_name(dtype));
    const Policy expected = device.is_cuda() ? c.cuda : c.cpu;
    manual_seed(5);
    std::vector<Tensor> in;
    for (const Tensor& t : c.inputs())
      in.push_back(expected == LP || (expected == PRO && in.empty()) ? t.to(device) : t.to(device).to(dtype));
    std::vector<Tensor> in32;
    for (const Tensor& t : in) in32.push_back(t.to(kFloat32));
    const Tensor reference = c.run(in32);
    const int before = autocast::last_dispatch().count;
    Tensor out;
    {
      AutocastGuard guard(device, dtype);
      out = c.run(in);
    }
    if (expected == LP) {
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_GT(autocast::last_dispatch().count, before);
      expect_close(out, reference, tolerance(dtype), c.name);
    } else if (expected == F32 || expected == PRO) {
      EXPECT_EQ(out.dtype(), kFloat32);
      EXPECT_EQ(autocast::last_dispatch().op, c.name);
      EXPECT_EQ(autocast::last_dispatch().dtype, kFloat32);
      expect_close(out, reference, 2e-5, c.name);
    } else {
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_EQ(autocast::last_dispatch().count, before);  // no cast, no dispatch
      expect_close(out, reference, tolerance(dtype), c.name);
    }
  }
}

}  // namespace

TEST(Autocast, TableFollowsPyTorchAndCoversEveryOp) {
  const auto& table = autocast::policy_table();
  ASSERT_EQ(table.size(), static_cast<size_t>(Op::count_));
  for (size_t i = 0; i < table.size(); ++i) EXPECT_EQ(static_cast<size_t>(table[i].op), i) << table[i].name;
  // Every op this test runs is in the table with the policy the test expects, and vice versa.
  std::vector<Case> all = cases();
  for (const Case& c : all) {
    auto it = std::find_if(table.begin(), table.end(), [&](const autocast::PolicyRow& row) {
      return std::string(row.name) == c.name;
    });
    ASSERT_NE(it, table.end()) << c.name;
    EXPECT_EQ(it->cuda, c.cuda) << c.name;
    EXPECT_EQ(it->cpu, c.cpu) << c.name;
  }
  EXPECT_EQ(all.size() + 1, table.size());  // binary_cross_entropy is tested on its own
  EXPECT_EQ(autocast::policy(Op::binary_cross_entropy, kCUDA), Policy::Banned);
  EXPECT_EQ(autocast::policy(Op::binary_cross_entropy, kCPU), Policy::Float32);
  EXPECT_STREQ(autocast::policy_name(Policy::LowerPrecision), "lower_precision");
}

TEST(Autocast, GuardSetsNestsAndRestoresPerDeviceType) {
  EXPECT_FALSE(autocast::is_enabled(kCPU));
  EXPECT_FALSE(autocast::is_enabled(kCUDA));
  EXPECT_EQ(autocast::dtype(kCUDA), kFloat16);  // PyTorch's defaults
  EXPECT_EQ(autocast::dtype(kCPU), kBFloat16);
  {
    AutocastGuard outer(Device::cpu(), kFloat16);
    EXPECT_TRUE(autocast::is_enabled(Device::cpu()));
    EXPECT_FALSE(autocast::is_enabled(kCUDA));
    EXPECT_EQ(autocast::dtype(kCPU), kFloat16);
    {
      AutocastGuard off(Device::cpu(), kBFloat16, false);
      EXPECT_FALSE(autocast::is_enabled(kCPU));
      const Tensor a = randn({3, 4}), b = randn({4, 2});
      EXPECT_EQ(matmul(a, b).dtype(), kFloat32);  // disabled: runs as given
      {
        AutocastGuard inner(Device::cpu());  // no dtype: the current one
        EXPECT_TRUE(autocast::is_enabled(kCPU));
        EXPECT_EQ(autocast::dtype(kCPU), kBFloat16);
      }
      EXPECT_FALSE(autocast::is_enabled(kCPU));
    }
    EXPECT_TRUE(autocast::is_enabled(kCPU));
    EXPECT_EQ(autocast::dtype(kCPU), kFloat16);
    {
      AutocastGuard cuda_guard(Device::cuda(), kBFloat16);  // state only: no GPU needed
      EXPECT_TRUE(autocast::is_enabled(kCUDA));
      EXPECT_EQ(autocast::dtype(kCUDA), kBFloat16);
      EXPECT_EQ(autocast::dtype(kCPU), kFloat16);
    }
    EXPECT_FALSE(autocast::is_enabled(kCUDA));
  }
  EXPECT_FALSE(autocast::is_enabled(kCPU));
  EXPECT_EQ(autocast::dtype(kCPU), kBFloat16);
  minidl::testing::expect_error([] { AutocastGuard bad(Device::cpu(), kInt64); }, {"AutocastGuard", "int64"});
}

TEST(Autocast, GradModeUnchangedAndOnlyFloatTensorsOnTheDeviceAreCast) {
  AutocastGuard guard(Device::cpu(), kBFloat16);
  EXPECT_TRUE(grad_mode_enabled());
  // float64 is never lowered; integers are never cast (the labels of cross_entropy stay int64).
  const Tensor a = randn({3, 4}, kFloat64), b = randn({4, 2}, kFloat64);
  EXPECT_EQ(matmul(a, b).dtype(), kFloat64);
  const Tensor logits = randn({4, 5}).to(kBFloat16);
  const Tensor loss = cross_entropy(logits, labels(4, 5));
  EXPECT_EQ(loss.dtype(), kFloat32);
  // A CUDA guard leaves CPU tensors alone.
  AutocastGuard cpu_off(Device::cpu(), kBFloat16, false);
  AutocastGuard cuda_on(Device::cuda(), kFloat16);
  EXPECT_EQ(matmul(randn({3, 4}), randn({4, 2})).dtype(), kFloat32);
}

TEST(Autocast, PolicyTableOnCpuInBFloat16) { check_policy_table(Device::cpu(), kBFloat16); }

namespace {

// Ops outside the table keep their input dtype, even those built from ops in it (var from sum).
void check_ops_outside_the_table(Device device, DType dtype) {
  manual_seed(6);
  const Tensor x = randn({4, 6}).to(device).to(dtype);
  AutocastGuard guard(device, dtype);
  EXPECT_EQ(mean(x).dtype(), dtype);
  EXPECT_EQ(var(x, {1}, true, false).dtype(), dtype);
  EXPECT_EQ(minidl::std(x, {1}, true, false).dtype(), dtype);
  EXPECT_EQ(relu(x).dtype(), dtype);
  EXPECT_EQ(add(x, x).dtype(), dtype);
  EXPECT_EQ(add(x, randn({4, 6}).to(device)).dtype(), kFloat32);  // promotion, as without autocast
}

}  // namespace

TEST(Autocast, OpsOutsideTheTableKeepTheirDtype) { check_ops_outside_the_table(Device::cpu(), kBFloat16); }

TEST(Autocast, BinaryCrossEntropyRunsInFloat32OnCpu) {
  const Tensor p = rand({4, 5}).to(kBFloat16), y = rand({4, 5}).to(kBFloat16);
  AutocastGuard guard(Device::cpu(), kBFloat16);
  EXPECT_EQ(binary_cross_entropy(p, y).dtype(), kFloat32);
}

// matmul casts its operands; a float32 leaf weight's cast is cached for the region.
TEST(Autocast, WeightCastsAreCachedUntilTheOutermostGuardExits) {
  Tensor w = randn({8, 5}).requires_grad_(true);
  const Tensor x = randn({4, 8});
  const Tensor frozen = randn({8, 5});  // requires no grad: never cached
  {
    AutocastGuard outer(Device::cpu(), kBFloat16);
    const Tensor y1 = matmul(x, w);
    EXPECT_EQ(autocast::cache_size(), 1u);
    {
      AutocastGuard inner(Device::cpu(), kBFloat16);
      const Tensor y2 = matmul(x, w);  // the same cast serves the second use
      EXPECT_EQ(autocast::cache_size(), 1u);
      (void)matmul(x, frozen);
      (void)matmul(mul(x, 2.0), w);  // an activation (not a leaf) is cast each time, not cached
      EXPECT_EQ(autocast::cache_size(), 1u);
    }
    EXPECT_EQ(autocast::cache_size(), 1u);  // an inner guard's exit keeps the cache
    {
      NoGradGuard no_grad;  // a cast without a backward must not serve a differentiable use later
      (void)matmul(x, w);
    }
    // A weight written in place after its cast is cast afresh.
    {
      NoGradGuard no_grad;
      w.mul_(2.0);
    }
    const Tensor y3 = matmul(x, w);
    expect_close(y3, matmul(x.to(kFloat64), w.detach().to(kFloat64)).to(kFloat32), tolerance(kBFloat16), "recast");
    sum(add(y1, y3)).backward();
  }
  EXPECT_EQ(autocast::cache_size(), 0u);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);  // the master weight's gradient is float32
  // d/dw of sum(x w) twice: 2 * column sums of x, in bfloat16 products.
  const Tensor expected = mul(sum(x, {0}, true).transpose(0, 1).expand({8, 5}), 2.0);
  expect_close(w.grad(), expected, tolerance(kBFloat16), "cached weight gradient");
}

namespace {

// Runs `op` (one op of a weight and a bias) under CPU autocast in `dtype` and checks that it took
// master weights: two 16-bit copies made, no differentiable cast cached.
Tensor run_on_masters(DType dtype, const std::function<Tensor()>& op) {
  const size_t copies_before = autocast::master_copy_count();
  AutocastGuard guard(Device::cpu(), dtype);
  Tensor out = op();
  EXPECT_EQ(autocast::cache_size(), 0u);  // no differentiable cast of the weights
  EXPECT_EQ(autocast::master_copy_count(), copies_before + 2);
  return out;
}

}  // namespace

// linear takes master weights (ops/autocast_masters.h): the product reads a bfloat16 copy, the tape
// records the float32 leaf, and the gradient is float32 straight from the product, not a bfloat16
// gradient widened: within float32 rounding of the column sums of the bfloat16 input.
TEST(Autocast, LinearTakesMasterWeightsAndGivesThemFloat32Gradients) {
  manual_seed(41);
  Tensor w = randn({5, 8}).requires_grad_(true), b = randn({5}).requires_grad_(true);
  const Tensor x = randn({64, 8});
  const Tensor y = run_on_masters(kBFloat16, [&] { return linear(x, w, b); });
  EXPECT_EQ(y.dtype(), kBFloat16);
  const Tensor x16 = x.to(kBFloat16).to(kFloat32);
  expect_close(y, add(matmul(x16, w.detach().to(kBFloat16).to(kFloat32).transpose(0, 1)), b.detach()),
               tolerance(kBFloat16), "output");
  sum(y).backward();
  ASSERT_TRUE(w.grad().defined() && b.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  // Rounded to bfloat16 on the way (as a cast's backward would), the column sums miss by ~1e-3.
  expect_close(w.grad(), sum(x16, {0}, true).expand({5, 8}), 1e-6, "weight gradient");
  expect_close(b.grad(), full({5}, 64.0), 0, "bias gradient");
}

// The copies follow their masters: an optimizer step writes them with the weights, and a weight
// written in place within a region gets a new copy at once.
TEST(Autocast, MasterCopiesFollowTheirWeights) {
  manual_seed(42);
  Tensor w = randn({5, 8}).requires_grad_(true);
  const Tensor x = randn({4, 8});
  auto reference = [&] { return matmul(x.to(kFloat64), w.detach().to(kFloat64).transpose(0, 1)).to(kFloat32); };
  optim::SGD sgd({w}, optim::SGDOptions(1.0));
  auto step = [&] {
    {
      AutocastGuard guard(Device::cpu(), kBFloat16);
      sum(linear(x, w)).backward();
    }
    sgd.step();  // w moves by the column sums of x: far more than bfloat16's rounding
    sgd.zero_grad();
  };
  step();
  {
    AutocastGuard guard(Device::cpu(), kBFloat16);
    expect_close(linear(x, w), reference(), tolerance(kBFloat16), "after a step");
    {
      NoGradGuard no_grad;
      w.mul_(-1.0);
    }
    expect_close(linear(x, w), reference(), tolerance(kBFloat16), "after an in-place write in the region");
  }
  step();
  AutocastGuard guard(Device::cpu(), kBFloat16);
  expect_close(linear(x, w), reference(), tolerance(kBFloat16), "after the second step");
}

// A gradient penalty under autocast: the input's gradient, taken with create_graph, is a product
// with the weight, and the penalty's gradient must reach the master weight through it too (not only
// through the forward): against the same computation in float32, within bfloat16's rounding.
TEST(Autocast, SecondDerivativeReachesTheMasterWeight) {
  manual_seed(45);
  const Tensor w0 = mul(randn({6, 8}), 0.5), x0 = randn({4, 8});
  auto penalty_gradient = [&](bool low) {
    Tensor w = w0.clone().requires_grad_(true), x = x0.clone().requires_grad_(true);
    Tensor y;
    {
      AutocastGuard guard(Device::cpu(), kBFloat16, low);
      y = linear(x, w);
    }
    const Tensor gx = autograd::grad({sum(mul(y, y))}, {x}, {}, true, true)[0];
    sum(mul(gx, gx)).backward();
    return w.grad();
  };
  const Tensor reference = penalty_gradient(false), low = penalty_gradient(true);
  EXPECT_EQ(low.dtype(), kFloat32);
  expect_close(low, reference, 2 * tolerance(kBFloat16), "the penalty's weight gradient");
}

// PyTorch's cast needs nothing of its graph after a backward; here a cached cast whose tape entry a
// backward released is made afresh, so that a second forward and backward in one region works.
TEST(Autocast, SecondBackwardInOneRegionRecastsTheWeight) {
  Tensor w = randn({5, 8}).requires_grad_(true);
  const Tensor x = randn({4, 8});
  AutocastGuard guard(Device::cpu(), kBFloat16);
  sum(linear(x, w)).backward();
  const std::vector<float> once = w.grad().to_vector<float>();
  sum(linear(x, w)).backward();  // accumulates a second, equal gradient
  const std::vector<float> twice = w.grad().to_vector<float>();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]) << i;
}

TEST(Autocast, BackwardInsideTheGuardRunsInTheForwardDtypes) {
  manual_seed(3);
  Tensor w = randn({5, 8}).requires_grad_(true);
  const Tensor x = randn({4, 8});
  AutocastGuard guard(Device::cpu(), kBFloat16);
  Tensor loss = mse_loss(linear(x, w), zeros({4, 5}));
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  AutocastGuard off(Device::cpu(), kBFloat16, false);
  Tensor w32 = w.detach().clone().requires_grad_(true);
  mse_loss(linear(x, w32), zeros({4, 5})).backward();
  expect_close(w.grad(), w32.grad(), tolerance(kBFloat16), "weight gradient");
}

namespace {

// Double-precision products of CPU copies, for references.
Tensor f64(const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat64); }

// The MNIST MLP's layers under autocast (linear_relu, a narrow linear into 10 outputs, and
// linear_relu_linear), each behind a loss sum(out * c) whose gradient c is exact in `dtype`: the
// weights' and biases' gradients are then float32 products of values known exactly (the input's
// 16-bit copy, c, the ReLU's mask and the hidden layer, both read from outputs), and must match
// their double-precision values to float32's rounding. A gradient rounded to 16 bits on the way
// (as a cast's backward rounds it) misses by about 1e-3 of its scale in bfloat16, 1e-4 in float16.
void check_master_gradients_are_float32_products(Device device, DType dtype) {
  SCOPED_TRACE(std::string(device.is_cuda() ? "cuda " : "cpu ") + dtype_name(dtype));
  manual_seed(43);
  auto param = [&](Shape shape) { return mul(randn(shape), 0.05).to(device).requires_grad_(true); };
  auto exact = [&](Shape shape) { return randn(shape).to(dtype).to(kFloat32).to(device); };
  const Tensor x = rand({64, 784}).to(device);
  const Tensor x16 = f64(x.to(dtype));
  const double tol = 1e-5;
  {  // linear_relu: gw = (c * mask)^T x, gb = column sums of c * mask
    Tensor w = param({512, 784}), b = param({512});
    const Tensor c = exact({64, 512});
    Tensor out;
    {
      AutocastGuard guard(device, dtype);
      out = linear_relu(x, w, b);
    }
    sum(mul(out, c)).backward();
    const Tensor g = mul(f64(c), gt(f64(out), 0.0).to(kFloat64));
    ASSERT_EQ(w.grad().dtype(), kFloat32);
    ASSERT_EQ(b.grad().dtype(), kFloat32);
    expect_close(w.grad(), matmul(g.transpose(0, 1), x16), tol, "linear_relu weight");
    expect_close(b.grad(), sum(g, {0}), tol, "linear_relu bias");
  }
  {  // a narrow linear from a 16-bit input: gw = c^T h, gb = column sums of c
    Tensor w = param({10, 256}), b = param({10});
    const Tensor h = rand({64, 256}).to(dtype).to(device), c = exact({64, 10});
    Tensor out;
    {
      AutocastGuard guard(device, dtype);
      out = linear(h, w, b);
    }
    sum(mul(out, c)).backward();
    expect_close(w.grad(), matmul(f64(c).transpose(0, 1), f64(h)), tol, "narrow linear weight");
    expect_close(b.grad(), sum(f64(c), {0}), tol, "narrow linear bias");
  }
  {  // linear_relu_linear: the second layer's gradients from its hidden layer, made again alone
    Tensor w1 = param({256, 784}), b1 = param({256}), w2 = param({10, 256}), b2 = param({10});
    const Tensor c = exact({64, 10});
    Tensor out, hidden;
    {
      AutocastGuard guard(device, dtype);
      out = linear_relu_linear(x, w1, b1, w2, b2);
      NoGradGuard no_grad;
      hidden = linear_relu(x, w1, b1);  // in dtype on CUDA, as the fused op keeps it
    }
    if (device.is_cpu()) {  // the CPU computes the 16-bit op in float32, its hidden layer unrounded
      NoGradGuard no_grad;
      auto low = [&](const Tensor& t) { return t.detach().to(dtype).to(kFloat32); };
      hidden = linear_relu(low(x), low(w1), low(b1));
    }
    sum(mul(out, c)).backward();
    ASSERT_EQ(w1.grad().dtype(), kFloat32);
    ASSERT_EQ(b1.grad().dtype(), kFloat32);
    expect_close(w2.grad(), matmul(f64(c).transpose(0, 1), f64(hidden)), tol, "linear_relu_linear second weight");
    expect_close(b2.grad(), sum(f64(c), {0}), tol, "linear_relu_linear second bias");
  }
}

}  // namespace

TEST(Autocast, MasterGradientsAreFloat32ProductsOnCpu) {
  check_master_gradients_are_float32_products(Device::cpu(), kBFloat16);
  check_master_gradients_are_float32_products(Device::cpu(), kFloat16);
}

// The convolutions take master weights as linear does: no differentiable cast, two copies a layer,
// float32 gradients. On the CPU a 16-bit convolution computes in float32, so its weight's and bias's
// gradients are float32 products of values known exactly (the input's 16-bit copy, the weight's, and
// the loss's gradient c), equal to their double-precision values to float32's rounding. (On CUDA
// cuDNN writes the weight's gradient in 16 bits; AutocastCuda.GradientsMatchFloat32 covers it.)
TEST(Autocast, ConvolutionsTakeMasterWeights) {
  using Op = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"conv2d", [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv2d(x, w, b, 1, 1); }},
      {"conv2d_relu", [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv2d_relu(x, w, b, 1, 1); }},
      {"conv2d_relu_max_pool2d",
       [](const Tensor& x, const Tensor& w, const Tensor& b) { return conv2d_relu_max_pool2d(x, w, b, 1, 1, 1, 2); }}};
  for (DType dtype : {kBFloat16, kFloat16}) {
    for (const auto& [name, op] : ops) {
      SCOPED_TRACE(name + " in " + dtype_name(dtype));
      manual_seed(47);
      Tensor w = mul(randn({6, 3, 3, 3}), 0.3).requires_grad_(true), b = mul(randn({6}), 0.1).requires_grad_(true);
      const Tensor x = randn({4, 3, 8, 8});
      const Tensor out = run_on_masters(dtype, [&] { return op(x, w, b); });
      EXPECT_EQ(out.dtype(), dtype);
      const Tensor c = randn(out.shape()).to(dtype).to(kFloat32);
      sum(mul(out, c)).backward();
      ASSERT_TRUE(w.grad().defined() && b.grad().defined());
      EXPECT_EQ(w.grad().dtype(), kFloat32);
      EXPECT_EQ(b.grad().dtype(), kFloat32);
      // The same op in float64 on the 16-bit values: its gradients are the exact products.
      Tensor w64 = f64(w.to(dtype)).requires_grad_(true), b64 = f64(b.to(dtype)).requires_grad_(true);
      sum(mul(op(f64(x.to(dtype)), w64, b64), f64(c))).backward();
      expect_close(w.grad(), w64.grad(), 1e-5, "weight gradient");
      expect_close(b.grad(), b64.grad(), 1e-5, "bias gradient");
    }
  }
}

namespace {

// cross_entropy under autocast reads 16-bit logits as float32 in its kernel, with no cast: its loss
// and gradient must be those of a cast to float32 before it, whose backward rounds the gradient to
// 16 bits once. Both for loss.backward() and for a scaled loss (a GradScaler's 2^16), where a 16-bit
// unit gradient scaled afterwards would have lost the small values the scale is there to keep: every
// gradient of a normal 16-bit magnitude must be within a rounding of the reference.
void check_cross_entropy_of_16bit_logits(Device device, DType dtype) {
  SCOPED_TRACE(std::string(device.is_cuda() ? "cuda " : "cpu ") + dtype_name(dtype));
  manual_seed(44);
  const double ulp = dtype == kBFloat16 ? 1.0 / 128 : 1.0 / 1024, smallest_normal = std::ldexp(1.0, -14);
  for (int64_t rows : {64, 2000}) {  // CUDA's one-block kernel, and its general path
    const Tensor base = mul(randn({rows, 10}), 4.0).to(dtype).to(device);
    Tensor y = labels(rows, 10);
    y.data<int64_t>()[1] = -100;  // an ignored row
    y = y.to(device);
    for (double scale : {1.0, 65536.0}) {
      Tensor a = base.detach().requires_grad_(true), b = base.detach().requires_grad_(true);
      Tensor loss;
      {
        AutocastGuard guard(device, dtype);
        loss = cross_entropy(a, y);
        EXPECT_EQ(autocast::last_dispatch().op, "cross_entropy");
      }
      const Tensor want = cross_entropy(b.to(kFloat32), y);
      ASSERT_EQ(loss.dtype(), kFloat32);
      EXPECT_NEAR(loss.item<float>(), want.item<float>(), 1e-6 * std::fabs(want.item<float>()));
      (scale == 1.0 ? loss : mul(loss, scale)).backward();
      (scale == 1.0 ? want : mul(want, scale)).backward();
      ASSERT_EQ(a.grad().dtype(), dtype);
      const std::vector<float> got = a.grad().to(Device::cpu()).to(kFloat32).to_vector<float>();
      const std::vector<float> ref = b.grad().to(Device::cpu()).to(kFloat32).to_vector<float>();
      int checked = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        if (std::fabs(ref[i]) < smallest_normal) continue;
        ++checked;
        ASSERT_LE(std::fabs(got[i] - ref[i]), ulp * std::fabs(ref[i])) << "rows " << rows << " scale " << scale
                                                                       << " element " << i;
      }
      EXPECT_GT(checked, rows) << "rows " << rows << " scale " << scale;
    }
  }
}

}  // namespace

namespace {

// An optimizer step (SGD or AdamW) writes the weights' 16-bit copies with their new values (no pass
// of their own at the next forward), exactly the weight rounded; a copy a tape still holds is left to
// it, and the next region makes a new one.
void check_step_writes_the_copies(Device device, bool adam = false) {
  SCOPED_TRACE(std::string(device.is_cuda() ? "cuda" : "cpu") + (adam ? " adamw" : " sgd"));
  manual_seed(46);
  Tensor w = randn({6, 8}).to(device).requires_grad_(true), b = randn({6}).to(device).requires_grad_(true);
  const Tensor x = randn({4, 8}).to(device);
  std::unique_ptr<optim::Optimizer> opt;
  if (adam) opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w, b}, optim::AdamOptions(0.1));
  else opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w, b}, optim::SGDOptions(0.5).momentum(0.9));
  optim::Optimizer& sgd = *opt;
  for (int i = 0; i < 2; ++i) {
    {
      AutocastGuard guard(device, kBFloat16);
      sum(linear(x, w, b)).backward();
    }
    sgd.step();
    sgd.zero_grad();
    const std::vector<Tensor> written = autocast::copies_to_write({w, b});
    ASSERT_EQ(written.size(), 2u);
    ASSERT_TRUE(written[0].defined() && written[1].defined());
    expect_close(written[0], w.detach().to(kBFloat16), 0, "the weight's copy after step " + std::to_string(i));
    expect_close(written[1], b.detach().to(kBFloat16), 0, "the bias's copy after step " + std::to_string(i));
  }
  if (!device.is_cuda()) return;  // the CPU's linear saves a float32 widening, never the copy
  Tensor held;
  {
    AutocastGuard guard(device, kBFloat16);
    sum(linear(x, w, b)).backward();
    held = sum(linear(x.detach().requires_grad_(true), w, b));  // its tape saved w's copy
  }
  EXPECT_TRUE(autocast::copies_to_write({w}).empty()) << "a copy held by a tape";
  sgd.step();
  AutocastGuard guard(device, kBFloat16);
  expect_close(linear(x, w, b), linear(x.to(kBFloat16), w.detach().to(kBFloat16), b.detach().to(kBFloat16)), 0,
               "the next region's copies");
}

}  // namespace

TEST(Autocast, OptimizerStepWritesTheCopies) {
  check_step_writes_the_copies(Device::cpu());
  check_step_writes_the_copies(Device::cpu(), true);
}

TEST(Autocast, CrossEntropyReads16BitLogitsWithoutACast) {
  check_cross_entropy_of_16bit_logits(Device::cpu(), kBFloat16);
  check_cross_entropy_of_16bit_logits(Device::cpu(), kFloat16);
}

namespace {

// A small MLP and a small CNN, their float32 master weights as leaves, each loss computed with and
// without autocast: the gradients must be float32 and agree within the low dtype's rounding.
struct Params {
  std::vector<Tensor> list;
};

Params mlp_params(Device device) {
  manual_seed(21);
  Params p;
  for (auto shape : std::vector<Shape>{{32, 20}, {32}, {10, 32}, {10}})
    p.list.push_back(mul(randn(shape), 0.2).to(device).requires_grad_(true));
  return p;
}

Tensor mlp_loss(const Params& p, const Tensor& x, const Tensor& y) {
  Tensor h = relu(linear(x, p.list[0], p.list[1]));
  return cross_entropy(linear(h, p.list[2], p.list[3]), y);
}

Params cnn_params(Device device) {
  manual_seed(22);
  Params p;
  for (auto shape : std::vector<Shape>{{4, 1, 3, 3}, {4}, {10, 64}, {10}})
    p.list.push_back(mul(randn(shape), 0.3).to(device).requires_grad_(true));
  return p;
}

Tensor cnn_loss(const Params& p, const Tensor& x, const Tensor& y) {
  Tensor h = max_pool2d(relu(conv2d(x, p.list[0], p.list[1], 1, 1)), 2);  // [N, 4, 4, 4]
  h = h.reshape({x.size(0), 64});
  return cross_entropy(linear(h, p.list[2], p.list[3]), y);
}

void check_gradients(Device device, DType dtype, bool cnn) {
  SCOPED_TRACE(std::string(cnn ? "CNN" : "MLP") + " in " + dtype_name(dtype));
  manual_seed(23);
  const Tensor x = (cnn ? randn({6, 1, 8, 8}) : randn({6, 20})).to(device);
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 9}).to(device);
  Params ref = cnn ? cnn_params(device) : mlp_params(device);
  Params amp = cnn ? cnn_params(device) : mlp_params(device);
  Tensor loss32 = cnn ? cnn_loss(ref, x, y) : mlp_loss(ref, x, y);
  loss32.backward();
  Tensor loss;
  {
    AutocastGuard guard(device, dtype);
    loss = cnn ? cnn_loss(amp, x, y) : mlp_loss(amp, x, y);
  }
  EXPECT_EQ(loss.dtype(), kFloat32);  // cross_entropy runs in float32
  EXPECT_NEAR(loss.item<float>(), loss32.item<float>(), 3 * tolerance(dtype) * std::fabs(loss32.item<float>()));
  loss.backward();
  for (size_t i = 0; i < ref.list.size(); ++i) {
    ASSERT_TRUE(amp.list[i].grad().defined()) << i;
    EXPECT_EQ(amp.list[i].dtype(), kFloat32);
    EXPECT_EQ(amp.list[i].grad().dtype(), kFloat32) << "parameter " << i;
    expect_close(amp.list[i].grad(), ref.list[i].grad(), 1.5 * tolerance(dtype), "gradient " + std::to_string(i));
  }
}

}  // namespace

TEST(Autocast, MlpGradientsOnCpuMatchFloat32) { check_gradients(Device::cpu(), kBFloat16, false); }
TEST(Autocast, CnnGradientsOnCpuMatchFloat32) { check_gradients(Device::cpu(), kBFloat16, true); }

// ---- CUDA ----

TEST(AutocastCuda, PolicyTableInBFloat16) {
  MINIDL_REQUIRE_CUDA();
  check_policy_table(Device::cuda(), kBFloat16);
}

TEST(AutocastCuda, PolicyTableInFloat16) {
  MINIDL_REQUIRE_CUDA();
  check_policy_table(Device::cuda(), kFloat16);
}

TEST(AutocastCuda, AnExplicitDtypeIsKept) {
  MINIDL_REQUIRE_CUDA();
  const Tensor x = randn({4, 7}).to(Device::cuda()).to(kBFloat16);
  AutocastGuard guard(Device::cuda(), kBFloat16);
  EXPECT_EQ(softmax(x, 1).dtype(), kFloat32);                 // the policy: float32
  EXPECT_EQ(softmax(x, 1, kBFloat16).dtype(), kBFloat16);     // asked for: kept, as PyTorch's
  EXPECT_EQ(sum(x, kFloat64).dtype(), kFloat64);
}

TEST(AutocastCuda, OpsOutsideTheTableKeepTheirDtype) {
  MINIDL_REQUIRE_CUDA();
  check_ops_outside_the_table(Device::cuda(), kBFloat16);
  check_ops_outside_the_table(Device::cuda(), kFloat16);
}

TEST(AutocastCuda, BinaryCrossEntropyIsRefused) {
  MINIDL_REQUIRE_CUDA();
  const Tensor p = rand({4, 5}).cuda(), y = rand({4, 5}).cuda();
  AutocastGuard guard(Device::cuda(), kFloat16);
  minidl::testing::expect_error([&] { (void)binary_cross_entropy(p, y); },
                                {"binary_cross_entropy", "unsafe to autocast", "binary_cross_entropy_with_logits"});
}

TEST(AutocastCuda, GradientsMatchFloat32) {
  MINIDL_REQUIRE_CUDA();
  for (DType dtype : {kBFloat16, kFloat16}) {
    check_gradients(Device::cuda(), dtype, false);
    check_gradients(Device::cuda(), dtype, true);
  }
}

TEST(AutocastCuda, MasterGradientsAreFloat32Products) {
  MINIDL_REQUIRE_CUDA();
  check_master_gradients_are_float32_products(Device::cuda(), kBFloat16);
  check_master_gradients_are_float32_products(Device::cuda(), kFloat16);
}

TEST(AutocastCuda, OptimizerStepWritesTheCopies) {
  MINIDL_REQUIRE_CUDA();
  check_step_writes_the_copies(Device::cuda());
  check_step_writes_the_copies(Device::cuda(), true);
}

TEST(AutocastCuda, CrossEntropyReads16BitLogitsWithoutACast) {
  MINIDL_REQUIRE_CUDA();
  check_cross_entropy_of_16bit_logits(Device::cuda(), kBFloat16);
  check_cross_entropy_of_16bit_logits(Device::cuda(), kFloat16);
}

// A tape that saved a copy keeps its values when the next region remakes the copies, as PyTorch's
// casts keep theirs: x's gradient is the sum of w's rows as they were at the forward. (CUDA's: the
// CPU's linear saves a float32 widening of the copy, never the copy itself.)
TEST(AutocastCuda, TapeThatSavedACopyKeepsItsValues) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(44);
  Tensor w = randn({5, 8}).cuda().requires_grad_(true);
  const Tensor x = randn({4, 8}).cuda().requires_grad_(true);  // its gradient reads w's copy
  const Tensor rows_before = sum(w.detach().to(kBFloat16).to(kFloat32), {0}, true).expand({4, 8});
  optim::SGD sgd({w}, optim::SGDOptions(1.0));
  Tensor saved;
  {
    AutocastGuard guard(Device::cuda(), kBFloat16);
    saved = sum(linear(x, w));
    sum(linear(x.detach(), w)).backward();
  }
  sgd.step();
  {
    AutocastGuard guard(Device::cuda(), kBFloat16);
    (void)linear(x.detach(), w);  // remakes the copy
  }
  saved.backward();
  expect_close(x.grad(), rows_before, 4e-3, "x's gradient from the saved copy");  // a bfloat16 sum
}

// The guard taken inside the loss function: capture records the casts (and the cached weight
// casts, made afresh in each step), so replaying the graph must equal running the steps eagerly.
TEST(AutocastCuda, InsideGraphedStepEqualsEager) {
  MINIDL_REQUIRE_CUDA();
  for (DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Params graphed = mlp_params(Device::cuda()), eager = mlp_params(Device::cuda());
    auto loss_fn = [dtype](const Params& p) {
      return [p, dtype](const std::vector<Tensor>& in) {
        AutocastGuard guard(Device::cuda(), dtype);
        Tensor h = linear_relu(in[0], p.list[0], p.list[1]);  // a fused epilogue op
        return cross_entropy(linear(h, p.list[2], p.list[3]), in[1]);
      };
    };
    optim::SGD opt_g(graphed.list, optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD opt_e(eager.list, optim::SGDOptions(0.1).momentum(0.9));
    cuda::GraphedStep step_g(loss_fn(graphed), opt_g, cuda::GraphedStepOptions().warmup(2));
    cuda::GraphedStep step_e(loss_fn(eager), opt_e, cuda::GraphedStepOptions().enabled(false));
    manual_seed(31);
    for (int i = 0; i < 6; ++i) {
      const Tensor x = randn({8, 20}).cuda();
      const Tensor y = randint(0, 10, {8}, TensorOptions().dtype(kInt64)).cuda();
      const float lg = step_g(x, y).item<float>(), le = step_e(x, y).item<float>();
      EXPECT_NEAR(lg, le, 1e-4) << "step " << i;  // the tolerance of tests/test_cuda_graph.cpp
    }
    EXPECT_TRUE(step_g.graphed()) << step_g.eager_reason();
    EXPECT_GT(step_g.replays(), 0);
    // Weights written between replays: each replay remakes the 16-bit copies it reads.
    {
      NoGradGuard no_grad;
      graphed.list[0].mul_(-0.5);
      eager.list[0].mul_(-0.5);
    }
    for (int i = 0; i < 2; ++i) {
      const Tensor x = randn({8, 20}).cuda();
      const Tensor y = randint(0, 10, {8}, TensorOptions().dtype(kInt64)).cuda();
      EXPECT_NEAR(step_g(x, y).item<float>(), step_e(x, y).item<float>(), 1e-4) << "after the write, step " << i;
    }
    for (size_t i = 0; i < graphed.list.size(); ++i) {
      EXPECT_EQ(graphed.list[i].grad().dtype(), kFloat32);
      expect_close(graphed.list[i], eager.list[i], 1e-4, "parameter " + std::to_string(i));
    }
  }
}

}  // namespace minidl::autocast_test
