// batch_norm, layer_norm and group_norm on CUDA: float64 gradient checks on the GPU for x, weight
// and bias; the CUDA kernels against the CPU ones in float32 (outputs, running statistics,
// gradients) on shapes that take every reduction path (column tiles where L == 1 and a block per
// channel otherwise; a warp per row up to 1024 elements and a block beyond); layer norm's rows in
// registers both as 16-byte packs and as single elements (rows of d % 4 != 0, views that start off a
// 16-byte boundary), with the weight and bias gradients summed in grad_x's pass; the modules on the GPU.
// Each test skips, saying why, where no CUDA device is usable.
#include <cmath>
#include <functional>
#include <tuple>

#include "nn/nn.h"
#include "test_cuda_util.h"

namespace minidl::cuda_normalization_test {

using namespace minidl::testing;

namespace {

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).to(gpu()).requires_grad_(); }
Tensor positive_leaf(const Shape& shape) { return uniform(shape, 0.5, 2.0, kFloat64).to(gpu()).requires_grad_(); }

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void expect_gradcheck(const std::string& what, const Fn& f, std::vector<Tensor> inputs) {
  GradcheckResult r = gradcheck(f, std::move(inputs));
  EXPECT_TRUE(r) << what << ": " << r.message;
}

// Runs f on float32 CPU inputs and on their GPU copies, backpropagates one random upstream
// gradient through both, and compares the outputs and every input's gradient.
void expect_gpu_matches_cpu(const std::string& what, const Fn& f, const std::vector<Tensor>& inputs) {
  SCOPED_TRACE(what);
  std::vector<Tensor> on_cpu, on_gpu;
  for (const Tensor& t : inputs) {
    on_cpu.push_back(t.detach().clone().requires_grad_());
    on_gpu.push_back(t.detach().to(gpu()).requires_grad_());
  }
  Tensor out_cpu = f(on_cpu), out_gpu = f(on_gpu);
  ASSERT_EQ(out_gpu.device(), gpu());
  EXPECT_TRUE(all_close(out_gpu, out_cpu, 1e-3, 1e-3)) << "output";
  Tensor seed = randn(out_cpu.shape());
  out_cpu.backward(seed);
  out_gpu.backward(seed.to(gpu()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_TRUE(on_gpu[i].grad().defined()) << "input " << i;
    EXPECT_TRUE(all_close(on_gpu[i].grad(), on_cpu[i].grad(), 1e-3, 1e-3)) << "gradient of input " << i;
  }
}

const std::vector<Shape> kGradcheckShapes = {{5, 3}, {4, 3, 7}, {2, 3, 5, 4}, {1, 2, 3, 3}};

// A contiguous view of `shape` one element into `flat`: 4 (float) or 8 (double) bytes past the
// 16-byte boundary the allocator gives, so the layer norm kernels take their single-element path.
Tensor offset_view(const Tensor& flat, const Shape& shape) {
  return view(narrow(flat, 0, 1, shape_numel(shape)), shape);
}

struct LayerNormGrads {
  Tensor out, x, weight, bias;
};

// layer_norm of [rows, d] float32 x on `device`, backpropagating `seed` (an offset view of a flat
// [rows * d + 1] tensor where seed_off_boundary).
LayerNormGrads layer_norm_grads(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& seed_flat,
                                bool seed_off_boundary, Device device) {
  // Detached first: on the CPU to() returns the caller's tensor itself, which must stay a plain input.
  Tensor xd = x.detach().to(device).requires_grad_(), wd = w.detach().to(device).requires_grad_();
  Tensor bd = b.detach().to(device).requires_grad_();
  Tensor out = layer_norm(xd, {x.size(1)}, wd, bd);
  const Tensor flat = seed_flat.to(device);
  out.backward(seed_off_boundary ? offset_view(flat, x.shape()) : view(narrow(flat, 0, 0, x.numel()), x.shape()));
  return {out, xd.grad(), wd.grad(), bd.grad()};
}

}  // namespace

