// CUDA graphs: cuda::Graph (capture, replay, private memory, random draws) and cuda::GraphedStep
// against the eager step it replaces. GPU tests skip, saying why, where no CUDA device is usable.
#include <algorithm>

#include "nn/nn.h"
#include "optim/optim.h"
#include "test_cuda_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/graph_memsets.h"
#endif

namespace minidl::cuda_graph_test {

using namespace minidl::testing;

namespace {

// Linear -> ReLU -> Dropout -> Linear: GEMMs, an elementwise op and random draws in one step.
struct Net : nn::Module {
  Net() : fc1(12, 16), drop(0.3), fc2(16, 4) {
    register_module("fc1", fc1);
    register_module("drop", drop);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(drop(relu(fc1(x)))); }
  nn::Linear fc1;
  nn::Dropout drop;
  nn::Linear fc2;
};

struct Batch {
  Tensor x, y;
};

std::vector<Batch> batches(int count, int64_t rows) {
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int64_t> labels;
    for (double u : rand({rows}, kFloat64).to_vector<double>()) labels.push_back(static_cast<int64_t>(u * 4));
    out.push_back({randn({rows, 12}).to(gpu()), Tensor::from_vector(labels).to(gpu())});
  }
  return out;
}

Tensor criterion(const Tensor& out, const Tensor& y) { return cross_entropy(out, y); }

// Trains a fresh seeded Net on `data` with SGD + momentum; lr_at(step) sets the learning rate
// before each step. Returns the parameters and the losses.
struct Trained {
  std::vector<Tensor> params;
  std::vector<float> losses;
};

Trained train(const std::vector<Batch>& data, bool graphed, uint64_t seed,
          const std::function<double(int)>& lr_at = [](int) { return 0.05; },
          const std::function<void(cuda::GraphedStep&)>& check = nullptr, int accumulation = 1) {
  manual_seed(seed);
  auto net = std::make_shared<Net>();
  net->to(gpu());
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  cuda::GraphedStep step(net, opt, criterion,
                         cuda::GraphedStepOptions().enabled(graphed).warmup(2).accumulation_steps(accumulation));
  Trained run;
  for (size_t i = 0; i < data.size(); ++i) {
    opt.param_groups()[0].lr = lr_at(static_cast<int>(i));
    run.losses.push_back(step(data[i].x, data[i].y).item<float>());
  }
  if (check) check(step);
  for (const Tensor& p : net->parameters()) run.params.push_back(p.detach().clone());
  return run;
}

void expect_same_training(const Trained& graphed, const Trained& eager) {
  ASSERT_EQ(graphed.params.size(), eager.params.size());
  for (size_t i = 0; i < graphed.params.size(); ++i)
    EXPECT_TRUE(all_close(graphed.params[i], eager.params[i], 1e-5, 1e-4)) << "parameter " << i;
  ASSERT_EQ(graphed.losses.size(), eager.losses.size());
  for (size_t i = 0; i < graphed.losses.size(); ++i) EXPECT_NEAR(graphed.losses[i], eager.losses[i], 1e-4) << "step " << i;
}

}  // namespace

TEST(CudaGraph, ReplayRerunsTheWorkOnNewInputs) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor x = randn({100}).to(gpu());
  Tensor y;
  cuda::Graph graph;
  graph.capture_begin();
  y = exp(x) * 2.0 + 1.0;
  graph.capture_end();
  EXPECT_GT(graph.num_nodes(), 0u);
  for (int i = 0; i < 3; ++i) {
    Tensor fresh = randn({100}).to(gpu());
    copy_(x, fresh);
    graph.replay();
    EXPECT_TRUE(all_close(y, exp(fresh) * 2.0 + 1.0, 1e-6, 1e-6)) << "replay " << i;
  }
}

