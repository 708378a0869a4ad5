// The NCCL process group and DistributedDataParallel on two GPUs, the two ranks as two threads of
// this process (NCCL allows one communicator per thread and GPU). Skipped, saying why, without two
// GPUs or without NCCL. The multi-process paths (the launcher, a rank that dies) run in
// scripts/gpu_distributed.sh.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <string>
#include <vector>

#include "distributed/distributed.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_cuda_util.h"
#include "test_port_util.h"

namespace minidl::cuda_distributed_test {

using namespace minidl::distributed;
using minidl::testing::free_port;

namespace {

#define MINIDL_REQUIRE_TWO_GPUS()                                                                          \
  do {                                                                                                     \
    MINIDL_REQUIRE_CUDA();                                                                                 \
    if (!nccl_available()) GTEST_SKIP() << nccl_unavailable_reason();                                      \
    if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << cuda::device_count(); \
  } while (0)

// Runs body(group) on two threads, rank r on cuda:r, and rethrows the first failure.
void on_two_ranks(const std::function<void(ProcessGroup&)>& body) {
  const Rendezvous where = Rendezvous::tcp("127.0.0.1", free_port());
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      cuda::set_device(r);
      ProcessGroup group(r, 2, where, Device::cuda(r), ProcessGroupOptions().timeout(std::chrono::seconds(120)));
      body(group);
      cuda::synchronize(r);
    }));
  for (auto& r : ranks) r.get();
}

struct Net : nn::Module {
  Net() : fc1(12, 16), fc2(16, 3) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
  nn::Linear fc1, fc2;
};

std::vector<std::vector<float>> values_of(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : tensors) out.push_back(t.to(Device::cpu()).to_vector<float>());
  return out;
}

}  // namespace

TEST(CudaDistributed, CollectivesGiveEveryRankTheSameAnswer) {
  MINIDL_REQUIRE_TWO_GPUS();
  on_two_ranks([](ProcessGroup& g) {
    const Device d = g.device();
    const double r = g.rank();
    Tensor a = Tensor::from_vector<float>({1 + float(r), 10 * float(r), -2}).to(d);
    g.all_reduce(a);
    EXPECT_EQ(a.to(Device::cpu()).to_vector<float>(), (std::vector<float>{3, 10, -4}));
    Tensor m = Tensor::from_vector<double>({r, -r}).to(d);
    g.all_reduce(m, distributed::ReduceOp::Max);
    EXPECT_EQ(m.to(Device::cpu()).to_vector<double>(), (std::vector<double>{1, 0}));
    Tensor avg = Tensor::from_vector<float>({2 * float(r)}).to(d);
    g.all_reduce(avg, distributed::ReduceOp::Avg);
    EXPECT_EQ(avg.item<float>(), 1.0f);
    Tensor i = Tensor::from_vector<int64_t>({int64_t(r) + 5}).to(d);
    g.all_reduce(i, distributed::ReduceOp::Product);
    EXPECT_EQ(i.item<int64_t>(), 30);
    Tensor b = Tensor::from_vector<float>({float(r), 7}).to(d);
    g.broadcast(b, 1);
    EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 7}));
    Tensor gathered = g.all_gather(Tensor::from_vector<int64_t>({int64_t(r), int64_t(r) * 2}).to(d));
    EXPECT_EQ(gathered.shape(), (Shape{2, 2}));
    EXPECT_EQ(gathered.to(Device::cpu()).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 2}));
    g.barrier();
    // Bad input: said, not sent (both ranks make the same mistakes, so no collective is left waiting).
    Tensor on_cpu = Tensor::from_vector<float>({1});
    EXPECT_THROW(g.all_reduce(on_cpu), Error);
    Tensor strided = randn({4, 4}).to(d).t();
    EXPECT_THROW(g.all_reduce(strided), Error);
    Tensor flags = (randn({3}) > 0.0).to(d);
    EXPECT_THROW(g.all_reduce(flags), Error);
    Tensor ints = Tensor::from_vector<int64_t>({1}).to(d);
    EXPECT_THROW(g.all_reduce(ints, distributed::ReduceOp::Avg), Error);
  });
}

TEST(CudaDistributed, LargeAllReduceMatchesTheSumBitwiseOnBothRanks) {
  MINIDL_REQUIRE_TWO_GPUS();
  MINIDL_FRESH_SEED();
  const Tensor x0 = randn({1 << 20}), x1 = randn({1 << 20});
  std::vector<std::vector<float>> results(2);
  on_two_ranks([&](ProcessGroup& g) {
    Tensor mine = (g.rank() == 0 ? x0 : x1).to(g.device());
    g.all_reduce(mine);
    results[g.rank()] = mine.to(Device::cpu()).to_vector<float>();
  });
  EXPECT_EQ(results[0], results[1]);
  const auto a = x0.to_vector<float>(), b = x1.to_vector<float>();
  for (size_t i = 0; i < a.size(); i += 997) EXPECT_EQ(results[0][i], a[i] + b[i]) << i;  // two terms: exact
}