TEST(CudaNormalization, GradcheckBatchNorm) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (const Shape& shape : kGradcheckShapes) {
    const std::string s = shape_str(shape);
    const int64_t c = shape[1];
    Tensor rm = zeros({c}, kFloat64, gpu()), rv = ones({c}, kFloat64, gpu());
    expect_gradcheck("training " + s,
                     [&](auto& in) { return batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5); },
                     {leaf(shape), positive_leaf({c}), leaf({c})});
    expect_gradcheck("training, no affine, no running stats " + s,
                     [&](auto& in) { return batch_norm(in[0], Tensor(), Tensor(), {}, {}, true); }, {leaf(shape)});
    Tensor erm = randn({c}, kFloat64).to(gpu()), erv = uniform({c}, 0.5, 2, kFloat64).to(gpu());
    expect_gradcheck("eval " + s, [&](auto& in) { return batch_norm(in[0], erm, erv, in[1], in[2], false); },
                     {leaf(shape), positive_leaf({c}), leaf({c})});
    Tensor data = randn(shape, kFloat64).to(gpu());
    expect_gradcheck("weight and bias only " + s,
                     [&](auto& in) { return batch_norm(data, rm, rv, in[0], in[1], true); },
                     {positive_leaf({c}), leaf({c})});
  }
}

TEST(CudaNormalization, GradcheckLayerNormAndGroupNorm) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("layer_norm", [](auto& in) { return layer_norm(in[0], {5}, in[1], in[2]); },
                   {leaf({3, 5}), positive_leaf({5}), leaf({5})});
  expect_gradcheck("layer_norm two dims", [](auto& in) { return layer_norm(in[0], {3, 4}, in[1], in[2]); },
                   {leaf({2, 3, 4}), positive_leaf({3, 4}), leaf({3, 4})});
  expect_gradcheck("layer_norm no affine", [](auto& in) { return layer_norm(in[0], {6}); }, {leaf({1, 6})});
  // Rows in registers: double2 packs (d even), single elements (d odd, views off a 16-byte boundary),
  // the weight and bias gradients over several chunks of rows.
  expect_gradcheck("layer_norm [20, 8]", [](auto& in) { return layer_norm(in[0], {8}, in[1], in[2]); },
                   {leaf({20, 8}), positive_leaf({8}), leaf({8})});
  expect_gradcheck("layer_norm [6, 7]", [](auto& in) { return layer_norm(in[0], {7}, in[1], in[2]); },
                   {leaf({6, 7}), positive_leaf({7}), leaf({7})});
  expect_gradcheck("layer_norm offset views [4, 6]",
                   [](auto& in) {
                     return layer_norm(offset_view(in[0], {4, 6}), {6}, offset_view(in[1], {6}), offset_view(in[2], {6}));
                   },
                   {leaf({25}), positive_leaf({7}), leaf({7})});
  expect_gradcheck("group_norm", [](auto& in) { return group_norm(in[0], 3, in[1], in[2]); },
                   {leaf({2, 6, 5}), positive_leaf({6}), leaf({6})});
  expect_gradcheck("group_norm images", [](auto& in) { return group_norm(in[0], 2, in[1], in[2]); },
                   {leaf({2, 4, 3, 2}), positive_leaf({4}), leaf({4})});
  expect_gradcheck("group_norm [N, C]", [](auto& in) { return group_norm(in[0], 2, in[1], in[2]); },
                   {leaf({3, 4}), positive_leaf({4}), leaf({4})});
  expect_gradcheck("group_norm one group, no affine", [](auto& in) { return group_norm(in[0], 1); }, {leaf({1, 3, 4})});
  Tensor data = randn({2, 4, 5}, kFloat64).to(gpu());
  expect_gradcheck("group_norm weight and bias only", [&](auto& in) { return group_norm(data, 4, in[0], in[1]); },
                   {positive_leaf({4}), leaf({4})});
}