// Positions and triangular masks are made inside a step (nanoGPT's arange of positions, a causal
// tril): made on the device, they capture, and each replay gives the eager values.
TEST(CudaGraph, ArangeAndTrilAreCaptured) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor x = randn({5, 7}).to(gpu());
  Tensor positions, lower, upper, steps;
  cuda::Graph graph;
  graph.capture_begin();
  positions = arange(7, kInt64, gpu());
  steps = arange(1.5, -2.0, -0.5, kFloat32, gpu());
  lower = tril(x, 1);
  upper = triu(x, -1);
  graph.capture_end();
  for (int i = 0; i < 2; ++i) {
    Tensor fresh = randn({5, 7}).to(gpu());
    copy_(x, fresh);
    graph.replay();
    EXPECT_TRUE(all_equal(positions.cpu(), arange(7, kInt64))) << "replay " << i;
    EXPECT_TRUE(all_equal(steps.cpu(), Tensor::from_vector<float>({1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -1.5f})));
    EXPECT_TRUE(all_equal(lower.cpu(), tril(fresh.cpu(), 1))) << "replay " << i;
    EXPECT_TRUE(all_equal(upper.cpu(), triu(fresh.cpu(), -1))) << "replay " << i;
  }
}

// A copy captured into the graph reads, on each replay, the source set last: 16-byte aligned or
// not, 1001 floats (whole 16-byte vectors and a tail). The work after it sees the copied values.
TEST(CudaGraph, CapturedCopyReadsTheSourceSetBeforeTheReplay) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor first = randn({1001}).to(gpu()), dst = Tensor::empty({1001}, kFloat32, gpu());
  Tensor doubled;
  cuda::Graph graph;
  graph.capture_begin();
  const int copy = graph.capture_copy(first, dst);
  doubled = dst * 2.0;
  graph.capture_end();
  graph.set_copy_source(copy, first);
  graph.replay();
  EXPECT_TRUE(all_equal(doubled, first * 2.0));
  Tensor storage = randn({1002}).to(gpu());
  Tensor moved = narrow(storage, 0, 1, 1001);  // 4 bytes past a 16-byte boundary
  graph.set_copy_source(copy, moved);
  graph.replay();
  EXPECT_TRUE(all_equal(dst, moved));
  EXPECT_TRUE(all_equal(doubled, moved * 2.0));
  EXPECT_THROW(graph.set_copy_source(copy, randn({1000}).to(gpu())), Error);
  EXPECT_THROW(graph.set_copy_source(copy, narrow(randn({1001, 2}).to(gpu()), 1, 0, 1)), Error);  // strided
  EXPECT_THROW(graph.set_copy_source(copy + 1, first), Error);
}

// Scalars the graph writes itself store, at each replay, the values set before it: float32, float64
// and bfloat16 rounded as a fill rounds them, 20 of them (two kernels), and the work after the
// writes reads them. Each queued replay stores the values it was launched with.
TEST(CudaGraph, ScalarWritesStoreTheValuesSetBeforeEachReplay) {
  MINIDL_REQUIRE_CUDA();
  Tensor a = zeros({}, kFloat32, gpu()), b = zeros({}, kFloat64, gpu()), c = zeros({}, kBFloat16, gpu());
  std::vector<Tensor> many;
  std::vector<Tensor*> scalars{&a, &b, &c};
  for (int i = 0; i < 17; ++i) many.push_back(zeros({}, kFloat32, gpu()));
  for (Tensor& t : many) scalars.push_back(&t);
  auto values_with = [](double first) {
    std::vector<double> v{first, first * 2, first * 3};
    for (int i = 0; i < 17; ++i) v.push_back(first + i);
    return v;
  };
  Tensor total = zeros({}, kFloat32, gpu());
  cuda::Graph graph;
  graph.capture_begin();
  const int writes = graph.capture_scalar_writes(scalars, values_with(1.5));
  total.add_(a);
  graph.capture_end();
  EXPECT_EQ(a.item<float>(), 0.0f);  // captured, not yet run
  graph.replay();
  EXPECT_EQ(a.item<float>(), 1.5f);
  EXPECT_EQ(b.item<double>(), 3.0);
  EXPECT_EQ(c.to(kFloat32).item<float>(), 4.5f);
  EXPECT_EQ(many[16].item<float>(), 17.5f);
  graph.set_scalar_values(writes, values_with(0.1));
  graph.replay();
  EXPECT_EQ(a.item<float>(), 0.1f);
  EXPECT_EQ(b.item<double>(), 0.2);
  EXPECT_EQ(c.to(kFloat32).item<float>(), static_cast<float>(BFloat16(0.1 * 3)));
  for (int i = 0; i < 17; ++i) EXPECT_EQ(many[i].item<float>(), static_cast<float>(0.1 + i)) << "scalar " << i + 3;
  fill_(a, 9.0);
  graph.replay();  // the values set last, again
  EXPECT_EQ(a.item<float>(), 0.1f);
  fill_(total, 0.0);
  for (double v : {1.0, 2.0, 4.0}) {  // queued without a sync between them
    graph.set_scalar_values(writes, values_with(v));
    graph.replay();
  }
  EXPECT_EQ(total.item<float>(), 7.0f);
  testing::expect_error([&] { graph.set_scalar_values(writes, {1.0}); }, {"expected 20 values", "got 1"});
  cuda::Graph other;
  Tensor count = zeros({}, kInt64, gpu());
  other.capture_begin();
  testing::expect_error([&] { other.capture_scalar_writes({&count}, {1.0}); }, {"floating", "int64"});
  other.capture_abort();
}

