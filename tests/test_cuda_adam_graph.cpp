// Adam and AdamW on CUDA: the fused multi-tensor step (device step counts and learning rate)
// against the CPU's per-parameter step, inside cuda::GraphedStep with parameter groups, a cosine
// schedule, gradient clipping and a GradScaler, and the fused clip_grad_norm_ against the composed
// one. GPU tests skip, saying why, where no CUDA device is usable.
#include "nn/clip_grad.h"
#include "optim/optim.h"
#include "test_cuda_util.h"

namespace minidl::cuda_adam_graph_test {

using namespace minidl::testing;

namespace {

struct Batch {
  Tensor x, y;  // on the CPU; each run moves them to its device
};

// Ten batches of 8 rows; `inf_at`: that batch holds an inf (its step overflows).
std::vector<Batch> batches(int count, int inf_at = -1) {
  manual_seed(71);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) {
    std::vector<float> xs = randn({8, 12}).to_vector<float>();
    if (i == inf_at) xs[5] = std::numeric_limits<float>::infinity();
    out.push_back({Tensor::from_vector<float>(xs, {8, 12}), randint(0, 4, {8}, TensorOptions().dtype(kInt64))});
  }
  return out;
}

struct AdamSetup {
  bool decoupled = true;  // AdamW
  bool amsgrad = false;
  double beta2 = 0.99;
  bool scaler = false;
  std::optional<double> clip = std::nullopt;
};

struct Trained {
  std::vector<Tensor> params;                // after training, on the CPU
  std::vector<std::vector<Tensor>> history;  // the parameters after each step
  std::vector<int64_t> steps;                // parameter 0's step count after each step
  int64_t replays = 0;
  bool graphed = false;
  float last_norm = 0;
};

// A 12-16-4 MLP trained with Adam(W) in two groups (the matrices decayed at lr 1e-2, the biases not
// decayed at 2e-2) under a cosine schedule, each step through cuda::GraphedStep (eager on the CPU
// or with graphed = false).
Trained train(Device device, bool graphed, const std::vector<Batch>& data, const AdamSetup& setup) {
  manual_seed(72);
  std::vector<Tensor> p;
  for (auto shape : std::vector<Shape>{{16, 12}, {16}, {4, 16}, {4}})
    p.push_back(mul(randn(shape), 0.3).to(device).requires_grad_(true));
  std::vector<optim::ParamGroup> groups{optim::ParamGroup({p[0], p[2]}), optim::ParamGroup({p[1], p[3]}, 2e-2, 0.0)};
  const auto options = optim::AdamOptions(1e-2).betas({0.9, setup.beta2}).weight_decay(0.1).amsgrad(setup.amsgrad);
  std::unique_ptr<optim::Adam> opt = setup.decoupled ? std::make_unique<optim::AdamW>(groups, options)
                                                     : std::make_unique<optim::Adam>(groups, options);
  optim::CosineAnnealingLR schedule(*opt, static_cast<int64_t>(data.size()), 1e-3);
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024.0).growth_interval(3));
  auto step_options = cuda::GraphedStepOptions().warmup(2).enabled(graphed);
  if (setup.scaler) step_options.grad_scaler(&scaler);
  if (setup.clip) step_options.clip_grad_norm(*setup.clip);
  cuda::GraphedStep step(
      [&](const std::vector<Tensor>& in) { return cross_entropy(linear(relu(linear(in[0], p[0], p[1])), p[2], p[3]), in[1]); },
      *opt, step_options);
  Trained run;
  for (const Batch& b : data) {
    step(b.x.to(device), b.y.to(device));
    schedule.step();
    std::vector<Tensor> now;
    for (const Tensor& t : p) now.push_back(t.detach().to(Device::cpu()).clone());
    run.history.push_back(now);
    run.steps.push_back(opt->state_dict().at("state.0.step").item<int64_t>());
  }
  run.params = run.history.back();
  run.replays = step.replays();
  run.graphed = step.graphed();
  if (setup.clip) run.last_norm = step.grad_norm().to(Device::cpu()).item<float>();
  return run;
}

void expect_close(const Trained& a, const Trained& b, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t s = 0; s < a.history.size(); ++s)
    for (size_t i = 0; i < a.history[s].size(); ++i)
      EXPECT_TRUE(all_close(a.history[s][i], b.history[s][i], atol, rtol)) << what << ": parameter " << i << " after step " << s;
  EXPECT_EQ(a.steps, b.steps) << what;
}

bool any_parameter_differs(const Trained& a, const Trained& b) {
  for (size_t i = 0; i < a.params.size(); ++i)
    if (!all_close(a.params[i], b.params[i], 1e-7, 0)) return true;
  return false;
}

}  // namespace