TEST(CudaNormalization, BatchNormMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // [N, C] take the column tiles (one and several); the others a block per channel.
  for (const Shape& shape : std::vector<Shape>{{16, 5}, {64, 40}, {8, 6, 50}, {4, 3, 17, 13}, {32, 16, 24, 24}}) {
    const std::string s = shape_str(shape);
    const int64_t c = shape[1];
    Tensor x = randn(shape) * scalar_like(2, zeros({})) + scalar_like(3, zeros({}));
    Tensor w = uniform({c}, 0.5, 2), b = randn({c});
    // Running statistics: the same start on both devices, one training step, then compared.
    Tensor rm0 = randn({c}), rv0 = uniform({c}, 0.5, 2);
    Tensor rm_cpu = rm0.clone(), rv_cpu = rv0.clone(), rm_gpu = rm0.to(gpu()), rv_gpu = rv0.to(gpu());
    Tensor out_cpu = batch_norm(x, rm_cpu, rv_cpu, w, b, true, 0.2, 1e-5);
    Tensor out_gpu = batch_norm(x.to(gpu()), rm_gpu, rv_gpu, w.to(gpu()), b.to(gpu()), true, 0.2, 1e-5);
    EXPECT_TRUE(all_close(out_gpu, out_cpu, 1e-3, 1e-3)) << s << " training output";
    EXPECT_TRUE(all_close(rm_gpu, rm_cpu, 1e-5, 1e-5)) << s << " running_mean";
    EXPECT_TRUE(all_close(rv_gpu, rv_cpu, 1e-5, 1e-5)) << s << " running_var";
    expect_gpu_matches_cpu("training " + s, [](auto& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
                           {x, w, b});
    expect_gpu_matches_cpu("eval " + s,
                           [&](auto& in) {
                             const Device d = in[0].device();
                             return batch_norm(in[0], rm0.to(d), rv0.to(d), in[1], in[2], false);
                           },
                           {x, w, b});
    expect_gpu_matches_cpu("training, no affine " + s,
                           [](auto& in) { return batch_norm(in[0], Tensor(), Tensor(), {}, {}, true); }, {x});
  }
}

TEST(CudaNormalization, LayerNormAndGroupNormMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Rows of up to 1024 elements sit in a warp's registers (4, 8, 16 or 32 per lane), longer rows
  // take the general kernels; the weight and bias gradients of many rows sum over row chunks.
  expect_gpu_matches_cpu("layer_norm [300, 64]", [](auto& in) { return layer_norm(in[0], {64}, in[1], in[2]); },
                         {randn({300, 64}), uniform({64}, 0.5, 2), randn({64})});
  expect_gpu_matches_cpu("layer_norm [4100, 384]", [](auto& in) { return layer_norm(in[0], {384}, in[1], in[2]); },
                         {randn({4100, 384}), uniform({384}, 0.5, 2), randn({384})});
  expect_gpu_matches_cpu("layer_norm [9, 1000]", [](auto& in) { return layer_norm(in[0], {1000}, in[1], in[2]); },
                         {randn({9, 1000}), uniform({1000}, 0.5, 2), randn({1000})});
  expect_gpu_matches_cpu("layer_norm [5, 100]", [](auto& in) { return layer_norm(in[0], {100}, in[1], in[2]); },
                         {randn({5, 100}) * 3.0 + 7.0, uniform({100}, 0.5, 2), randn({100})});
  expect_gpu_matches_cpu("batch_norm [3000, 40]",
                         [](auto& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5); },
                         {randn({3000, 40}), uniform({40}, 0.5, 2), randn({40})});
  expect_gpu_matches_cpu("layer_norm [4, 2000]", [](auto& in) { return layer_norm(in[0], {2000}, in[1], in[2]); },
                         {randn({4, 2000}), uniform({2000}, 0.5, 2), randn({2000})});
  expect_gpu_matches_cpu("layer_norm [2, 3, 8, 6] over [8, 6]",
                         [](auto& in) { return layer_norm(in[0], {8, 6}, in[1], in[2]); },
                         {randn({2, 3, 8, 6}), uniform({8, 6}, 0.5, 2), randn({8, 6})});
  expect_gpu_matches_cpu("layer_norm no affine", [](auto& in) { return layer_norm(in[0], {33}); }, {randn({7, 33})});
  expect_gpu_matches_cpu("group_norm [4, 32, 8, 8] / 8", [](auto& in) { return group_norm(in[0], 8, in[1], in[2]); },
                         {randn({4, 32, 8, 8}), uniform({32}, 0.5, 2), randn({32})});
  expect_gpu_matches_cpu("group_norm [2, 16, 12, 12] / 2", [](auto& in) { return group_norm(in[0], 2, in[1], in[2]); },
                         {randn({2, 16, 12, 12}), uniform({16}, 0.5, 2), randn({16})});
  expect_gpu_matches_cpu("group_norm [5, 6] / 3", [](auto& in) { return group_norm(in[0], 3, in[1], in[2]); },
                         {randn({5, 6}), uniform({6}, 0.5, 2), randn({6})});
  expect_gpu_matches_cpu("group_norm a group per channel", [](auto& in) { return group_norm(in[0], 6, in[1], in[2]); },
                         {randn({3, 6, 10}), uniform({6}, 0.5, 2), randn({6})});
  expect_gpu_matches_cpu("group_norm no affine", [](auto& in) { return group_norm(in[0], 2); }, {randn({3, 4, 9})});
}

