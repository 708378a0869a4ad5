// The parts of distributed training that need no GPU: the rendezvous (ranks as threads of this
// process), the launcher's environment, DistributedSampler and the DataLoader with a sampler, the
// post-accumulate-grad hooks DistributedDataParallel is built on, and the errors of a build or
// machine without NCCL.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda.h"
#include "data/data.h"
#include "distributed/distributed.h"
#include "minidl.h"
#include "test_port_util.h"

namespace minidl::distributed_test {

using namespace minidl::distributed;
using namespace std::chrono_literals;
using minidl::testing::free_port;

namespace {

// Runs rank r's rendezvous on thread r; each result is the blob or the error's text.
std::vector<std::string> meet(const Rendezvous& where, std::vector<int> ranks, std::vector<int> world_sizes,
                              std::chrono::milliseconds timeout) {
  std::vector<std::future<std::string>> runs;
  for (size_t i = 0; i < ranks.size(); ++i)
    runs.push_back(std::async(std::launch::async, [&, i] {
      try {
        return "ok:" + rendezvous(where, ranks[i], world_sizes[i], ranks[i] == 0 ? "blob-of-rank-0" : "", timeout);
      } catch (const Error& e) {
        return std::string("error:") + e.what();
      }
    }));
  std::vector<std::string> out;
  for (auto& r : runs) out.push_back(r.get());
  return out;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()))).string();
}

}  // namespace

TEST(Rendezvous, TcpGivesEveryRankRank0sBlob) {
  const auto out = meet(Rendezvous::tcp("127.0.0.1", free_port()), {2, 0, 1, 3}, {4, 4, 4, 4}, 20s);
  for (const auto& o : out) EXPECT_EQ(o, "ok:blob-of-rank-0");
}

TEST(Rendezvous, TcpByHostNameAndRank0StartingLast) {
  const Rendezvous where = Rendezvous::tcp("localhost", free_port());
  std::future<std::string> early = std::async(std::launch::async, [&] { return rendezvous(where, 1, 2, "", 20s); });
  std::this_thread::sleep_for(300ms);  // rank 1 retries until rank 0 listens
  EXPECT_EQ(rendezvous(where, 0, 2, "id", 20s), "id");
  EXPECT_EQ(early.get(), "id");
}

TEST(Rendezvous, TcpNamesTheRankThatNeverCame) {
  const auto out = meet(Rendezvous::tcp("127.0.0.1", free_port()), {0, 1}, {3, 3}, 1500ms);
  EXPECT_NE(out[0].find("error:"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("rank(s) 2 of 3 did not arrive"), std::string::npos) << out[0];
  EXPECT_NE(out[1].find("error:"), std::string::npos) << out[1];  // told by rank 0, or timed out itself
}

TEST(Rendezvous, TcpRankWithoutRank0TimesOutClearly) {
  const auto out = meet(Rendezvous::tcp("127.0.0.1", free_port()), {1}, {2}, 700ms);
  EXPECT_NE(out[0].find("could not reach rank 0"), std::string::npos) << out[0];
}

TEST(Rendezvous, TcpWorldSizeMismatchIsAnErrorOnBothSides) {
  const auto out = meet(Rendezvous::tcp("127.0.0.1", free_port()), {0, 1}, {2, 3}, 10s);
  for (const auto& o : out) {
    EXPECT_NE(o.find("error:"), std::string::npos) << o;
    EXPECT_NE(o.find("WORLD_SIZE 3, rank 0 with 2"), std::string::npos) << o;
  }
}

TEST(Rendezvous, TcpTwoProcessesClaimingOneRank) {
  const auto out = meet(Rendezvous::tcp("127.0.0.1", free_port()), {0, 1, 1}, {3, 3, 3}, 10s);
  EXPECT_NE(out[0].find("two processes claim rank 1"), std::string::npos) << out[0];
}

TEST(Rendezvous, FileGivesEveryRankRank0sBlobAndCleansUp) {
  const std::string path = temp_path("minidl_rdv_ok");
  const auto out = meet(Rendezvous::file(path), {1, 2, 0}, {3, 3, 3}, 20s);
  for (const auto& o : out) EXPECT_EQ(o, "ok:blob-of-rank-0");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".1"));
}

