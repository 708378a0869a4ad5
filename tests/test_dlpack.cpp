// DLPack exchange on the CPU: the fields dlpack.h defines (dtype codes, strides in elements,
// byte_offset, device), zero-copy both ways, the deleter's one call after the last tensor, and the
// errors for what minidl cannot hold. The CUDA twin is test_cuda_dlpack.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/cuda.h"
#include "dlpack_producer.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::dlpack_test {

using namespace minidl::testing;

namespace {

Shape dl_shape(const DLTensor& dl) { return Shape(dl.shape, dl.shape + dl.ndim); }
Strides dl_strides(const DLTensor& dl) { return Strides(dl.strides, dl.strides + dl.ndim); }

}  // namespace

TEST(DLPack, ExportDescribesTheTensorAsDlpackHDefines) {
  struct Case {
    Tensor t;
    uint8_t code, bits;
  };
  const std::vector<Case> cases = {
      {arange(6, kFloat32).view({2, 3}), kDLFloat, 32},
      {arange(6, kFloat64).view({2, 3}), kDLFloat, 64},
      {arange(6, kInt64).view({2, 3}), kDLInt, 64},
      {Tensor::from_vector<bool>({true, false, true, true, false, false}, {2, 3}), kDLBool, 8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.t.dtype()));
    DLManagedTensor* m = to_dlpack(c.t);
    const DLTensor& dl = m->dl_tensor;
    EXPECT_EQ(dl.data, c.t.raw_data());
    EXPECT_EQ(dl.byte_offset, 0u);
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    EXPECT_EQ(dl.device.device_id, 0);
    EXPECT_EQ(dl.dtype.code, c.code);
    EXPECT_EQ(dl.dtype.bits, c.bits);
    EXPECT_EQ(dl.dtype.lanes, 1);
    EXPECT_EQ(dl_shape(dl), (Shape{2, 3}));
    EXPECT_EQ(dl_strides(dl), (Strides{3, 1}));
    m->deleter(m);
  }
}

TEST(DLPack, RoundTripSharesMemoryAndValues) {
  Tensor x = arange(12, kFloat64).view({3, 4});
  Tensor y = from_dlpack(to_dlpack(x));
  EXPECT_EQ(y.raw_data(), x.raw_data());
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.strides(), x.strides());
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_EQ(y.device(), Device::cpu());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>());
  y.zero_();  // a write through one is seen by the other: one buffer
  EXPECT_EQ(x.sum().item<double>(), 0.0);

  Tensor b = Tensor::from_vector<bool>({true, false, true});
  EXPECT_EQ(from_dlpack(to_dlpack_versioned(b)).to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(DLPack, ViewsExportStridesInElementsFromTheirFirstElement) {
  Tensor base = arange(24, kFloat32).view({4, 6});
  Tensor v = base.slice(1, 1, 6, 2);  // columns 1, 3, 5: shape [4, 3], strides [6, 2], offset 1
  DLManagedTensor* m = to_dlpack(v);
  EXPECT_EQ(m->dl_tensor.data, static_cast<float*>(base.raw_data()) + 1);
  EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(dl_shape(m->dl_tensor), (Shape{4, 3}));
  EXPECT_EQ(dl_strides(m->dl_tensor), (Strides{6, 2}));
  Tensor back = from_dlpack(m);
  EXPECT_EQ(back.to_vector<float>(), v.to_vector<float>());
  EXPECT_EQ(back.sum().item<float>(), 144.0f);  // 1+3+5 + 7+9+11 + 13+15+17 + 19+21+23

  Tensor t = base.t();  // column-major: strides [1, 6]
  Tensor t_back = from_dlpack(to_dlpack(t));
  EXPECT_EQ(t_back.strides(), (Strides{1, 6}));
  EXPECT_EQ(t_back.to_vector<float>(), t.to_vector<float>());
}

TEST(DLPack, ImportHonoursByteOffsetStridesAndNullStrides) {
  FakeProducer producer;
  Tensor memory = arange(10, kFloat32);
  // Elements 2..7 as a 3x2 column-major matrix: [[2, 5], [3, 6], [4, 7]].
  Tensor a = from_dlpack(producer.lend(memory, {{3, 2}, Strides{1, 3}, 2 * sizeof(float)}));
  EXPECT_EQ(a.raw_data(), static_cast<float*>(memory.raw_data()) + 2);
  EXPECT_EQ(a.strides(), (Strides{1, 3}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 5, 3, 6, 4, 7}));
  // NULL strides: compact and row-major.
  Tensor b = from_dlpack(producer.lend(memory, {{2, 5}, std::nullopt, 0}));
  EXPECT_EQ(b.strides(), (Strides{5, 1}));
  EXPECT_EQ(b.sum().item<float>(), 45.0f);
  // A zero stride (a broadcast view) and a negative one on a size-1 dimension are fine.
  Tensor c = from_dlpack(producer.lend(memory, {{3, 1, 2}, Strides{0, -7, 1}, 4 * sizeof(float)}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{4, 5, 4, 5, 4, 5}));
  // Pinned host memory is host memory.
  Tensor d = from_dlpack(producer.lend(memory, {{2}, std::nullopt, 0, {kDLFloat, 32, 1}, {kDLCUDAHost, 0}}));
  EXPECT_EQ(d.device(), Device::cpu());
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{0, 1}));
}