TEST(CudaNormalization, LayerNormPackedAndSingleElementRowsMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // d % 4 == 0: float4 packs at 4, 8, 16 and 32 per lane; otherwise single elements. Up to 512 per
  // row the backward sums the weight and bias gradients itself, over chunks of rows (601 rows: a
  // last chunk of one row).
  for (const int64_t d : {64, 256, 384, 1024, 7, 130, 383, 510, 1022}) {
    const int64_t rows = d <= 512 ? 601 : 40;
    const std::string s = "[" + std::to_string(rows) + ", " + std::to_string(d) + "]";
    expect_gpu_matches_cpu("layer_norm " + s, [d](auto& in) { return layer_norm(in[0], {d}, in[1], in[2]); },
                           {randn({rows, d}) * 2.0 + 1.0, uniform({d}, 0.5, 2), randn({d})});
  }
  // Only one of the parameters, none, or only the parameters needing a gradient.
  expect_gpu_matches_cpu("layer_norm weight only", [](auto& in) { return layer_norm(in[0], {384}, in[1]); },
                         {randn({100, 384}), uniform({384}, 0.5, 2)});
  expect_gpu_matches_cpu("layer_norm bias only",
                         [](auto& in) { return layer_norm(in[0], {384}, Tensor(), in[1]); },
                         {randn({100, 384}), randn({384})});
  expect_gpu_matches_cpu("layer_norm no affine [100, 384]", [](auto& in) { return layer_norm(in[0], {384}); },
                         {randn({100, 384})});
  const Tensor data = randn({100, 384}), data_gpu = data.to(gpu());
  expect_gpu_matches_cpu("layer_norm, x without gradient",
                         [&](auto& in) {
                           return layer_norm(in[0].device() == gpu() ? data_gpu : data, {384}, in[0], in[1]);
                         },
                         {uniform({384}, 0.5, 2), randn({384})});
  // x, weight and bias 4 bytes past a 16-byte boundary, d % 4 == 0: single elements.
  for (const int64_t d : {128, 384}) {
    expect_gpu_matches_cpu("layer_norm offset views d = " + std::to_string(d),
                           [d](auto& in) {
                             return layer_norm(offset_view(in[0], {50, d}), {d}, offset_view(in[1], {d}),
                                               offset_view(in[2], {d}));
                           },
                           {randn({50 * d + 1}), uniform({d + 1}, 0.5, 2), randn({d + 1})});
  }
}

TEST(CudaNormalization, LayerNormOffsetGradientMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // The upstream gradient 4 bytes past a 16-byte boundary: the backward reads it element by element.
  for (const int64_t d : {384, 1024}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    const Tensor x = randn({70, d}), w = uniform({d}, 0.5, 2), b = randn({d}), seed = randn({70 * d + 1});
    const LayerNormGrads on_cpu = layer_norm_grads(x, w, b, seed, true, Device::cpu());
    const LayerNormGrads on_gpu = layer_norm_grads(x, w, b, seed, true, gpu());
    EXPECT_TRUE(all_close(on_gpu.out, on_cpu.out, 1e-3, 1e-3)) << "output";
    EXPECT_TRUE(all_close(on_gpu.x, on_cpu.x, 1e-3, 1e-3)) << "grad x";
    EXPECT_TRUE(all_close(on_gpu.weight, on_cpu.weight, 1e-3, 1e-3)) << "grad weight";
    EXPECT_TRUE(all_close(on_gpu.bias, on_cpu.bias, 1e-3, 1e-3)) << "grad bias";
  }
}