// set_copy_source holds from then on: a source set once is read by every later replay, its contents
// read afresh each time.
TEST(CudaGraph, CopySourceHoldsForEveryLaterReplay) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor a = randn({64}).to(gpu()), b = randn({64}).to(gpu()), dst = Tensor::empty({64}, kFloat32, gpu());
  Tensor plus_one;
  cuda::Graph graph;
  graph.capture_begin();
  const int copy = graph.capture_copy(a, dst);
  plus_one = dst + 1.0;
  graph.capture_end();
  for (Tensor* source : {&b, &a, &b}) {
    graph.set_copy_source(copy, *source);
    for (int replay = 0; replay < 3; ++replay) {
      copy_(*source, randn({64}).to(gpu()));  // new contents in the same place
      graph.replay();
      EXPECT_TRUE(all_equal(plus_one, *source + 1.0)) << "replay " << replay;
    }
  }
}

// Two copies of different sizes and dtypes in one graph with random draws: each copy reads its own
// source at each replay, and the draws still follow eager's.
TEST(CudaGraph, CopiesOfTwoSizesAndRandomDrawsInOneReplay) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(7);
  std::vector<Tensor> eager;
  for (int i = 0; i < 2; ++i) eager.push_back(rand({100}, kFloat32, gpu()));
  Tensor values = Tensor::empty({5000}, kFloat32, gpu()), index = Tensor::empty({3}, kInt64, gpu());
  Tensor first_values = randn({5000}).to(gpu()), first_index = zeros({3}, kInt64, gpu());
  Tensor doubled, shifted, drawn;
  cuda::Graph graph;
  graph.capture_begin();
  const int copy_values = graph.capture_copy(first_values, values);
  const int copy_index = graph.capture_copy(first_index, index);
  doubled = values * 2.0;
  shifted = index + 1;
  drawn = rand({100}, kFloat32, gpu());
  graph.capture_end();
  const Tensor sources[2] = {randn({5000}).to(gpu()), randn({5000}).to(gpu())};
  manual_seed(7);  // the draws above were not the graph's
  for (int replay = 0; replay < 2; ++replay) {
    const Tensor& v = sources[replay];
    Tensor i = Tensor::from_vector(std::vector<int64_t>{replay, 10 * replay, -replay}).to(gpu());
    graph.set_copy_source(copy_values, v);
    graph.set_copy_source(copy_index, i);
    graph.replay();
    EXPECT_TRUE(all_equal(doubled, v * 2.0)) << "replay " << replay;
    EXPECT_TRUE(all_equal(shifted, i + 1)) << "replay " << replay;
    EXPECT_TRUE(all_equal(drawn, eager[static_cast<size_t>(replay)])) << "replay " << replay;
  }
}