TEST(Rendezvous, FileNamesTheRankThatNeverCame) {
  const std::string path = temp_path("minidl_rdv_missing");
  const auto out = meet(Rendezvous::file(path), {0, 2}, {3, 3}, 1000ms);
  EXPECT_NE(out[0].find("rank(s) 1 of 3 did not arrive"), std::string::npos) << out[0];
  EXPECT_EQ(out[1], "ok:blob-of-rank-0");
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".2");
}

TEST(Rendezvous, FileWorldSizeMismatch) {
  const std::string path = temp_path("minidl_rdv_world");
  const auto out = meet(Rendezvous::file(path), {0, 1}, {2, 4}, 1000ms);
  EXPECT_NE(out[1].find("WORLD_SIZE 4, rank 0 with 2"), std::string::npos) << out[1];
  EXPECT_NE(out[0].find("error:"), std::string::npos) << out[0];
}

TEST(Rendezvous, BadArgumentsAndEnvironment) {
  EXPECT_THROW(Rendezvous::tcp("", 1), Error);
  EXPECT_THROW(Rendezvous::tcp("h", 70000), Error);
  EXPECT_THROW(rendezvous(Rendezvous::file("x"), 2, 2, "", 1s), Error);
  EXPECT_EQ(rendezvous(Rendezvous::file("unused"), 0, 1, "alone", 1s), "alone");  // one rank: nothing to meet

  ::unsetenv("MINIDL_INIT_FILE");
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::unsetenv("MASTER_PORT");
  try {
    Rendezvous::from_env();
    ADD_FAILURE() << "MASTER_ADDR without MASTER_PORT was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT is not"), std::string::npos) << e.what();
  }
  ::setenv("MASTER_PORT", "29500", 1);
  EXPECT_EQ(Rendezvous::from_env().describe(), "tcp://10.1.2.3:29500");
  ::setenv("MASTER_PORT", "port", 1);
  EXPECT_THROW(Rendezvous::from_env(), Error);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  EXPECT_THROW(Rendezvous::from_env(), Error);
  ::setenv("MINIDL_INIT_FILE", "/shared/job.rdv", 1);
  EXPECT_EQ(Rendezvous::from_env().describe(), "file:///shared/job.rdv");
  ::unsetenv("MINIDL_INIT_FILE");
}

TEST(LaunchEnv, ReadsTheLaunchersVariablesAndRejectsBadOnes) {
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  ::unsetenv("LOCAL_RANK");
  LaunchEnv alone = LaunchEnv::read();
  EXPECT_EQ(alone.world_size, 1);
  EXPECT_EQ(alone.rank, 0);
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "3", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  LaunchEnv env = LaunchEnv::read();
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  ::setenv("RANK", "4", 1);
  EXPECT_THROW(LaunchEnv::read(), Error);
  ::setenv("RANK", "-1", 1);
  EXPECT_THROW(LaunchEnv::read(), Error);
  ::setenv("RANK", "1x", 1);
  EXPECT_THROW(LaunchEnv::read(), Error);
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  ::unsetenv("LOCAL_RANK");
}

TEST(ProcessGroup, WithoutAGpuOrNcclItSaysSo) {
  if (nccl_available() && cuda::is_available()) GTEST_SKIP() << "this machine has NCCL and a GPU";
  try {
    ProcessGroup group(0, 1, Rendezvous::tcp("127.0.0.1", 1), cuda::is_available() ? Device::cuda() : Device::cpu());
    ADD_FAILURE() << "a process group was made without NCCL or a GPU";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_TRUE(text.find("NCCL") != std::string::npos || text.find("CUDA") != std::string::npos) << text;
  }
  EXPECT_FALSE(is_initialized());
  EXPECT_EQ(distributed::rank(), 0);
  EXPECT_EQ(distributed::world_size(), 1);
  EXPECT_THROW(group(), Error);
}