TEST(CudaNormalization, LayerNormGradientsSameBitsEveryRun) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // The weight and bias gradients are summed over chunks of rows in a fixed order.
  const Tensor x = randn({3000, 384}), w = uniform({384}, 0.5, 2), b = randn({384}), seed = randn({3000 * 384});
  const LayerNormGrads first = layer_norm_grads(x, w, b, seed, false, gpu());
  const LayerNormGrads second = layer_norm_grads(x, w, b, seed, false, gpu());
  EXPECT_TRUE(equal(first.out, second.out));
  EXPECT_TRUE(equal(first.x, second.x));
  EXPECT_TRUE(equal(first.weight, second.weight));
  EXPECT_TRUE(equal(first.bias, second.bias));
}

TEST(CudaNormalization, BatchNormModuleOnGpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  nn::BatchNorm2d on_cpu(4), on_gpu(4);
  on_gpu->to(gpu());
  for (auto& [name, t] : on_gpu->named_buffers()) EXPECT_EQ(t.device(), gpu()) << name;
  EXPECT_EQ(on_gpu->num_batches_tracked.dtype(), kInt64);
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn({3, 4, 5, 6}) + scalar_like(1, zeros({}));
    EXPECT_TRUE(all_close(on_gpu(x.to(gpu())), on_cpu(x), 1e-3, 1e-3)) << "training step " << step;
  }
  EXPECT_TRUE(all_close(on_gpu->running_mean, on_cpu->running_mean, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(on_gpu->running_var, on_cpu->running_var, 1e-5, 1e-5));
  EXPECT_EQ(on_gpu->num_batches_tracked.item<int64_t>(), 2);
  on_cpu->eval();
  on_gpu->eval();
  Tensor x = randn({2, 4, 3, 3});
  EXPECT_TRUE(all_close(on_gpu(x.to(gpu())), on_cpu(x), 1e-3, 1e-3)) << "eval";
  // The cumulative average reads the count from the device.
  nn::BatchNorm1d cumulative(nn::BatchNormOptions(3).momentum(std::nullopt));
  cumulative->to(gpu());
  cumulative(randn({4, 3}).to(gpu()));
  cumulative(randn({4, 3}).to(gpu()));
  EXPECT_EQ(cumulative->num_batches_tracked.item<int64_t>(), 2);
}

TEST(CudaNormalization, DeviceMismatch) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = zeros({2, 3}, kFloat32, gpu());
  std::string msg;
  try {
    batch_norm(x, zeros({3}), ones({3}), Tensor(), Tensor(), true);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("batch_norm: expected all tensors on one device"), std::string::npos) << msg;
}

// dropout_add_layer_norm's kernels: float64 gradient checks on the GPU (a fixed seed before each
// evaluation keeps the dropout's mask), and the float32 and 16-bit kernels against the composition
// they replace (dropout, add, layer_norm, cast) from the same generator state: the same mask, the same
// sum, outputs and gradients within the dtype's rounding.
TEST(CudaDropoutAddLayerNorm, GradcheckFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (double p : {0.0, 0.4}) {
    for (const Shape& shape : std::vector<Shape>{{3, 2, 6}, {4, 130}}) {
      const int64_t d = shape.back();
      auto f = [p](const std::vector<Tensor>& in) {
        manual_seed(11);
        auto [out, sum] = dropout_add_layer_norm(in[0], in[1], in[2], in[3], p, true);
        return out * 1.5 + sum * sum;
      };
      // The fused kernel, not the composition, is what the check reaches.
      Tensor x = leaf(shape);
      EXPECT_EQ(std::get<1>(dropout_add_layer_norm(x, leaf(shape), {}, {}, p, true)).grad_fn()->name(),
                "DropoutAddLayerNormBackward0");
      expect_gradcheck("p " + std::to_string(p) + ", " + shape_str(shape), f,
                       {leaf(shape), leaf(shape), positive_leaf({d}), leaf({d})});
      auto out_only = [p](const std::vector<Tensor>& in) {
        manual_seed(11);
        return std::get<0>(dropout_add_layer_norm(in[0], in[1], Tensor(), Tensor(), p, true));
      };
      expect_gradcheck("no weight, out only, p " + std::to_string(p), out_only, {leaf(shape), leaf(shape)});
      // Only the sum reaches the loss: x's gradient is the sum's through the kernel's mask.
      auto sum_only = [p](const std::vector<Tensor>& in) {
        manual_seed(11);
        return std::get<1>(dropout_add_layer_norm(in[0], in[1], in[2], in[3], p, true)) * 2.5;
      };
      expect_gradcheck("sum only, p " + std::to_string(p), sum_only,
                       {leaf(shape), leaf(shape), positive_leaf({d}), leaf({d})});
      auto no_residual = [p](const std::vector<Tensor>& in) {
        manual_seed(11);
        auto [out, sum] = dropout_add_layer_norm(in[0], Tensor(), in[1], in[2], p, true);
        return out * 1.5 + sum * sum;
      };
      expect_gradcheck("no residual, p " + std::to_string(p), no_residual,
                       {leaf(shape), positive_leaf({d}), leaf({d})});
    }
  }
}