// The host may queue replays far ahead of the GPU (here behind large products): each replay still
// copies from the source set for it. Each replay shifts a history down a row and puts what it
// copied on top, so a source read twice, skipped or out of order shows.
TEST(CudaGraph, EachQueuedReplayCopiesItsOwnSource) {
  MINIDL_REQUIRE_CUDA();
  constexpr int kReplays = 600, kWidth = 256;
  std::vector<Tensor> sources;
  for (int k = 0; k < kReplays; ++k) sources.push_back(full({kWidth}, k + 1, kFloat32, gpu()));
  Tensor dst = Tensor::empty({kWidth}, kFloat32, gpu()), history = zeros({kReplays, kWidth}, kFloat32, gpu());
  cuda::Graph graph;
  graph.capture_begin();
  const int copy = graph.capture_copy(sources[0], dst);
  Tensor older = narrow(history, 0, 0, kReplays - 1).clone(), below = narrow(history, 0, 1, kReplays - 1),
         top = narrow(history, 0, 0, 1);
  copy_(below, older);
  copy_(top, dst.view({1, kWidth}));
  graph.capture_end();
  Tensor big = randn({4096, 4096}).to(gpu());
  Tensor busy = matmul(matmul(big, big), big);  // keeps the GPU behind while the host queues replays
  for (int k = 0; k < kReplays; ++k) {
    graph.set_copy_source(copy, sources[static_cast<size_t>(k)]);
    graph.replay();
  }
  std::vector<float> expected;  // row j: what replay kReplays - 1 - j copied
  for (int j = 0; j < kReplays; ++j) expected.insert(expected.end(), kWidth, static_cast<float>(kReplays - j));
  EXPECT_TRUE(all_equal(history.cpu(), Tensor::from_vector(expected, {kReplays, kWidth})));
}

// The copy's source lives on the device and moves on by itself as the last move predicts, so the
// host writes it only when a replay wants another one. Two copies (one of several blocks, one of
// 64 bytes) follow patterns that break that prediction in every way: consecutive slices forwards
// and backwards, one slice again and again, jumps, strides, two slices in turn. Replays are queued
// far ahead of the GPU; each puts what it copied on top of a history, checked whole at the end.
TEST(CudaGraph, QueuedReplaysReadTheirSourcesInAnyPattern) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  constexpr int64_t kWide = 1283, kNarrow = 16, kCount = 64;  // 5,132 bytes: two blocks, and a tail
  std::vector<int64_t> starts = {0};
  auto extend = [&](int steps, int64_t by) {
    for (int i = 0; i < steps; ++i) starts.push_back(starts.back() + by);
  };
  extend(20, 1);   // consecutive slices
  extend(10, 0);   // the same slice
  extend(15, -1);  // backwards
  extend(10, 3);   // a stride
  for (int i = 0; i < 10; ++i) starts.push_back(i % 2 ? 40 : 7);  // two slices in turn
  for (int i = 0; i < 15; ++i) starts.push_back(static_cast<int64_t>(randint(0, kCount, {1}).item<int64_t>()));
  extend(5, 1);
  const int64_t replays = static_cast<int64_t>(starts.size());
  for (int64_t& s : starts) s = std::clamp<int64_t>(s, 0, kCount - 1);
  // Slice k of each buffer holds the numbers k * width onwards; the narrow copy walks its slices
  // in the opposite order.
  Tensor wide = arange(kCount * kWide, kFloat32, gpu()), narrow_buffer = arange(kCount * kNarrow, kFloat32, gpu());
  auto slice = [](const Tensor& buffer, int64_t k, int64_t width) { return narrow(buffer, 0, k * width, width); };
  Tensor wide_dst = Tensor::empty({kWide}, kFloat32, gpu()), narrow_dst = Tensor::empty({kNarrow}, kFloat32, gpu());
  Tensor history = zeros({replays, kWide + kNarrow}, kFloat32, gpu());
  cuda::Graph graph;
  graph.capture_begin();
  const int copy_wide = graph.capture_copy(slice(wide, 0, kWide), wide_dst);
  const int copy_narrow = graph.capture_copy(slice(narrow_buffer, 0, kNarrow), narrow_dst);
  Tensor older = narrow(history, 0, 0, replays - 1).clone(), below = narrow(history, 0, 1, replays - 1),
         top = narrow(history, 0, 0, 1);
  copy_(below, older);
  copy_(top, cat({wide_dst, narrow_dst}).view({1, kWide + kNarrow}));
  graph.capture_end();
  Tensor big = randn({4096, 4096}).to(gpu());
  Tensor busy = matmul(matmul(big, big), big);  // keeps the GPU behind while the host queues replays
  std::vector<float> expected;  // row j: what replay replays - 1 - j copied
  for (int64_t r = replays - 1; r >= 0; --r) {
    const int64_t w = starts[static_cast<size_t>(r)], n = kCount - 1 - w;
    for (int64_t i = 0; i < kWide; ++i) expected.push_back(static_cast<float>(w * kWide + i));
    for (int64_t i = 0; i < kNarrow; ++i) expected.push_back(static_cast<float>(n * kNarrow + i));
  }
  for (int64_t r = 0; r < replays; ++r) {
    const int64_t w = starts[static_cast<size_t>(r)];
    graph.set_copy_source(copy_wide, slice(wide, w, kWide));
    graph.set_copy_source(copy_narrow, slice(narrow_buffer, kCount - 1 - w, kNarrow));
    graph.replay();
  }
  EXPECT_TRUE(all_equal(history.cpu(), Tensor::from_vector(expected, {replays, kWide + kNarrow})));
}

