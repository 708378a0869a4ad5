// bfloat16 and float16 on the device: the conversions of the copy kernel give the host's bits for
// every 16-bit pattern and for random floats of every magnitude (the device rounds with the
// hardware's instructions, the host with core/half.h's code), and the dtypes cross DLPack and
// safetensors from the device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/dlpack.h"
#include "test_cuda_util.h"

namespace minidl::cuda_half_dtypes_test {

using namespace minidl::testing;

TEST(CudaHalfDtypes, DeviceConversionsGiveTheHostBits) {
  MINIDL_REQUIRE_CUDA();
  std::vector<float> values;
  for (uint32_t b = 0; b < 0x10000; b += 3) values.push_back(static_cast<float>(Half::from_bits(uint16_t(b))));
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 100000; ++i) {
    uint32_t u = any_bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    values.push_back(f);
  }
  Tensor host = Tensor::from_vector<float>(values);
  Tensor device = host.to(Device::cuda());
  for (DType d : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    Tensor on_host = host.to(d), on_device = device.to(d).cpu();
    const auto* a = static_cast<const uint16_t*>(on_host.raw_data());
    const auto* b = static_cast<const uint16_t*>(on_device.raw_data());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < host.numel(); ++i) {
      const bool nan = std::isnan(values[size_t(i)]);
      // NaN payloads may differ; both must be NaN.
      if (nan ? ((b[i] & 0x7fff) <= (d == kBFloat16 ? 0x7f80 : 0x7c00)) : a[i] != b[i]) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0);
    // And back: the device widens each pattern to the host's float.
    const std::vector<float> widened_on_device = on_host.cuda().to(kFloat32).cpu().to_vector<float>();
    const std::vector<float> widened_on_host = on_host.to(kFloat32).to_vector<float>();
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(widened_on_host[i])) EXPECT_TRUE(std::isnan(widened_on_device[i])) << i;
      else ASSERT_EQ(widened_on_device[i], widened_on_host[i]) << i;
    }
  }
}

TEST(CudaHalfDtypes, ConvertsBetweenEveryDtypeOnTheDevice) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = Tensor::from_vector<float>({1.5f, -2.25f, 0.0f, 100.0f});
  for (DType d : {kBFloat16, kFloat16}) {
    for (DType other : {kFloat32, kFloat64, kInt64, kInt32, kInt8, kUInt8, kBool, kBFloat16, kFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " <-> " + dtype_name(other));
      Tensor cpu = x.to(d).to(other).to(kFloat64);
      Tensor gpu = x.cuda().to(d).to(other).to(kFloat64).cpu();
      EXPECT_TRUE(equal(cpu, gpu)) << cpu << gpu;
    }
  }
}

// The contiguous conversion moves 8 elements a thread where both sides are aligned for it and
// finishes the tail on its own: every start (aligned or not) and length around a pack gives the
// host's result.
TEST(CudaHalfDtypes, ConvertsAnyStartAndLengthOnTheDevice) {
  MINIDL_REQUIRE_CUDA();
  Tensor host = randn({64}, kFloat32) * 1000.0;
  Tensor device = host.cuda();
  for (DType d : {kBFloat16, kFloat16}) {
    for (int64_t start : {0, 1, 3, 8}) {
      for (int64_t length : {0, 1, 7, 8, 9, 16, 23, 33}) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " start " + std::to_string(start) + " length " +
                     std::to_string(length));
        const Tensor expected = narrow(host, 0, start, length).to(d);
        EXPECT_TRUE(equal(narrow(device, 0, start, length).to(d).cpu(), expected));
        // And back: a 16-bit view from the same start widened on the device.
        EXPECT_TRUE(equal(narrow(device.to(d), 0, start, length).to(kFloat32).cpu(), expected.to(kFloat32)));
      }
    }
  }
}

TEST(CudaHalfDtypes, DlpackExportsDeviceBf16) {
  MINIDL_REQUIRE_CUDA();
  Tensor t = randn({4}, kFloat32, Device::cuda()).to(kBFloat16);
  DLManagedTensor* m = to_dlpack(t);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLBfloat);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  Tensor back = from_dlpack(m);
  EXPECT_EQ(back.dtype(), kBFloat16);
  EXPECT_TRUE(equal(back.cpu().to(kFloat32), t.cpu().to(kFloat32)));
}

}  // namespace minidl::cuda_half_dtypes_test