TEST(CudaDropoutAddLayerNorm, MatchesTheCompositionItReplaces) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const uint64_t seed = fresh_seed();
  struct Case {
    DType branch;
    int64_t rows, d;
    double tol;
  };
  // float32 rows of 384 (nanoGPT's width, 3 groups of 4 a lane), 36 (one partial group a lane) and
  // 512 (the widest); bfloat16 and float16 branches round their outputs and gradients.
  for (const Case& c : {Case{kFloat32, 300, 384, 1e-5}, Case{kFloat32, 37, 36, 1e-5}, Case{kFloat32, 9, 512, 1e-5},
                        Case{kBFloat16, 300, 384, 1e-2}, Case{kFloat16, 50, 64, 2e-3}}) {
    SCOPED_TRACE(std::string(dtype_name(c.branch)) + " [" + std::to_string(c.rows) + ", " + std::to_string(c.d) + "]");
    const Tensor x0 = randn({c.rows, c.d}).to(c.branch).to(gpu()), r0 = randn({c.rows, c.d}).to(gpu());
    const Tensor w0 = randn({c.d}).to(gpu()), b0 = randn({c.d}).to(gpu());
    const Tensor seed_out = randn({c.rows, c.d}).to(c.branch).to(gpu()), seed_sum = randn({c.rows, c.d}).to(gpu());
    auto run = [&](bool fused) {
      std::vector<Tensor> in = {x0.detach().requires_grad_(), r0.detach().requires_grad_(),
                                w0.detach().requires_grad_(), b0.detach().requires_grad_()};
      manual_seed(seed);
      Tensor out, sum;
      if (fused) {
        std::tie(out, sum) = dropout_add_layer_norm(in[0], in[1], in[2], in[3], 0.2, true);
        EXPECT_EQ(sum.grad_fn()->name(), "DropoutAddLayerNormBackward0");
      } else {
        sum = in[1] + dropout(in[0], 0.2, true);
        out = layer_norm(sum, {c.d}, in[2], in[3]).to(c.branch);
      }
      autograd::backward({out, sum}, {seed_out, seed_sum});
      return std::vector<Tensor>{out, sum, in[0].grad(), in[1].grad(), in[2].grad(), in[3].grad()};
    };
    const std::vector<Tensor> fused = run(true), composed = run(false);
    EXPECT_TRUE(all_equal(fused[1], composed[1])) << "sum: the same mask and the same rounding";
    const char* names[] = {"out", "sum", "grad x", "grad residual", "grad weight", "grad bias"};
    for (size_t i = 0; i < fused.size(); ++i) {
      // Sums over the rows (the weight and bias gradients) grow with them.
      const double tol = i >= 4 ? c.tol * std::sqrt(double(c.rows)) : c.tol;
      EXPECT_TRUE(all_close(fused[i].to(kFloat32), composed[i].to(kFloat32), tol, tol)) << names[i];
    }
  }
}