TEST(CudaGraph, RandomDrawsAdvanceOnEveryReplayAsEagerWould) {
  MINIDL_REQUIRE_CUDA();
  // Eager: three draws in a row from seed 5.
  manual_seed(5);
  std::vector<Tensor> eager;
  for (int i = 0; i < 3; ++i) eager.push_back(rand({1000}, kFloat32, gpu()));
  // Graphed: the same draw captured once, replayed three times from seed 5.
  manual_seed(5);
  Tensor r;
  cuda::Graph graph;
  graph.capture_begin();
  r = rand({1000}, kFloat32, gpu());
  graph.capture_end();
  for (int i = 0; i < 3; ++i) {
    graph.replay();
    EXPECT_TRUE(all_equal(r, eager[i])) << "replay " << i;
  }
  EXPECT_FALSE(all_equal(eager[0], eager[1]));
}

// Replays move the graph's Philox offset on by themselves; a draw outside the graph or a new seed
// between two replays must still reach the next replay.
TEST(CudaGraph, RandomDrawsBetweenReplaysAndReseedingReachTheNextReplay) {
  MINIDL_REQUIRE_CUDA();
  // What each round draws, in order: 0 replay, 1 replay, 2 eager draw then replay, 3 replay,
  // 4 reseed then replay, 5 replay.
  auto run = [](bool graphed) {
    manual_seed(11);
    std::vector<Tensor> drawn;
    Tensor r;
    cuda::Graph graph;
    if (graphed) {
      graph.capture_begin();
      r = rand({999}, kFloat32, gpu());  // 999: the reservation rounds up to whole Philox steps
      graph.capture_end();
    }
    for (int round = 0; round < 6; ++round) {
      if (round == 2) drawn.push_back(rand({7}, kFloat32, gpu()));
      if (round == 4) manual_seed(12);
      if (graphed) {
        graph.replay();
        drawn.push_back(r.clone());
      } else {
        drawn.push_back(rand({999}, kFloat32, gpu()));
      }
    }
    return drawn;
  };
  const std::vector<Tensor> eager = run(false), graphed = run(true);
  ASSERT_EQ(graphed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(all_equal(graphed[i], eager[i])) << "draw " << i;
  EXPECT_FALSE(all_equal(eager[1], eager[3]));
}

TEST(CudaGraph, ReplaysAllocateNothingAndThePoolIsReturned) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor w = randn({64, 64}).to(gpu());
  Tensor out;
  const size_t before = memory_stats(gpu()).bytes_in_use;
  {
    cuda::Graph graph;
    graph.capture_begin();
    out = relu(matmul(w, w)).sum();
    graph.capture_end();
    graph.replay();
    cuda::synchronize();
    const MemoryStats captured = memory_stats(gpu());
    for (int i = 0; i < 10; ++i) graph.replay();
    cuda::synchronize();
    EXPECT_EQ(memory_stats(gpu()).system_allocs, captured.system_allocs);
    EXPECT_EQ(memory_stats(gpu()).bytes_in_use, captured.bytes_in_use);
    EXPECT_NEAR(out.item<float>(), relu(matmul(w, w)).sum().item<float>(), 1e-2);
  }
  out = Tensor();  // the graph's last live block, now back in the general cache
  EXPECT_EQ(memory_stats(gpu()).bytes_in_use, before);
}