// Groups with their own lr and weight decay, a cosine schedule changing lr between replays, and
// clipping that is active at every step: the replays equal the eager CUDA steps to float32
// rounding, and both equal the CPU's per-parameter Adam.
TEST(CudaAdamGraph, GraphedAdamWWithGroupsScheduleAndClipEqualsEager) {
  MINIDL_REQUIRE_CUDA();
  const auto data = batches(6);
  const AdamSetup setup{.clip = 0.05};
  Trained graphed = train(gpu(), true, data, setup);
  Trained eager = train(gpu(), false, data, setup);
  Trained cpu = train(Device::cpu(), false, data, setup);
  EXPECT_TRUE(graphed.graphed);
  EXPECT_EQ(graphed.replays, 4);  // after two warm-up steps
  expect_close(graphed, eager, 1e-6, 1e-5, "graphed vs eager");
  expect_close(eager, cpu, 2e-5, 1e-4, "CUDA vs CPU");
  EXPECT_EQ(graphed.steps.back(), 6);
  EXPECT_GT(graphed.last_norm, 0.05f);  // the clip was active
  EXPECT_NEAR(graphed.last_norm, cpu.last_norm, 1e-4 * cpu.last_norm);
  // The comparison can fail: without the clip the parameters differ (a little: Adam's update is
  // nearly invariant to a scale, so only the change of the clip factor from step to step shows).
  EXPECT_TRUE(any_parameter_differs(train(gpu(), true, data, AdamSetup{}), graphed));
}

// With a GradScaler the batch with an inf overflows inside the graph: the parameters and the step
// counts stay as they were (no host sync decides it), the scale backs off, and training goes on
// as the eager and CPU runs do.
TEST(CudaAdamGraph, OverflowInsideTheGraphSkipsTheStep) {
  MINIDL_REQUIRE_CUDA();
  const auto data = batches(7, /*inf_at=*/4);
  const AdamSetup setup{.scaler = true, .clip = 1.0};
  Trained graphed = train(gpu(), true, data, setup);
  Trained eager = train(gpu(), false, data, setup);
  Trained cpu = train(Device::cpu(), false, data, setup);
  EXPECT_TRUE(graphed.graphed);
  EXPECT_EQ(graphed.replays, 5);
  EXPECT_EQ(graphed.steps, (std::vector<int64_t>{1, 2, 3, 4, 4, 5, 6}));
  for (size_t i = 0; i < graphed.params.size(); ++i)
    EXPECT_TRUE(all_equal(graphed.history[4][i], graphed.history[3][i])) << "parameter " << i << " moved on the inf step";
  EXPECT_FALSE(all_close(graphed.history[5][0], graphed.history[4][0], 1e-7, 0));  // the next step moves it
  expect_close(graphed, eager, 1e-6, 1e-5, "graphed vs eager");
  expect_close(eager, cpu, 2e-5, 1e-4, "CUDA vs CPU");
}

// AMSGrad with coupled weight decay (Adam), graphed, against eager and the CPU.
TEST(CudaAdamGraph, GraphedAmsgradEqualsEager) {
  MINIDL_REQUIRE_CUDA();
  const auto data = batches(6);
  // beta2 0.5: exp_avg_sq falls often within a few steps, where amsgrad keeps its maximum.
  const AdamSetup setup{.decoupled = false, .amsgrad = true, .beta2 = 0.5};
  Trained graphed = train(gpu(), true, data, setup);
  Trained eager = train(gpu(), false, data, setup);
  Trained cpu = train(Device::cpu(), false, data, setup);
  EXPECT_TRUE(graphed.graphed);
  expect_close(graphed, eager, 1e-6, 1e-5, "graphed vs eager");
  expect_close(eager, cpu, 2e-5, 1e-4, "CUDA vs CPU");
  EXPECT_TRUE(any_parameter_differs(train(gpu(), true, data, AdamSetup{.decoupled = false, .beta2 = 0.5}), graphed));
}