// Each rank trains on its half of every batch; DDP must leave both with the full batch's gradient
// (the mean loss over the batch), the same bits on both, and the same parameters after each step.
void check_ddp_against_one_process(bool graphed, double bucket_mb) {
  MINIDL_FRESH_SEED();
  const int64_t batch = 16, steps = 4;
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < steps; ++s) {
    xs.push_back(randn({batch, 12}));
    ys.push_back(argmax(randn({batch, 3}), 1));  // classes 0..2
  }
  manual_seed(minidl_seed_ + 1);
  auto reference = std::make_shared<Net>();
  const nn::StateDict start = reference->state_dict();

  // One process, the whole batch, on cuda:0.
  std::vector<std::vector<std::vector<float>>> ref_grads, ref_params;
  {
    cuda::set_device(0);
    reference->to(Device::cuda(0));
    optim::SGD opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      nn::functional::cross_entropy(reference->forward(xs[s].to(Device::cuda(0))), ys[s].to(Device::cuda(0))).backward();
      std::vector<Tensor> grads;
      for (Tensor& p : reference->parameters()) grads.push_back(p.grad());
      ref_grads.push_back(values_of(grads));
      opt.step();
      ref_params.push_back(values_of(reference->parameters()));
    }
  }

  std::vector<std::vector<std::vector<std::vector<float>>>> grads(2), params(2);
  on_two_ranks([&](ProcessGroup& g) {
    const Device d = g.device();
    manual_seed(static_cast<uint64_t>(1000 + g.rank()));  // different inits: DDP must broadcast rank 0's
    auto model = std::make_shared<Net>();
    if (g.rank() == 0) model->load_state_dict(start);
    model->to(d);
    auto ddp = std::make_shared<DistributedDataParallel>(model, g,
                                                        DistributedDataParallelOptions().bucket_cap_mb(bucket_mb));
    if (bucket_mb < 0.001) {
      EXPECT_EQ(ddp->buckets().size(), 4u);  // one parameter per bucket
    }
    optim::SGD opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    cuda::GraphedStep step(ddp, opt, nn::functional::cross_entropy, cuda::GraphedStepOptions().enabled(graphed));
    for (int s = 0; s < steps; ++s) {
      const int64_t half = batch / 2, from = g.rank() * half;
      step(xs[s].slice(0, from, from + half).contiguous().to(d), ys[s].slice(0, from, from + half).contiguous().to(d));
      std::vector<Tensor> gr;
      for (Tensor& p : model->parameters()) gr.push_back(p.grad());
      grads[g.rank()].push_back(values_of(gr));
      params[g.rank()].push_back(values_of(model->parameters()));
    }
    if (graphed) {
      EXPECT_GT(step.replays(), 0);
    }
  });
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_EQ(params[0][s], params[1][s]);  // bitwise: the replicas never drift apart
    EXPECT_EQ(grads[0][s], grads[1][s]);
    for (size_t k = 0; k < ref_grads[s].size(); ++k)
      for (size_t i = 0; i < ref_grads[s][k].size(); ++i) {
        EXPECT_NEAR(grads[0][s][k][i], ref_grads[s][k][i], 1e-5 + 1e-4 * std::abs(ref_grads[s][k][i]));
        EXPECT_NEAR(params[0][s][k][i], ref_params[s][k][i], 1e-5 + 1e-4 * std::abs(ref_params[s][k][i]));
      }
  }
}

TEST(CudaDistributed, DdpAveragesGradientsLikeOneProcessWithTheWholeBatch) {
  MINIDL_REQUIRE_TWO_GPUS();
  check_ddp_against_one_process(false, 25);
}

TEST(CudaDistributed, DdpWithOneBucketPerParameter) {
  MINIDL_REQUIRE_TWO_GPUS();
  check_ddp_against_one_process(false, 1e-6);
}

TEST(CudaDistributed, DdpInsideAGraphedStep) {
  MINIDL_REQUIRE_TWO_GPUS();
  check_ddp_against_one_process(true, 1e-6);
}