// The embeddings' seam: no residual, a float32 x, and out in float32 or a 16-bit dtype (the first
// block's product's), against dropout then layer_norm then the cast, from one generator state.
TEST(CudaDropoutAddLayerNorm, WithoutAResidualMatchesTheComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const uint64_t seed = fresh_seed();
  const int64_t rows = 200, d = 384;
  for (DType out_dtype : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(out_dtype));
    const double tol = out_dtype == kFloat32 ? 1e-5 : out_dtype == kBFloat16 ? 1e-2 : 2e-3;
    const Tensor x0 = randn({rows, d}).to(gpu()), w0 = randn({d}).to(gpu()), b0 = randn({d}).to(gpu());
    const Tensor seed_out = randn({rows, d}).to(out_dtype).to(gpu()), seed_sum = randn({rows, d}).to(gpu());
    auto run = [&](bool fused) {
      std::vector<Tensor> in = {x0.detach().requires_grad_(), w0.detach().requires_grad_(),
                                b0.detach().requires_grad_()};
      manual_seed(seed);
      Tensor out, sum;
      if (fused) {
        std::tie(out, sum) = dropout_add_layer_norm(in[0], Tensor(), in[1], in[2], 0.2, true, 1e-5, out_dtype);
        EXPECT_EQ(sum.grad_fn()->name(), "DropoutAddLayerNormBackward0");
        EXPECT_EQ(out.dtype(), out_dtype);
      } else {
        sum = dropout(in[0], 0.2, true);
        out = layer_norm(sum, {d}, in[1], in[2]).to(out_dtype);
      }
      autograd::backward({out, sum}, {seed_out, seed_sum});
      return std::vector<Tensor>{out, sum, in[0].grad(), in[1].grad(), in[2].grad()};
    };
    const std::vector<Tensor> fused = run(true), composed = run(false);
    EXPECT_TRUE(all_equal(fused[1], composed[1])) << "sum: the same mask";
    const char* names[] = {"out", "sum", "grad x", "grad weight", "grad bias"};
    for (size_t i = 0; i < fused.size(); ++i) {
      const double t = i >= 3 ? tol * std::sqrt(double(rows)) : tol;
      EXPECT_TRUE(all_close(fused[i].to(kFloat32), composed[i].to(kFloat32), t, t)) << names[i];
    }
  }
}

// Where the kernels decline (rows longer than 512, a 16-bit residual, a view that starts off the
// groups' alignment), the op is the composition: the same values, and the composition's graph.
TEST(CudaDropoutAddLayerNorm, DeclinesToTheComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Tensor flat = randn({4 * 520 + 1}).to(gpu());
  struct Case {
    std::string what;
    Tensor x, residual;
  };
  const std::vector<Case> cases = {
      {"rows of 520", randn({4, 520}).to(gpu()), randn({4, 520}).to(gpu())},
      {"a bfloat16 residual", randn({4, 8}).to(kBFloat16).to(gpu()), randn({4, 8}).to(kBFloat16).to(gpu())},
      {"a view off alignment", offset_view(flat, {4, 8}), randn({4, 8}).to(gpu())}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const int64_t d = c.x.size(-1);
    const Tensor w = randn({d}).to(c.residual.dtype()).to(gpu()).requires_grad_();
    const uint64_t seed = fresh_seed();
    manual_seed(seed);
    const Tensor x = c.x.detach().requires_grad_();
    auto [out, sum] = dropout_add_layer_norm(x, c.residual, w, {}, 0.3, true);
    EXPECT_NE(sum.grad_fn()->name(), "DropoutAddLayerNormBackward0");
    manual_seed(seed);
    const Tensor ref_sum = c.residual + dropout(c.x, 0.3, true);
    EXPECT_TRUE(all_equal(sum.detach(), ref_sum));
    EXPECT_TRUE(all_close(out.detach(), layer_norm(ref_sum, {d}, w.detach()).to(c.x.dtype()), 1e-6, 1e-6));
    (out.to(kFloat32).sum() + sum.to(kFloat32).sum()).backward();
    EXPECT_TRUE(x.grad().defined() && w.grad().defined());
  }
}