TEST(DLPack, ProducerDeleterRunsOnceAfterTheLastTensor) {
  FakeProducer producer;
  Tensor memory = arange(8, kFloat32);
  {
    Tensor y = from_dlpack(producer.lend(memory, {{2, 4}}));
    EXPECT_TRUE(y.impl().storage->is_external());
    EXPECT_FALSE(memory.impl().storage->is_external());
    Tensor view = y.slice(1, 1, 3);
    Tensor handle = y;
    Tensor detached = y.detach();
    y = Tensor();
    handle = Tensor();
    EXPECT_EQ(producer.deleted(), 0) << "a view and a detached tensor still use the memory";
    EXPECT_EQ(view.sum().item<float>(), 1 + 2 + 5 + 6);
    detached = Tensor();
    EXPECT_EQ(producer.deleted(), 0);
    Tensor computed = view * 2.0;  // a new buffer: does not hold the memory
    view = Tensor();
    EXPECT_EQ(producer.deleted(), 1);
    EXPECT_EQ(computed.sum().item<float>(), 28.0f);
  }
  EXPECT_EQ(producer.deleted(), 1);
  // Versioned, and a re-export of an imported tensor: the producer gets it back once both are gone.
  Tensor z = from_dlpack(producer.lend<DLManagedTensorVersioned>(memory, {{8}}));
  DLManagedTensor* again = to_dlpack(z);
  z = Tensor();
  EXPECT_EQ(producer.deleted(), 1);
  EXPECT_EQ(static_cast<float*>(again->dl_tensor.data)[7], 7.0f);
  again->deleter(again);
  EXPECT_EQ(producer.deleted(), 2);
}

TEST(DLPack, ExportKeepsStorageUntilTheConsumerDeletes) {
  const size_t before = memory_stats(Device::cpu()).bytes_in_use;
  Tensor x = full({1000}, 3.5, kFloat64);
  const size_t with_x = memory_stats(Device::cpu()).bytes_in_use;
  ASSERT_GE(with_x, before + 8000);
  DLManagedTensorVersioned* m = to_dlpack_versioned(x);
  EXPECT_EQ(m->version.major, static_cast<uint32_t>(DLPACK_MAJOR_VERSION));
  EXPECT_EQ(m->version.minor, static_cast<uint32_t>(DLPACK_MINOR_VERSION));
  EXPECT_EQ(m->flags, 0u);
  x = Tensor();
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, with_x) << "the consumer still holds the storage";
  const double* data = static_cast<const double*>(m->dl_tensor.data);
  EXPECT_EQ(data[0], 3.5);
  EXPECT_EQ(data[999], 3.5);
  m->deleter(m);
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, before);
}

TEST(DLPack, ScalarsAndEmptyTensors) {
  Tensor s = full({}, 2.5);
  DLManagedTensor* m = to_dlpack(s);
  EXPECT_EQ(m->dl_tensor.ndim, 0);
  Tensor s_back = from_dlpack(m);
  EXPECT_EQ(s_back.dim(), 0);
  EXPECT_EQ(s_back.item<float>(), 2.5f);

  Tensor e = Tensor::empty({0, 3}, kInt64);
  DLManagedTensor* em = to_dlpack(e);
  EXPECT_EQ(em->dl_tensor.data, nullptr) << "dlpack.h: NULL data for a tensor of size zero";
  Tensor e_back = from_dlpack(em);
  EXPECT_EQ(e_back.shape(), (Shape{0, 3}));
  EXPECT_EQ(e_back.numel(), 0);

  FakeProducer producer;
  { Tensor none = from_dlpack(producer.lend(Tensor::empty({0}), {{0}})); }
  EXPECT_EQ(producer.deleted(), 1);
}

TEST(DLPack, AutogradStateDoesNotTravel) {
  Tensor w = randn({3}).requires_grad_();
  Tensor shared = from_dlpack(to_dlpack(w));
  EXPECT_FALSE(shared.requires_grad());
  EXPECT_TRUE(shared.is_leaf());
  EXPECT_EQ(shared.raw_data(), w.raw_data());
}