TEST(DistributedSampler, ShardsOneEpochLikePyTorch) {
  // torch.utils.data.DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False):
  // [0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1] (padded from the start); drop_last: [0, 3, 6], [1, 4, 7], [2, 5, 8].
  const std::vector<std::vector<int64_t>> padded{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  const std::vector<std::vector<int64_t>> dropped{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(data::DistributedSampler(10, 3, r, false).indices(0), padded[r]);
    EXPECT_EQ(data::DistributedSampler(10, 3, r, false, 0, true).indices(0), dropped[r]);
  }
  EXPECT_EQ(data::DistributedSampler(2, 4, 3, false).indices(0), std::vector<int64_t>{1});  // 4 ranks, 2 examples
  EXPECT_EQ(data::DistributedSampler(2, 5, 4, false).indices(0), std::vector<int64_t>{0});
  EXPECT_THROW(data::DistributedSampler(10, 3, 3), Error);
  EXPECT_THROW(data::DistributedSampler(10, 0, 0), Error);
}

TEST(DistributedSampler, RanksShareOneShuffleThatChangesByEpoch) {
  const int64_t n = 1001;
  const int world = 4;
  for (int64_t epoch : {0, 1}) {
    std::vector<int64_t> all;
    for (int r = 0; r < world; ++r) {
      auto mine = data::DistributedSampler(n, world, r, true, 7).indices(epoch);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), 251);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::set<int64_t> distinct(all.begin(), all.end());
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), n);  // every example once, plus 3 padded repeats
    EXPECT_EQ(*distinct.begin(), 0);
    EXPECT_EQ(*distinct.rbegin(), n - 1);
  }
  // The same order a single process gets from shuffled_indices, interleaved.
  const auto order = data::shuffled_indices(n, 7, 1);
  const auto rank1 = data::DistributedSampler(n, world, 1, true, 7).indices(1);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(rank1[i], order[1 + 4 * i]);
  EXPECT_NE(data::DistributedSampler(n, world, 0, true, 7).indices(0),
            data::DistributedSampler(n, world, 0, true, 7).indices(1));
  EXPECT_NE(data::DistributedSampler(n, world, 0, true, 7).indices(0),
            data::DistributedSampler(n, world, 0, true, 8).indices(0));
}

TEST(DistributedSampler, DrivesTheDataLoader) {
  const int64_t n = 10;
  Tensor x = arange(0, n, 1, kFloat32).reshape({n, 1});
  Tensor y = arange(0, n, 1, kInt64);
  data::TensorDataset set(x, y);
  auto sampler = std::make_shared<data::DistributedSampler>(n, 3, 1, false);
  data::DataLoader loader(set, data::DataLoaderOptions(3).sampler(sampler));
  EXPECT_EQ(loader.size(), 2);  // 4 examples in batches of 3
  std::vector<int64_t> seen;
  for (auto& batch : loader)
    for (int64_t v : batch.target.to_vector<int64_t>()) seen.push_back(v);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_THROW(data::DataLoader(set, data::DataLoaderOptions(3).sampler(sampler).shuffle(true)), Error);
  auto too_big = std::make_shared<data::DistributedSampler>(n + 5, 1, 0, false);
  data::DataLoader bad(set, data::DataLoaderOptions(3).sampler(too_big));
  EXPECT_THROW(bad.begin(), Error);
}

TEST(PostAccumulateGradHook, RunsOnceWithTheWholeGradient) {
  Tensor w = Tensor::from_vector<double>({1.0, 2.0}).requires_grad_();
  Tensor unused = Tensor::from_vector<double>({5.0}).requires_grad_();
  std::vector<std::vector<double>> seen;
  w.register_post_accumulate_grad_hook([&](Tensor& p) { seen.push_back(p.grad().to_vector<double>()); });
  int unused_calls = 0;
  unused.register_post_accumulate_grad_hook([&](Tensor&) { ++unused_calls; });
  // w feeds the loss along two paths: d/dw (sum(w*w) + sum(3*w)) = 2w + 3.
  Tensor loss = (w * w).sum() + (w * 3.0).sum();
  loss.backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5.0, 7.0}));
  EXPECT_EQ(unused_calls, 0);
  (w * 2.0).sum().backward();  // a second backward: accumulates, and the hook sees the total
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{7.0, 9.0}));
  w.sum().backward();  // also through a single op straight from the leaf
  EXPECT_EQ(seen.size(), 3u);
  Tensor y = w * 2.0;
  EXPECT_THROW(y.register_post_accumulate_grad_hook([](Tensor&) {}), Error);
  Tensor frozen = Tensor::from_vector<double>({1.0});
  EXPECT_THROW(frozen.register_post_accumulate_grad_hook([](Tensor&) {}), Error);
}

}  // namespace minidl::distributed_test