// A transformer's first seam from its embeddings (embedding_dropout_layer_norm): the seam's kernel
// looks the rows up itself, and gives the bits of embedding_sum then dropout_add_layer_norm from one
// generator state, forward and backward.
TEST(CudaDropoutAddLayerNorm, TheEmbeddingsSeamMatchesTheComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const uint64_t seed = fresh_seed();
  for (int64_t d : {384, 36}) {
    for (DType out_dtype : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(out_dtype)) + " width " + std::to_string(d));
      const Tensor wte0 = randn({65, d}).to(gpu()), wpe0 = randn({37, d}).to(gpu());
      const Tensor w0 = randn({d}).to(gpu()), b0 = randn({d}).to(gpu());
      const Tensor ids = randint(65, {6, 37}).to(gpu()), pos = arange(37, kInt64, gpu());
      const Tensor seed_out = randn({6, 37, d}).to(out_dtype).to(gpu()), seed_sum = randn({6, 37, d}).to(gpu());
      auto run = [&](bool fused) {
        std::vector<Tensor> in = {wte0.detach().requires_grad_(), wpe0.detach().requires_grad_(),
                                  w0.detach().requires_grad_(), b0.detach().requires_grad_()};
        manual_seed(seed);
        Tensor out, sum;
        if (fused) {
          std::tie(out, sum) =
              embedding_dropout_layer_norm(in[0], ids, in[1], pos, in[2], in[3], 0.2, true, 1e-5, out_dtype);
          EXPECT_EQ(sum.grad_fn()->name(), "EmbeddingDropoutLayerNormBackward0");
        } else {
          std::tie(out, sum) = dropout_add_layer_norm(embedding_sum(in[0], ids, in[1], pos), Tensor(), in[2], in[3],
                                                      0.2, true, 1e-5, out_dtype);
        }
        autograd::backward({out, sum}, {seed_out, seed_sum});
        return std::vector<Tensor>{out, sum, in[0].grad(), in[1].grad(), in[2].grad(), in[3].grad()};
      };
      const std::vector<Tensor> fused = run(true), composed = run(false);
      const char* names[] = {"out", "sum", "grad wte", "grad wpe", "grad weight", "grad bias"};
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(all_equal(fused[i], composed[i])) << names[i];
    }
  }
  auto f = [](const std::vector<Tensor>& in) {
    manual_seed(11);
    const Tensor tokens = Tensor::from_vector<int64_t>({3, 0, 3, 1, 2, 3, 0, 0}, {2, 4}).to(gpu());
    auto [o, s] = embedding_dropout_layer_norm(in[0], tokens, in[1], arange(4, kInt64, gpu()), in[2], in[3], 0.4, true);
    return o * 1.5 + s * s;
  };
  Tensor table = leaf({4, 6});
  EXPECT_EQ(std::get<1>(embedding_dropout_layer_norm(table, randint(4, {2, 4}).to(gpu()), leaf({4, 6}),
                                                     arange(4, kInt64, gpu())))
                .grad_fn()
                ->name(),
            "EmbeddingDropoutLayerNormBackward0");
  expect_gradcheck("the embeddings' seam", f, {table, leaf({4, 6}), positive_leaf({6}), leaf({6})});
  const Tensor wte = randn({5, 8}).to(gpu()), wpe = randn({2, 8}).to(gpu());
  try {
    std::get<0>(embedding_dropout_layer_norm(wte, Tensor::from_vector<int64_t>({1, 9}, {1, 2}).to(gpu()), wpe,
                                             arange(2, kInt64, gpu())))
        .cpu();
    ADD_FAILURE() << "expected an error for id 9 of a table of 5 rows";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 9"), std::string::npos) << msg;
  }
}

TEST(CudaNormalization, RmsNormMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_cpu_cuda_agree("rms_norm", [](auto& in) { return rms_norm(in[0], {384}, in[1]); },
                          {randn({33, 384}, dtype), randn({384}, dtype)}, dtype == kFloat64 ? 1e-10 : 1e-4);
    expect_cpu_cuda_agree("rms_norm, two dims", [](auto& in) { return rms_norm(in[0], {4, 6}, {}, 1e-3); },
                          {randn({5, 4, 6}, dtype)}, dtype == kFloat64 ? 1e-10 : 1e-4);
  }
  // bfloat16 normalized in float32: the CPU's result to the bit, or one rounding apart.
  const Tensor x = randn({16, 256}).to(kBFloat16), w = randn({256});
  EXPECT_TRUE(all_close(rms_norm(x.to(gpu()), {256}, w.to(gpu())).to(kFloat32), rms_norm(x, {256}, w).to(kFloat32),
                        1e-2, 1e-2));
}

}  // namespace minidl::cuda_normalization_test