// Every refusal names what was expected and what was found, and leaves the tensor to its owner.
TEST(DLPack, UnsupportedInputIsRefusedAndLeftToItsOwner) {
  FakeProducer producer;
  Tensor memory = arange(16, kFloat32);
  struct Case {
    Layout layout;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {{{4}, std::nullopt, 0, {kDLInt, 16, 1}},
       {"expected float32, float64, bfloat16, float16, int64, int32, int8, uint8 or bool", "got int16"}},
      {{{4}, std::nullopt, 0, {kDLUInt, 32, 1}}, {"got uint32"}},
      {{{4}, std::nullopt, 0, {kDLComplex, 64, 1}}, {"got complex64"}},
      {{{4}, std::nullopt, 0, {kDLBfloat, 32, 1}}, {"got bfloat32"}},
      {{{4}, std::nullopt, 0, {kDLFloat8_e4m3fn, 8, 1}}, {"got float8_e4m3fn"}},
      {{{4}, std::nullopt, 0, {kDLFloat, 32, 4}}, {"expected one lane per element", "float32 x 4 lanes"}},
      {{{4}, std::nullopt, 0, {kDLFloat, 32, 1}, {kDLROCM, 0}},
       {"expected a tensor on kDLCPU, kDLCUDAHost or kDLCUDA", "kDLROCM (id 0)"}},
      {{{4}, std::nullopt, 0, {kDLFloat, 32, 1}, {kDLCUDA, 99}}, {"kDLCUDA device 99"}},
      {{{2, 3}, Strides{3, -1}, 8}, {"expected non-negative strides", "[3, -1]"}},
      {{{3}, std::nullopt, 2}, {"expected the first element aligned to its 4-byte float32", "byte_offset 2"}},
      {{{-1}}, {"expected non-negative sizes", "[-1]"}},
  };
  for (const Case& c : cases) {
    DLManagedTensor* m = producer.lend(memory, c.layout);
    const int deleted = producer.deleted();
    expect_error([&] { from_dlpack(m); }, c.message);
    EXPECT_EQ(producer.deleted(), deleted) << "a refused tensor stays with its owner";
    m->deleter(m);
  }
  EXPECT_EQ(producer.deleted(), static_cast<int>(cases.size()));

  DLManagedTensor* no_data = producer.lend(memory, {{4}});
  no_data->dl_tensor.data = nullptr;
  expect_error([&] { from_dlpack(no_data); }, {"shape [4] holds elements, but data is a null pointer"});
  no_data->deleter(no_data);

  expect_error([] { from_dlpack(static_cast<DLManagedTensor*>(nullptr)); }, {"expected a DLManagedTensor, got a null"});
  expect_error([] { to_dlpack(Tensor()); }, {"to_dlpack: expected a defined tensor"});
}

TEST(DLPack, VersionedChecksVersionAndReadOnly) {
  FakeProducer producer;
  Tensor memory = arange(4, kFloat32);
  DLManagedTensorVersioned* future = producer.lend<DLManagedTensorVersioned>(memory, {{4}});
  future->version = {DLPACK_MAJOR_VERSION + 1, 0};
  expect_error([&] { from_dlpack(future); }, {"expected DLPack major version 1, got 2.0"});
  future->deleter(future);  // dlpack.h: whoever holds it calls the deleter, whatever the version

  DLManagedTensorVersioned* read_only = producer.lend<DLManagedTensorVersioned>(memory, {{4}});
  read_only->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  expect_error([&] { from_dlpack(read_only); }, {"expected a writable tensor", "read-only"});
  read_only->deleter(read_only);
  EXPECT_EQ(producer.deleted(), 2);

  DLManagedTensorVersioned* copied = producer.lend<DLManagedTensorVersioned>(memory, {{4}});
  copied->flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  copied->version.minor = DLPACK_MINOR_VERSION + 5;  // a newer minor version only adds codes
  EXPECT_EQ(from_dlpack(copied).sum().item<float>(), 6.0f);
  EXPECT_EQ(producer.deleted(), 3);
}

TEST(DLPack, StreamsAreForCudaDevices) {
  dlpack_make_stream_wait(Device::cpu(), 1);  // CPU work is done when it returns: nothing to order
  expect_error([] { dlpack_stream(Device::cpu()); }, {"dlpack_stream: expected a CUDA device, got cpu"});
  if (cuda::is_available()) return;  // test_cuda_dlpack.cpp covers the streams themselves
  expect_error([] { dlpack_stream(Device::cuda()); }, {"dlpack_stream(cuda:0)"});
  expect_error([] { dlpack_make_stream_wait(Device::cuda(), 1); }, {"dlpack_make_stream_wait(cuda:0)"});
}

}  // namespace minidl::dlpack_test
