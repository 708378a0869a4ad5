// DLPack exchange on CUDA: the device fields, zero-copy both ways, the deleter's one call after the
// last tensor, and the stream ordering that minidl's non-blocking compute stream makes necessary.
// The CPU tests (test_dlpack.cpp) cover layouts and errors in detail.
#include <vector>

#include "dlpack_producer.h"
#include "test_cuda_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace minidl::cuda_dlpack_test {

using namespace minidl::testing;

TEST(CudaDLPack, RoundTripSharesDeviceMemory) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = arange(24, kFloat32, gpu()).view({4, 6});
  DLManagedTensor* m = to_dlpack(x);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  EXPECT_EQ(m->dl_tensor.data, x.raw_data());
  Tensor y = from_dlpack(m);
  EXPECT_EQ(y.device(), gpu());
  EXPECT_EQ(y.raw_data(), x.raw_data());
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());

  Tensor v = x.slice(1, 1, 6, 2);
  DLManagedTensorVersioned* mv = to_dlpack_versioned(v);
  EXPECT_EQ(mv->dl_tensor.data, static_cast<float*>(x.raw_data()) + 1);
  EXPECT_EQ(Strides(mv->dl_tensor.strides, mv->dl_tensor.strides + 2), (Strides{6, 2}));
  Tensor v_back = from_dlpack(mv);
  EXPECT_EQ(v_back.sum().item<float>(), 144.0f);
  Tensor t_back = from_dlpack(to_dlpack(x.t()));
  EXPECT_EQ(t_back.to_vector<float>(), x.t().to_vector<float>());
}

TEST(CudaDLPack, ExportKeepsDeviceStorageUntilTheConsumerDeletes) {
  MINIDL_REQUIRE_CUDA();
  const size_t before = memory_stats(gpu()).bytes_in_use;
  Tensor x = full({1 << 16}, 1.5, kFloat32, gpu());
  const size_t with_x = memory_stats(gpu()).bytes_in_use;
  DLManagedTensor* m = to_dlpack(x);
  x = Tensor();
  EXPECT_EQ(memory_stats(gpu()).bytes_in_use, with_x);
  Tensor seen = from_dlpack(m);  // the consumer is minidl itself here: its tensor reads the kept block
  EXPECT_EQ(seen.sum().item<float>(), 1.5f * (1 << 16));
  seen = Tensor();
  EXPECT_EQ(memory_stats(gpu()).bytes_in_use, before);
}

TEST(CudaDLPack, ProducerDeleterRunsOnceAfterTheLastTensor) {
  MINIDL_REQUIRE_CUDA();
  FakeProducer producer;
  Tensor memory = arange(8, kFloat64, gpu());
  Tensor y = from_dlpack(producer.lend(memory, {{2, 4}, std::nullopt, 0, {kDLFloat, 64, 1}, {kDLCUDA, 0}}));
  EXPECT_EQ(y.device(), gpu());
  EXPECT_EQ(y.raw_data(), memory.raw_data());
  Tensor view = y.slice(1, 2, 4);
  y = Tensor();
  EXPECT_EQ(producer.deleted(), 0);
  EXPECT_EQ(view.sum().item<double>(), 2 + 3 + 6 + 7);
  view = Tensor();
  EXPECT_EQ(producer.deleted(), 1);
}

TEST(CudaDLPack, RefusesDevicesItCannotUse) {
  MINIDL_REQUIRE_CUDA();
  FakeProducer producer;
  Tensor memory = zeros({4}, kFloat32, gpu());
  const int count = cuda::device_count();
  for (DLDevice device : {DLDevice{kDLCUDA, count}, DLDevice{kDLCUDAManaged, 0}}) {
    DLManagedTensor* m = producer.lend(memory, {{4}, std::nullopt, 0, {kDLFloat, 32, 1}, device});
    const std::string message = error_of([&] { from_dlpack(m); });
    EXPECT_TRUE(message.find("minidl sees " + std::to_string(count) + " CUDA device(s)") != std::string::npos ||
                message.find("got one on kDLCUDAManaged (id 0)") != std::string::npos)
        << message;
    m->deleter(m);
  }
  EXPECT_EQ(producer.deleted(), 2);
}

#ifdef MINIDL_WITH_CUDA

namespace {

// Enough queued work that a reader not ordered after it sees old values: 20 passes over 128 MiB.
constexpr int64_t kElements = int64_t{1} << 25;
constexpr int kPasses = 20;
void queue_passes(Tensor& t) {
  for (int i = 0; i < kPasses; ++i) t += 1.0;
}

}  // namespace

TEST(CudaDLPack, StreamIntegersFollowThePythonProtocol) {
  MINIDL_REQUIRE_CUDA();
  const int64_t s = dlpack_stream(gpu());
  EXPECT_GT(s, 2) << "a stream of its own, neither the legacy (1) nor the per-thread (2) default stream";
  EXPECT_EQ(dlpack_stream(gpu()), s);
  for (int64_t stream : {int64_t{-1}, int64_t{1}, int64_t{2}, s}) dlpack_make_stream_wait(gpu(), stream);
  expect_error([] { dlpack_make_stream_wait(Device::cuda(), 0); }, {"got 0", "0 is ambiguous in DLPack"});
  cuda::synchronize();
}

TEST(CudaDLPack, ConsumerStreamWaitsForMinidlsWork) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = zeros({kElements}, kFloat32, gpu());
  cuda::synchronize();
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  queue_passes(x);
  DLManagedTensor* m = to_dlpack(x);
  dlpack_make_stream_wait(x.device(), static_cast<int64_t>(reinterpret_cast<intptr_t>(consumer)));
  float last = -1;
  ASSERT_EQ(cudaMemcpyAsync(&last, static_cast<float*>(m->dl_tensor.data) + kElements - 1, sizeof(float),
                            cudaMemcpyDeviceToHost, consumer),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(last, static_cast<float>(kPasses));
  m->deleter(m);
  cudaStreamDestroy(consumer);
}

TEST(CudaDLPack, MemoryGoesBackOnlyAfterQueuedKernelsFinish) {
  MINIDL_REQUIRE_CUDA();
  // A producer that reads its memory on the legacy default stream the moment it gets it back; that
  // stream is not ordered after minidl's, so only the wait in the release makes the read see 20.
  struct Lent {
    DLManagedTensor managed{};
    Tensor memory;
    float last = -1;
    int deleted = 0;
  } lent;
  lent.memory = zeros({kElements}, kFloat32, gpu());
  cuda::synchronize();
  static Shape shape{kElements};
  lent.managed.dl_tensor = {lent.memory.raw_data(), {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape.data(), nullptr, 0};
  lent.managed.manager_ctx = &lent;
  lent.managed.deleter = [](DLManagedTensor* self) {
    auto* l = static_cast<Lent*>(self->manager_ctx);
    cudaMemcpy(&l->last, static_cast<float*>(l->memory.raw_data()) + kElements - 1, sizeof(float),
               cudaMemcpyDeviceToHost);
    ++l->deleted;
  };
  {
    Tensor y = from_dlpack(&lent.managed);
    queue_passes(y);
  }
  EXPECT_EQ(lent.deleted, 1);
  EXPECT_EQ(lent.last, static_cast<float>(kPasses));
}

#endif  // MINIDL_WITH_CUDA

}  // namespace minidl::cuda_dlpack_test