#ifdef MINIDL_WITH_CUDA
// Memset nodes (a library's cudaMemsetAsync captured in a step) become kernel nodes that write the
// same bytes: elements of 1, 2 and 4 bytes, starts off 16-byte boundaries, ragged ends, a span
// inside one 16-byte vector, 2-D memsets whose rows leave gaps; in the order of the graph's edges
// (the first memset covers everything, and a copy after the last reads the result).
TEST(CudaGraph, MemsetNodesBecomeKernelsThatWriteTheSameBytes) {
  MINIDL_REQUIRE_CUDA();
  constexpr size_t kBytes = 4096;
  Tensor buffer = zeros({int64_t(kBytes)}, kUInt8, gpu()), copy = zeros({int64_t(kBytes)}, kUInt8, gpu());
  unsigned char* base = static_cast<unsigned char*>(buffer.raw_data());
  struct Set {
    size_t offset;
    unsigned element_size, value;
    size_t width, height, pitch;
  };
  const std::vector<Set> sets = {{0, 1, 0xCD, kBytes, 1, 0},         {3, 1, 0x5A, 517, 1, 0},
                                 {34, 2, 0xBEEF, 300, 1, 0},         {1028, 4, 0x12345678, 201, 1, 0},
                                 {2051, 1, 0x77, 5, 1, 0},           {2200, 1, 0x0F, 40, 7, 64},
                                 {3000, 4, 0x89ABCDEF, 10, 3, 100},  {3601, 1, 0x00, 300, 1, 0}};
  std::vector<unsigned char> expected(kBytes, 0);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaGraphNode_t previous = nullptr;
  for (const Set& s : sets) {
    cudaMemsetParams p{};
    p.dst = base + s.offset;
    p.elementSize = s.element_size;
    p.value = s.value;
    p.width = s.width;
    p.height = s.height;
    p.pitch = s.pitch;
    cudaGraphNode_t node = nullptr;
    ASSERT_EQ(cudaGraphAddMemsetNode(&node, graph, previous ? &previous : nullptr, previous ? 1 : 0, &p), cudaSuccess);
    previous = node;
    for (size_t r = 0; r < s.height; ++r)
      for (size_t e = 0; e < s.width; ++e)
        for (unsigned b = 0; b < s.element_size; ++b)
          expected[s.offset + r * s.pitch + e * s.element_size + b] = static_cast<unsigned char>(s.value >> (8 * b));
  }
  cudaGraphNode_t copy_node = nullptr;
  ASSERT_EQ(cudaGraphAddMemcpyNode1D(&copy_node, graph, &previous, 1, copy.raw_data(), base, kBytes,
                                     cudaMemcpyDeviceToDevice),
            cudaSuccess);

  EXPECT_EQ(cuda::memset_nodes_to_kernels(graph), static_cast<int>(sets.size()));
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  EXPECT_EQ(count, sets.size() + 1);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    ASSERT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
    EXPECT_NE(type, cudaGraphNodeTypeMemset);
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    buffer.fill_(17);
    copy.fill_(29);
    cuda::synchronize();
    ASSERT_EQ(cudaGraphLaunch(exec, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(buffer.to_vector<uint8_t>(), expected) << "replay " << replay;
    EXPECT_EQ(copy.to_vector<uint8_t>(), expected) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}
#endif

TEST(CudaGraph, SynchronizingInsideTheCaptureIsAClearError) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = ones({4}, kFloat32, gpu());
  cuda::Graph graph;
  graph.capture_begin();
  EXPECT_THROW((x * 2.0).sum().item<float>(), Error);
  graph.capture_abort();
  EXPECT_FALSE(graph.captured());
  EXPECT_FLOAT_EQ((x * 2.0).sum().item<float>(), 8.0f);  // the device works on afterwards
}

TEST(CudaGraphedStep, SameParametersAsTheEagerStepDropoutIncluded) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  auto data = batches(8, 32);
  Trained eager = train(data, false, 7);
  Trained graphed = train(data, true, 7, [](int) { return 0.05; }, [](cuda::GraphedStep& s) {
    EXPECT_TRUE(s.graphed());
    EXPECT_EQ(s.eager_steps(), 2);  // the warm-up
    EXPECT_EQ(s.replays(), 6);
  });
  expect_same_training(graphed, eager);
  Trained other_seed = train(data, true, 8);
  EXPECT_FALSE(all_close(other_seed.params[0], graphed.params[0], 1e-5, 1e-4));  // the comparison can fail
}