// Two micro-batches, the first under no_sync: the ranks' gradients differ after it (nothing was
// sent), and after the second they are the average of both ranks' sums, which is one process's
// gradient accumulated over the two whole micro-batches.
TEST(CudaDistributed, NoSyncAccumulatesLocallyAndTheNextBackwardAverages) {
  MINIDL_REQUIRE_TWO_GPUS();
  MINIDL_FRESH_SEED();
  const int64_t batch = 8;
  std::vector<Tensor> xs = {randn({batch, 12}), randn({batch, 12})};
  std::vector<Tensor> ys = {argmax(randn({batch, 3}), 1), argmax(randn({batch, 3}), 1)};
  manual_seed(minidl_seed_ + 1);
  auto reference = std::make_shared<Net>();
  const nn::StateDict start = reference->state_dict();
  cuda::set_device(0);
  reference->to(Device::cuda(0));
  for (int m = 0; m < 2; ++m)
    nn::functional::cross_entropy(reference->forward(xs[m].to(Device::cuda(0))), ys[m].to(Device::cuda(0))).backward();
  std::vector<Tensor> ref;
  for (Tensor& p : reference->parameters()) ref.push_back(p.grad());
  const auto expected = values_of(ref);

  std::vector<std::vector<std::vector<float>>> local(2), averaged(2);
  on_two_ranks([&](ProcessGroup& g) {
    const Device d = g.device();
    const int64_t half = batch / 2, from = g.rank() * half;
    std::vector<Tensor> x, y;
    for (int m = 0; m < 2; ++m) {
      x.push_back(xs[m].slice(0, from, from + half).contiguous().to(d));
      y.push_back(ys[m].slice(0, from, from + half).contiguous().to(d));
    }
    auto model = std::make_shared<Net>();
    if (g.rank() == 0) model->load_state_dict(start);
    model->to(d);
    DistributedDataParallel ddp(model, g, DistributedDataParallelOptions().bucket_cap_mb(1e-6));
    auto micro_step = [&](int m) { nn::functional::cross_entropy(ddp.forward(x[m]), y[m]).backward(); };
    auto grads = [&] {
      std::vector<Tensor> gr;
      for (Tensor& p : model->parameters()) gr.push_back(p.grad());
      return values_of(gr);
    };
    {
      auto no_sync = ddp.no_sync();
      micro_step(0);
    }
    local[g.rank()] = grads();
    micro_step(1);
    averaged[g.rank()] = grads();
  });
  EXPECT_NE(local[0], local[1]);
  EXPECT_EQ(averaged[0], averaged[1]);
  for (size_t k = 0; k < expected.size(); ++k)
    for (size_t i = 0; i < expected[k].size(); ++i)
      EXPECT_NEAR(averaged[0][k][i], expected[k][i], 1e-5 + 1e-4 * std::abs(expected[k][i])) << k << " " << i;
}

TEST(CudaDistributed, DdpNamesAParameterThatGotNoGradient) {
  MINIDL_REQUIRE_TWO_GPUS();
  on_two_ranks([](ProcessGroup& g) {
    auto model = std::make_shared<Net>();
    model->to(g.device());
    DistributedDataParallel ddp(model, g, DistributedDataParallelOptions().bucket_cap_mb(1e-6));
    Tensor x = randn({4, 12}).to(g.device());
    // fc2 is skipped: its parameters get no gradient, so their buckets never complete.
    relu(model->fc1(x)).sum().backward();
    try {
      ddp.forward(x);
      ADD_FAILURE() << "an unused parameter went unnoticed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'fc2.weight'"), std::string::npos) << e.what();
    }
    g.join();
  });
}

TEST(CudaDistributed, ModelOnAnotherDeviceIsAClearError) {
  MINIDL_REQUIRE_TWO_GPUS();
  on_two_ranks([](ProcessGroup& g) {
    auto model = std::make_shared<Net>();  // left on the CPU
    try {
      DistributedDataParallel ddp(model, g);
      ADD_FAILURE() << "DDP accepted a model on the CPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("move the model there first"), std::string::npos) << e.what();
    }
  });
}

TEST(CudaDistributed, DefaultBucketsStartCommunicationBeforeBackwardEnds) {
  MINIDL_REQUIRE_TWO_GPUS();
  on_two_ranks([](ProcessGroup& g) {
    auto model = std::make_shared<Net>();
    model->to(g.device());
    // 1,036 bytes of gradients: buckets of at most a quarter, in the order backward produces them.
    DistributedDataParallel ddp(model, g);
    const std::vector<std::vector<std::string>> expected{
        {"fc2.bias", "fc2.weight"}, {"fc1.bias"}, {"fc1.weight"}};
    EXPECT_EQ(ddp.buckets(), expected);
    EXPECT_EQ(DistributedDataParallel(model, g, DistributedDataParallelOptions().bucket_cap_mb(25)).buckets().size(), 1u);
  });
}

}  // namespace minidl::cuda_distributed_test
