// bfloat16 and float16: the conversions bit by bit (ties to even, subnormals, overflow, NaN and
// infinity), checked against hand-computed patterns and against Eigen's own conversions over many
// values; and the dtypes wherever a dtype goes: promotion, to(), item(), printing, comparisons,
// safetensors, DLPack, state_dict. The kernels in 16 bits are tested op by op elsewhere.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "core/dlpack.h"
#include "core/safetensors.h"
#include "minidl.h"
#include "test_file_util.h"
#include "test_util.h"

namespace minidl::half_dtypes_test {

using namespace minidl::testing;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
uint16_t bf16(float f) { return BFloat16(f).bits; }
uint16_t f16(float f) { return Half(f).bits; }

}  // namespace

TEST(BFloat16Conversion, HandComputedBitPatterns) {
  EXPECT_EQ(bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16(0.0f), 0x0000);
  EXPECT_EQ(bf16(-0.0f), 0x8000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even neighbour, 1.
  EXPECT_EQ(bf16(from_bits(0x3f808000)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even one.
  EXPECT_EQ(bf16(from_bits(0x3f818000)), 0x3f82);
  // Just above and below the halfway point round to the nearer neighbour.
  EXPECT_EQ(bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(bf16(from_bits(0x3f807fff)), 0x3f80);
  // The largest finite bfloat16 is 0x7f7f; halfway above it rounds to infinity.
  EXPECT_EQ(bf16(from_bits(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(bf16(from_bits(0x7f7f8000)), 0x7f80);
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16(INFINITY), 0x7f80);
  EXPECT_EQ(bf16(-INFINITY), 0xff80);
  // NaN stays NaN (quiet), even one whose payload sits only in the dropped bits.
  EXPECT_EQ(bf16(from_bits(0x7f800001)) & 0x7fc0, 0x7fc0);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
  // float32 subnormals keep their top bits: bfloat16 shares float32's exponent.
  EXPECT_EQ(bf16(from_bits(0x00010000)), 0x0001);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x3eab)), 0.333984375f);
}

TEST(Float16Conversion, HandComputedBitPatterns) {
  EXPECT_EQ(f16(1.0f), 0x3c00);
  EXPECT_EQ(f16(-2.0f), 0xc000);
  EXPECT_EQ(f16(-0.0f), 0x8000);
  EXPECT_EQ(f16(65504.0f), 0x7bff);  // the largest finite float16
  EXPECT_EQ(f16(65519.996f), 0x7bff);
  EXPECT_EQ(f16(65520.0f), 0x7c00);  // halfway to 2^16: ties to even, which is infinity
  EXPECT_EQ(f16(1e6f), 0x7c00);
  EXPECT_EQ(f16(-1e6f), 0xfc00);
  EXPECT_EQ(f16(INFINITY), 0x7c00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even, 1. 1 + 3 * 2^-11: up to 1 + 2^-9.
  EXPECT_EQ(f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie between 0 and it, and goes to 0 (even);
  // 3 * 2^-26 is above the tie and goes to 2^-24; 2^-14 - 2^-24 is the largest subnormal.
  EXPECT_EQ(f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f16(3 * std::ldexp(1.0f, -26)), 0x0001);
  EXPECT_EQ(f16(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 units: a tie, to even (2)
  EXPECT_EQ(f16(5 * std::ldexp(1.0f, -25)), 0x0002);  // 2.5 units: a tie, to even (2)
  EXPECT_EQ(f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -24)), 0x03ff);
  EXPECT_EQ(f16(std::ldexp(1.0f, -14)), 0x0400);
  // The largest subnormal plus half a unit rounds up into the smallest normal.
  EXPECT_EQ(f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);
  EXPECT_EQ(f16(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(f16(1e-10f), 0x0000);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(NAN))));
  EXPECT_EQ(f16(NAN) & 0x7e00, 0x7e00);
  // Back to float: exact for every pattern.
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x03ff)), std::ldexp(1023.0f, -24));
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half::from_bits(0xfc00)), -INFINITY);
}

// Eigen's bfloat16 and half convert with the same rules (round to nearest even): every 16-bit
// pattern must go to float and back unchanged, and random floats of every magnitude must round
// to the same bits.
TEST(HalfConversion, AgreesWithEigenOnEveryPatternAndOnRandomFloats) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float fb = BFloat16::from_bits(h), fh = Half::from_bits(h);
    const float eb = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(h));
    const float eh = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h));
    if (std::isnan(eb)) {
      EXPECT_TRUE(std::isnan(fb)) << std::hex << b;
    } else {
      ASSERT_EQ(bits_of(fb), bits_of(eb)) << std::hex << b;
      ASSERT_EQ(bf16(fb), h) << std::hex << b;
    }
    if (std::isnan(eh)) {
      EXPECT_TRUE(std::isnan(fh)) << std::hex << b;
    } else {
      ASSERT_EQ(bits_of(fh), bits_of(eh)) << std::hex << b;
      ASSERT_EQ(f16(fh), h) << std::hex << b;
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = from_bits(any_bits(rng));
    if (std::isnan(f)) continue;
    ASSERT_EQ(bf16(f), Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f))) << f;
    ASSERT_EQ(f16(f), Eigen::numext::bit_cast<uint16_t>(Eigen::half(f))) << f;
  }
}