// Inputs that are views: contiguous ones at an offset into a larger tensor (the graph's copy reads
// them where they are), strided ones (gathered into the static buffer first).
TEST(CudaGraphedStep, InputViewsGiveTheEagerResult) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  auto data = batches(6, 32);
  for (size_t i = 0; i < data.size(); ++i) {
    Tensor wide = cat({data[i].x, randn({32, 12}).to(gpu())}, 1);  // [32, 24]
    Tensor labels = cat({Tensor::from_vector<int64_t>({3}).to(gpu()), data[i].y}, 0);
    data[i].x = i % 2 ? narrow(wide, 1, 0, 12) : narrow(cat({data[i].x, data[i].x}, 0), 0, 32, 32);
    data[i].y = narrow(labels, 0, 1, 32);
  }
  ASSERT_FALSE(data[1].x.is_contiguous());
  ASSERT_TRUE(data[2].x.is_contiguous() && data[2].x.offset() > 0 && data[2].y.offset() == 1);
  Trained eager = train(data, false, 4);
  Trained graphed = train(data, true, 4, [](int) { return 0.05; },
                          [](cuda::GraphedStep& s) { EXPECT_EQ(s.replays(), 4); });
  expect_same_training(graphed, eager);
}

TEST(CudaGraphedStep, ShapeChangeFallsBackToTheEagerStep) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  auto data = batches(6, 32);
  auto partial = batches(1, 5);
  data.insert(data.begin() + 4, partial[0]);  // a short batch between replays
  data.push_back(partial[0]);
  Trained eager = train(data, false, 3);
  Trained graphed = train(data, true, 3, [](int) { return 0.05; }, [](cuda::GraphedStep& s) {
    EXPECT_EQ(s.eager_steps(), 4);  // two warm-up steps and the two short batches
    EXPECT_EQ(s.replays(), 4);
  });
  expect_same_training(graphed, eager);
}

TEST(CudaGraphedStep, GradientAccumulationMatchesTheEagerStep) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Three micro-batches a step: a graph that zeroes and accumulates, one that accumulates, one that
  // accumulates and steps; a short batch lands mid-cycle and runs eagerly into the same buffers.
  auto data = batches(15, 16);
  auto partial = batches(1, 3);
  data[10] = partial[0];
  const auto lr = [](int) { return 0.05; };
  Trained eager = train(data, false, 9, lr, nullptr, 3);
  Trained graphed = train(data, true, 9, lr, [](cuda::GraphedStep& s) {
    EXPECT_TRUE(s.graphed());
    EXPECT_EQ(s.replays() + s.eager_steps(), 15);
    EXPECT_EQ(s.eager_steps(), 4);  // the warm-up cycle (3) and the short batch
  }, 3);
  expect_same_training(graphed, eager);
}