// More parameters than one launch takes (the kernels take 32 a launch), of odd sizes, an empty one
// among them, float64 and float32, AdamW with amsgrad and maximize: the fused step equals the CPU's.
TEST(CudaAdamGraph, FusedStepOfManyParametersEqualsTheCpu) {
  MINIDL_REQUIRE_CUDA();
  for (DType dtype : {kFloat64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    manual_seed(73);
    std::vector<Tensor> cpu_params, gpu_params;
    for (int i = 0; i < 40; ++i) {
      const Shape shape = i == 7 ? Shape{0, 3} : Shape{1 + (i * 397) % 1500};
      Tensor init = randn(shape, dtype);
      cpu_params.push_back(init.clone().requires_grad_(true));
      gpu_params.push_back(init.to(gpu()).requires_grad_(true));
    }
    const auto options = optim::AdamOptions(3e-3).weight_decay(0.05).amsgrad(true).maximize(true);
    optim::AdamW cpu_opt(cpu_params, options), gpu_opt(gpu_params, options);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        Tensor g = randn(cpu_params[i].shape(), dtype);
        cpu_params[i].set_grad(g);
        gpu_params[i].set_grad(g.to(gpu()));
      }
      cpu_opt.param_groups()[0].lr = 3e-3 / (1 + step);
      gpu_opt.param_groups()[0].lr = 3e-3 / (1 + step);
      cpu_opt.step();
      gpu_opt.step();
    }
    const double atol = dtype == kFloat64 ? 1e-12 : 1e-6, rtol = dtype == kFloat64 ? 1e-10 : 1e-5;
    for (size_t i = 0; i < cpu_params.size(); ++i)
      EXPECT_TRUE(all_close(gpu_params[i].detach(), cpu_params[i].detach(), atol, rtol)) << "parameter " << i;
    const auto cpu_state = cpu_opt.state_dict(), gpu_state = gpu_opt.state_dict();
    EXPECT_EQ(gpu_state.at("state.39.step").item<int64_t>(), 3);
    EXPECT_TRUE(all_close(gpu_state.at("state.39.max_exp_avg_sq"), cpu_state.at("state.39.max_exp_avg_sq"), atol, rtol));
  }
}

// A loaded state_dict writes the device step counts in place: the next step's bias correction
// follows the loaded count.
TEST(CudaAdamGraph, LoadedStepCountReachesTheDevice) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(74);
  Tensor init = randn({50});
  Tensor a = init.to(gpu()).requires_grad_(true), b = init.clone().requires_grad_(true);
  optim::Adam gpu_opt(std::vector<Tensor>{a}, optim::AdamOptions(1e-2)), cpu_opt(std::vector<Tensor>{b}, optim::AdamOptions(1e-2));
  Tensor g = randn({50});
  a.set_grad(g.to(gpu()));
  b.set_grad(g);
  gpu_opt.step();
  cpu_opt.step();
  auto state = cpu_opt.state_dict();
  state["state.0.step"] = full({}, int64_t{40}, kInt64);
  gpu_opt.load_state_dict(state);
  cpu_opt.load_state_dict(state);
  gpu_opt.step();
  cpu_opt.step();
  EXPECT_EQ(gpu_opt.state_dict().at("state.0.step").item<int64_t>(), 41);
  EXPECT_TRUE(all_close(a.detach(), b.detach(), 1e-6, 1e-5));
}

// The fused 2-norm clip (more gradients than one launch takes, some longer than a block's chunk)
// against the composed CPU clip: the same norm and gradients, clipped or not.
TEST(CudaAdamGraph, FusedClipGradNormEqualsTheComposedOne) {
  MINIDL_REQUIRE_CUDA();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (double max_norm : {0.5, 1e4}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " max_norm " + std::to_string(max_norm));
      manual_seed(75);
      std::vector<Tensor> cpu_params, gpu_params;
      for (int i = 0; i < 60; ++i) {
        Tensor p = zeros({i % 10 == 0 ? 9000 + i : 1 + (i * 211) % 2000}, dtype);
        Tensor g = randn(p.shape(), dtype);
        cpu_params.push_back(p.clone().requires_grad_(true));
        gpu_params.push_back(p.to(gpu()).requires_grad_(true));
        cpu_params.back().set_grad(g);
        gpu_params.back().set_grad(g.to(gpu()));
      }
      const Tensor cpu_norm = nn::utils::clip_grad_norm_(cpu_params, max_norm);
      const Tensor gpu_norm = nn::utils::clip_grad_norm_(gpu_params, max_norm);
      EXPECT_EQ(gpu_norm.dtype(), dtype);
      EXPECT_TRUE(all_close(gpu_norm, cpu_norm, 0, dtype == kFloat64 ? 1e-12 : 1e-5));
      for (size_t i = 0; i < cpu_params.size(); ++i)
        EXPECT_TRUE(all_close(gpu_params[i].grad(), cpu_params[i].grad(), 1e-7, dtype == kFloat64 ? 1e-12 : 1e-5))
            << "gradient " << i;
    }
  }
}

}  // namespace minidl::cuda_adam_graph_test