TEST(HalfDtypes, PromoteAsPyTorch) {
  EXPECT_EQ(promote_types(kBFloat16, kFloat16), kFloat32);
  EXPECT_EQ(promote_types(kBFloat16, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat16, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kInt64, kBFloat16), kBFloat16);
  EXPECT_EQ(promote_types(kUInt8, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kBool, kBFloat16), kBFloat16);
  Tensor b = ones({2}, kBFloat16), h = ones({2}, kFloat16);
  EXPECT_EQ(result_type(b, 2.5), kBFloat16);  // a Python float does not lift a 16-bit tensor
  EXPECT_EQ(result_type({b, ones({}, kFloat32)}), kBFloat16);  // nor does a 0-d float32 tensor
  EXPECT_EQ(result_type({b, ones({2}, kFloat32)}), kFloat32);
  EXPECT_EQ(result_type({b, h}), kFloat32);
  EXPECT_EQ(element_size(kBFloat16), 2u);
  EXPECT_TRUE(is_floating(kFloat16));
  EXPECT_EQ(std::string(dtype_name(kBFloat16)), "bfloat16");
  EXPECT_EQ(kHalf, kFloat16);
}

TEST(HalfDtypes, ConvertRoundTripAndItem) {
  Tensor x = Tensor::from_vector<float>({1.0f, 0.1f, -3.5f, 70000.0f, 1e-8f, NAN}, {2, 3});
  Tensor b = x.to(kBFloat16), h = x.to(kFloat16);
  EXPECT_EQ(b.dtype(), kBFloat16);
  EXPECT_EQ(b.nbytes(), 12);
  const std::vector<BFloat16> bv = b.to_vector<BFloat16>();
  const std::vector<Half> hv = h.to_vector<Half>();
  for (size_t i = 0; i < bv.size(); ++i) {
    const float f = x.to_vector<float>()[i];
    EXPECT_EQ(bv[i].bits, bf16(f)) << i;
    EXPECT_EQ(hv[i].bits, f16(f)) << i;
  }
  EXPECT_EQ(h.to(kFloat32).to_vector<float>()[3], INFINITY) << "70000 overflows float16";
  EXPECT_DOUBLE_EQ(b.index({0, 1}).item().toDouble(), static_cast<float>(BFloat16(0.1f)));
  EXPECT_TRUE(b.index({0, 1}).item().isFloatingPoint());
  // Through float64 and the integers, as a cast does (truncation toward zero).
  EXPECT_EQ(b.index({0, 2}).to(kInt64).item().toLong(), -3);  // one finite element: NaN has no integer
  EXPECT_EQ(Tensor::from_vector<int64_t>({3, -7}).to(kFloat16).to(kFloat64).to_vector<double>(),
            (std::vector<double>{3, -7}));
  // Comparisons and factories.
  EXPECT_EQ(full({3}, 2.5, kBFloat16).to(kFloat32).to_vector<float>(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_TRUE(equal(zeros({4}, kFloat16).to(kFloat32), zeros({4})));
}

TEST(HalfDtypes, PrintLikeFloat32) {
  std::ostringstream os;
  os << Tensor::from_vector<float>({0.5f, 1.25f}).to(kBFloat16);
  EXPECT_EQ(os.str(), "tensor([0.5000, 1.2500], shape=[2], dtype=bfloat16)");
}

class HalfFiles : public TempFolderTest {};

TEST_F(HalfFiles, SafetensorsWriteBf16AndF16AndReadThemBack) {
  Tensor b = randn({3, 5}).to(kBFloat16), h = randn({4}).to(kFloat16);
  safetensors::save(path("h.safetensors"), {{"b", b}, {"h", h}});
  const std::string bytes = read_bytes(path("h.safetensors"));
  EXPECT_NE(bytes.find("\"BF16\""), std::string::npos);
  EXPECT_NE(bytes.find("\"F16\""), std::string::npos);
  auto loaded = safetensors::load(path("h.safetensors"));
  ASSERT_EQ(loaded.tensors.at("b").dtype(), kBFloat16);
  ASSERT_EQ(loaded.tensors.at("h").dtype(), kFloat16);
  EXPECT_TRUE(equal(loaded.tensors.at("b").to(kFloat32), b.to(kFloat32)));
  EXPECT_TRUE(equal(loaded.tensors.at("h").to(kFloat32), h.to(kFloat32)));
}

TEST_F(HalfFiles, StateDictOfABf16ModuleRoundTrips) {
  nn::Linear a(4, 3), c(4, 3);
  a->to(kBFloat16);
  c->to(kBFloat16);
  EXPECT_EQ(a->weight.dtype(), kBFloat16);
  save(a, path("m.safetensors"));
  load(c, path("m.safetensors"));
  EXPECT_TRUE(equal(a->weight.to(kFloat32), c->weight.to(kFloat32)));
  EXPECT_EQ(c->weight.dtype(), kBFloat16);
}

TEST(HalfDlpack, ExportsAndImportsBothTypes) {
  for (DType d : {kBFloat16, kFloat16}) {
    Tensor t = randn({2, 3}).to(d);
    DLManagedTensor* m = to_dlpack(t);
    EXPECT_EQ(m->dl_tensor.dtype.bits, 16);
    EXPECT_EQ(m->dl_tensor.dtype.code, d == kBFloat16 ? kDLBfloat : kDLFloat);
    Tensor back = from_dlpack(m);
    EXPECT_EQ(back.dtype(), d);
    EXPECT_EQ(back.raw_data(), t.raw_data());
  }
}

}  // namespace minidl::half_dtypes_test