// A rate that changes at every step (as a schedule changes it) is written by the graph itself: one
// node more than a graph of constant rates. A rate that changed only after the warm-up (StepLR) is
// written before the replay, and the graph has no write. Both train as the eager steps do.
TEST(CudaGraphedStep, FollowsLearningRateChanges) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  auto data = batches(8, 16);
  size_t constant_nodes = 0, scheduled_nodes = 0, stepped_nodes = 0;
  train(data, true, 4, [](int) { return 0.05; }, [&](cuda::GraphedStep& s) { constant_nodes = s.graph_nodes(); });
  auto schedule = [](int step) { return 0.1 / (1 + step); };
  expect_same_training(
      train(data, true, 4, schedule, [&](cuda::GraphedStep& s) { scheduled_nodes = s.graph_nodes(); }),
      train(data, false, 4, schedule));
  EXPECT_EQ(scheduled_nodes, constant_nodes + 1);
  auto step_lr = [](int step) { return step < 5 ? 0.1 : 0.02; };
  expect_same_training(train(data, true, 4, step_lr, [&](cuda::GraphedStep& s) { stepped_nodes = s.graph_nodes(); }),
                       train(data, false, 4, step_lr));
  EXPECT_EQ(stepped_nodes, constant_nodes);
  // The comparison can fail: the step-wise rate trains to other parameters than the constant one.
  const Trained stepped = train(data, true, 4, step_lr), constant = train(data, true, 4, [](int) { return 0.1; });
  EXPECT_FALSE(all_close(stepped.params[0], constant.params[0], 1e-5, 1e-4));
}

// A step with no inputs draws its own batch on the device: the graph's replays draw what eager
// steps would, and a draw between two steps (an evaluation's batch) reaches the next replay.
TEST(CudaGraphedStep, StepThatDrawsItsOwnBatchMatchesTheEagerStep) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Tensor targets = Tensor::from_vector<int64_t>({0, 1, 2, 3, 3, 2, 1, 0}).to(gpu());
  auto run = [&](bool graphed, uint64_t seed) {
    manual_seed(seed);
    auto net = std::make_shared<Net>();
    net->to(gpu());
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    cuda::GraphedStep step(
        [&](const std::vector<Tensor>& in) {
          EXPECT_TRUE(in.empty());
          Tensor rows = randint(8, {16}, TensorOptions().device(gpu()));
          return criterion(net->forward(randn({16, 12}, kFloat32, gpu())), index_select(targets, 0, rows));
        },
        opt, cuda::GraphedStepOptions().enabled(graphed).warmup(2));
    Trained out;
    for (int i = 0; i < 7; ++i) {
      if (i == 4) randn({5}, kFloat32, gpu());  // another draw between steps
      out.losses.push_back(step().item<float>());
    }
    EXPECT_EQ(step.replays(), graphed ? 5 : 0);
    for (const Tensor& p : net->parameters()) out.params.push_back(p.detach().clone());
    return out;
  };
  const Trained graphed = run(true, 21);
  expect_same_training(graphed, run(false, 21));
  EXPECT_NE(graphed.losses[5], graphed.losses[6]);  // fresh batches, so the comparison can fail
  EXPECT_FALSE(all_close(run(true, 22).params[0], graphed.params[0], 1e-5, 1e-4));
}

TEST(CudaGraphedStep, UncapturableStepRunsEagerlyAndSaysWhy) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  auto data = batches(5, 16);
  manual_seed(1);
  auto net = std::make_shared<Net>();
  net->to(gpu());
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05));
  float seen = 0;
  cuda::GraphedStep step(
      [&](const std::vector<Tensor>& in) {
        Tensor loss = cross_entropy(net->forward(in[0]), in[1]);
        seen = loss.item<float>();  // a host read: cannot be captured
        return loss;
      },
      opt, cuda::GraphedStepOptions().warmup(1));
  for (const Batch& b : data) {
    const float loss = step(b.x, b.y).item<float>();
    EXPECT_FLOAT_EQ(loss, seen);
  }
  EXPECT_FALSE(step.graphed());
  EXPECT_EQ(step.eager_steps(), 5);
  EXPECT_NE(step.eager_reason().find("could not be captured"), std::string::npos) << step.eager_reason();
}

// Adam keeps its step counts on the device: its step is captured too (tests/test_cuda_adam_graph.cpp
// compares it with the eager one).
TEST(CudaGraphedStep, AdamIsCaptured) {
  MINIDL_REQUIRE_CUDA();
  auto net = std::make_shared<Net>();
  net->to(gpu());
  optim::Adam opt(net->parameters());
  cuda::GraphedStep step(net, opt, criterion);
  for (const Batch& b : batches(5, 8)) step(b.x, b.y);
  EXPECT_TRUE(step.graphed()) << step.eager_reason();
  EXPECT_EQ(step.replays(), 2);
}

}  // namespace minidl::cuda_graph_test
