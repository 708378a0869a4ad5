// The integer dtypes int32, int8 and uint8: promotion as PyTorch's table (expected values in the
// comments are PyTorch 2.x's, except uint8 with int8, which minidl promotes to int32), wrap-around
// arithmetic, conversions, reductions, printing, safetensors and DLPack.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "core/safetensors.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::int_dtypes_test {

using minidl::testing::expect_error;

namespace {

Tensor u8(const std::vector<uint8_t>& v) { return Tensor::from_vector<uint8_t>(v); }
Tensor i8(const std::vector<int8_t>& v) { return Tensor::from_vector<int8_t>(v); }
Tensor i32(const std::vector<int32_t>& v) { return Tensor::from_vector<int32_t>(v); }

TEST(IntDtypes, SizesNamesAndLibtorchAliases) {
  EXPECT_EQ(element_size(kInt32), 4u);
  EXPECT_EQ(element_size(kInt8), 1u);
  EXPECT_EQ(element_size(kUInt8), 1u);
  EXPECT_STREQ(dtype_name(kInt32), "int32");
  EXPECT_STREQ(dtype_name(kInt8), "int8");
  EXPECT_STREQ(dtype_name(kUInt8), "uint8");
  EXPECT_EQ(kByte, kUInt8);
  EXPECT_EQ(kChar, kInt8);
  EXPECT_EQ(kInt, kInt32);
  EXPECT_EQ(kLong, kInt64);
  EXPECT_EQ(kFloat, kFloat32);
  EXPECT_EQ(kDouble, kFloat64);
  EXPECT_EQ(dtype_of<uint8_t>(), kUInt8);
  EXPECT_EQ(dtype_of<int8_t>(), kInt8);
  EXPECT_EQ(dtype_of<int32_t>(), kInt32);
  for (DType d : {kInt64, kInt32, kInt8, kUInt8}) {
    EXPECT_TRUE(is_integral(d)) << d;
    EXPECT_FALSE(is_floating(d)) << d;
  }
  EXPECT_FALSE(is_integral(kBool));
  EXPECT_TRUE(is_integral(kBool, /*include_bool=*/true));
  EXPECT_FALSE(is_integral(kFloat32, true));
}

TEST(IntDtypes, PromoteTypesFollowsPyTorchsTable) {
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kUInt8, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt8, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kInt8, kBool), kInt8);
  EXPECT_EQ(promote_types(kUInt8, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kInt32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kFloat32, kInt8), kFloat32);
  // PyTorch gives int16; minidl has no int16 and takes the next integer dtype that holds both.
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt32);
  EXPECT_EQ(promote_types(kInt8, kUInt8), kInt32);
}

TEST(IntDtypes, ResultTypeWithScalarsAndZeroDimTensors) {
  Tensor img = u8({1, 2, 3});
  EXPECT_EQ(result_type(img, 10), kUInt8);    // a wrapped integer stays in the tensor's dtype
  EXPECT_EQ(result_type(img, 2.5), kFloat32);  // a wrapped float lifts to the default float
  EXPECT_EQ(result_type(img, true), kUInt8);
  EXPECT_EQ(result_type({i32({1, 2}), Tensor::from_vector<int64_t>({5}).reshape({})}), kInt32);  // 0-d same category
  EXPECT_EQ(result_type({img, Tensor::from_vector<int8_t>({-1}).reshape({})}), kUInt8);
  // A 0-d tensor of a higher category keeps its own size: uint8 [3] with float64 0-d is float64.
  EXPECT_EQ(result_type({img, Tensor::from_vector<double>({0.5}).reshape({})}), kFloat64);
  EXPECT_EQ(result_type({img, i8({1, 2, 3})}), kInt32);
  EXPECT_EQ(result_type(Tensor::from_vector<bool>({true}), 3), kInt64);
}

TEST(IntDtypes, CanCastRules) {
  EXPECT_TRUE(can_cast(kInt64, kUInt8));  // within the integers, any direction
  EXPECT_TRUE(can_cast(kUInt8, kInt8));
  EXPECT_TRUE(can_cast(kBool, kUInt8));
  EXPECT_TRUE(can_cast(kUInt8, kFloat32));
  EXPECT_FALSE(can_cast(kFloat32, kUInt8));
  EXPECT_FALSE(can_cast(kFloat64, kInt32));
  EXPECT_FALSE(can_cast(kUInt8, kBool));
  EXPECT_FALSE(can_cast(kInt32, kBool));
}

TEST(IntDtypes, ArithmeticWrapsAsTwosComplement) {
  // torch.tensor([250, 3], dtype=torch.uint8) + 10 -> tensor([4, 13], dtype=torch.uint8)
  Tensor a = u8({250, 3}) + 10;
  EXPECT_EQ(a.dtype(), kUInt8);
  EXPECT_EQ(a.to_vector<uint8_t>(), (std::vector<uint8_t>{4, 13}));
  EXPECT_EQ((u8({3, 10}) - 5).to_vector<uint8_t>(), (std::vector<uint8_t>{254, 5}));
  EXPECT_EQ((u8({16, 3}) * u8({16, 3})).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 9}));
  EXPECT_EQ((i8({127, -128}) + 1).to_vector<int8_t>(), (std::vector<int8_t>{-128, -127}));
  EXPECT_EQ(neg(u8({1, 0})).to_vector<uint8_t>(), (std::vector<uint8_t>{255, 0}));
  EXPECT_EQ(neg(i32({5, -7})).to_vector<int32_t>(), (std::vector<int32_t>{-5, 7}));
  // -1 as a uint8 operand is 255: torch.tensor([1], dtype=torch.uint8) + (-1) -> tensor([0])
  EXPECT_EQ((u8({1, 2}) + (-1)).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1}));
}

TEST(IntDtypes, MixedOperandsPromote) {
  // uint8 + int8 -> int32 here (int16 in PyTorch): 200 + (-1) = 199, not a wrapped byte.
  Tensor s = u8({200, 0}) + i8({-1, -128});
  EXPECT_EQ(s.dtype(), kInt32);
  EXPECT_EQ(s.to_vector<int32_t>(), (std::vector<int32_t>{199, -128}));
  Tensor t = u8({255}) + i32({1});
  EXPECT_EQ(t.dtype(), kInt32);
  EXPECT_EQ(t.item<int32_t>(), 256);
  Tensor l = i8({-3}) * Tensor::from_vector<int64_t>({4});
  EXPECT_EQ(l.dtype(), kInt64);
  EXPECT_EQ(l.item<int64_t>(), -12);
  Tensor f = u8({3, 4}) * 0.5;
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1.5f, 2.f}));
  Tensor q = div(u8({7, 1}), u8({2, 4}));  // true division: float32
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{3.5f, 0.25f}));
}

TEST(IntDtypes, FloorDivideRemainderAndAbs) {
  // torch.floor_divide(tensor([-7, 7], int32), 2) -> [-4, 3]; torch.remainder(.., 2) -> [1, 1]
  EXPECT_EQ(floor_divide(i32({-7, 7}), i32({2, 2})).to_vector<int32_t>(), (std::vector<int32_t>{-4, 3}));
  EXPECT_EQ(remainder(i32({-7, 7}), i32({2, -2})).to_vector<int32_t>(), (std::vector<int32_t>{1, -1}));
  EXPECT_EQ(floor_divide(u8({7, 255}), u8({2, 16})).to_vector<uint8_t>(), (std::vector<uint8_t>{3, 15}));
  EXPECT_EQ(remainder(i8({-7, 100}), i8({3, 7})).to_vector<int8_t>(), (std::vector<int8_t>{2, 2}));
  EXPECT_EQ(abs(i8({-5, 7})).to_vector<int8_t>(), (std::vector<int8_t>{5, 7}));
  EXPECT_EQ(abs(u8({200, 0})).to_vector<uint8_t>(), (std::vector<uint8_t>{200, 0}));
}

TEST(IntDtypes, InPlaceKeepsTheDestinationDtype) {
  Tensor a = u8({250, 1});
  a.add_(i32({10, 1}));  // int32 fits uint8's category: wraps
  EXPECT_EQ(a.dtype(), kUInt8);
  EXPECT_EQ(a.to_vector<uint8_t>(), (std::vector<uint8_t>{4, 2}));
  expect_error([&] { a.add_(Tensor::from_vector<float>({0.5f, 0.5f})); },
               {"result type float32 can't be cast to the desired output type uint8"});
}

TEST(IntDtypes, ConversionTruncatesTowardZero) {
  // torch.tensor([0.9, 2.9, 255.0, 127.99]).to(torch.uint8) -> [0, 2, 255, 127]
  Tensor f = Tensor::from_vector<float>({0.9f, 2.9f, 255.f, 127.99f});
  EXPECT_EQ(f.to(kUInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 2, 255, 127}));
  EXPECT_EQ(Tensor::from_vector<double>({-2.9, 2.9, -0.5}).to(kInt8).to_vector<int8_t>(),
            (std::vector<int8_t>{-2, 2, 0}));
  EXPECT_EQ(Tensor::from_vector<double>({-2.9e9, 3.5}).to(kInt32).to_vector<int32_t>()[1], 3);
  // Out-of-range values go through int64 and wrap: deterministic, where PyTorch leaves them undefined.
  EXPECT_EQ(Tensor::from_vector<float>({-1.f, 256.f, 300.f}).to(kUInt8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 44}));
  EXPECT_EQ(Tensor::from_vector<int64_t>({300, -1}).to(kUInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{44, 255}));
  EXPECT_EQ(u8({200, 1}).to(kInt8).to_vector<int8_t>(), (std::vector<int8_t>{-56, 1}));
  EXPECT_EQ(Tensor::from_vector<bool>({true, false}).to(kUInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(u8({2, 0}).to(kBool).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(u8({255}).to(kFloat32).item<float>(), 255.f);
  EXPECT_EQ(i8({-128}).to(kFloat64).item<double>(), -128.0);
  EXPECT_EQ(full({2}, -1, kUInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{255, 255}));
  EXPECT_EQ(zeros({3}, kInt8).to_vector<int8_t>(), (std::vector<int8_t>{0, 0, 0}));
}

TEST(IntDtypes, ComparisonsAndWhere) {
  // uint8 200 against int8 -1: both become int32 first, so 200 > -1 holds.
  EXPECT_EQ(gt(u8({200, 0}), i8({-1, 0})).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(eq(i32({3, 4}), 3).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(lt(i8({-3, 4}), i8({0, 0})).to_vector<bool>(), (std::vector<bool>{true, false}));
  Tensor cond = Tensor::from_vector<bool>({true, false});
  Tensor w = where(cond, u8({1, 2}), u8({7, 8}));
  EXPECT_EQ(w.dtype(), kUInt8);
  EXPECT_EQ(w.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 8}));
  Tensor m = where(cond, u8({1, 2}), i32({-7, -8}));
  EXPECT_EQ(m.dtype(), kInt32);
  EXPECT_EQ(m.to_vector<int32_t>(), (std::vector<int32_t>{1, -8}));
}

TEST(IntDtypes, SumGivesInt64AndMeanRefuses) {
  // torch.tensor([200, 100], dtype=torch.uint8).sum() -> tensor(300) (int64)
  Tensor s = sum(u8({200, 100}));
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(s.item<int64_t>(), 300);
  Tensor rows = sum(Tensor::from_vector<int8_t>({-100, -100, 1, 2}, {2, 2}), {1});
  EXPECT_EQ(rows.dtype(), kInt64);
  EXPECT_EQ(rows.to_vector<int64_t>(), (std::vector<int64_t>{-200, 3}));
  EXPECT_EQ(sum(i32({2000000000, 2000000000})).item<int64_t>(), 4000000000LL);
  EXPECT_EQ(sum(Tensor::from_vector<bool>({true, true, false})).item<int64_t>(), 2);
  expect_error([] { mean(u8({1, 2})); },
               {"mean(): could not infer output dtype", "floating point or complex dtype", "uint8"});
}

TEST(IntDtypes, MaxMinArgmax) {
  Tensor x = Tensor::from_vector<uint8_t>({3, 250, 7, 0, 9, 200}, {2, 3});
  EXPECT_EQ(max(x).item<uint8_t>(), 250);
  EXPECT_EQ(max(x).dtype(), kUInt8);
  EXPECT_EQ(min(x).item<uint8_t>(), 0);  // not -x: negation wraps for unsigned bytes
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  Tensor y = Tensor::from_vector<int8_t>({-3, -128, 127, 5}, {2, 2});
  EXPECT_EQ(min(y).item<int8_t>(), -128);
  EXPECT_EQ(argmax(y, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(max(i32({-5, 40000, 3})).item<int32_t>(), 40000);
}

TEST(IntDtypes, IndexSelectAndCat) {
  Tensor img = Tensor::from_vector<uint8_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor picked = index_select(img, 0, i32({2, 0}));  // int32 indices, as libtorch accepts
  EXPECT_EQ(picked.dtype(), kUInt8);
  EXPECT_EQ(picked.to_vector<uint8_t>(), (std::vector<uint8_t>{5, 6, 1, 2}));
  EXPECT_EQ(index_select(img, 1, Tensor::from_vector<int64_t>({1})).to_vector<uint8_t>(),
            (std::vector<uint8_t>{2, 4, 6}));
  expect_error([&] { index_select(img, 0, u8({0})); }, {"index_select: expected a 1-D int64 or int32 index", "uint8"});
  Tensor c = cat({u8({255}), i32({-1})});
  EXPECT_EQ(c.dtype(), kInt32);
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{255, -1}));
  EXPECT_EQ(cat({i8({1}), i8({-2})}).to_vector<int8_t>(), (std::vector<int8_t>{1, -2}));
}

TEST(IntDtypes, FloatingOnlyOpsRefuseOrPromote) {
  Tensor e = exp(u8({0}));  // exp promotes integers to float32, as PyTorch's
  EXPECT_EQ(e.dtype(), kFloat32);
  EXPECT_EQ(e.item<float>(), 1.f);
  expect_error([] { softmax(Tensor::from_vector<uint8_t>({1, 2}, {1, 2}), 1); }, {"expected a floating", "uint8"});
  expect_error([] { matmul(Tensor::from_vector<int32_t>({1, 2}, {1, 2}), Tensor::from_vector<int32_t>({1, 2}, {2, 1})); },
               {"matmul: expected floating tensors", "int32"});
  expect_error([] { Tensor x = i8({1}); x.requires_grad_(); }, {"only floating tensors can require grad", "int8"});
}

TEST(IntDtypes, ItemVectorsAndPrinting) {
  EXPECT_EQ(Tensor::from_vector<int8_t>({-5}).reshape({}).item<int8_t>(), -5);
  EXPECT_EQ(Tensor::from_vector<uint8_t>({200}).item<int64_t>(), 200);
  EXPECT_EQ(Tensor::from_vector<int32_t>({-70000}).item<double>(), -70000.0);
  std::ostringstream os;
  os << u8({1, 255});
  EXPECT_EQ(os.str(), "tensor([  1, 255], shape=[2], dtype=uint8)");
  std::ostringstream os8;
  os8 << i8({-128, 7});
  EXPECT_EQ(os8.str(), "tensor([-128,    7], shape=[2], dtype=int8)");
  std::ostringstream os32;
  os32 << Tensor::from_vector<int32_t>({1, -20, 300, 4}, {2, 2});
  EXPECT_EQ(os32.str(), "tensor([[  1, -20],\n        [300,   4]], shape=[2, 2], dtype=int32)");
}

TEST(IntDtypes, SafetensorsRoundTrip) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("minidl_int_dtypes_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "ints.safetensors").string();
  safetensors::save(path, {{"img", Tensor::from_vector<uint8_t>({0, 128, 255, 7}, {2, 2})},
                           {"q", i8({-128, 127, -1})},
                           {"idx", i32({-70000, 5})}});
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(bytes.find(R"("dtype":"U8")"), std::string::npos);
  EXPECT_NE(bytes.find(R"("dtype":"I8")"), std::string::npos);
  EXPECT_NE(bytes.find(R"("dtype":"I32")"), std::string::npos);
  safetensors::Contents back = safetensors::load(path);
  EXPECT_EQ(back.tensors.at("img").dtype(), kUInt8);
  EXPECT_EQ(back.tensors.at("img").shape(), (Shape{2, 2}));
  EXPECT_EQ(back.tensors.at("img").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 128, 255, 7}));
  EXPECT_EQ(back.tensors.at("q").to_vector<int8_t>(), (std::vector<int8_t>{-128, 127, -1}));
  EXPECT_EQ(back.tensors.at("idx").to_vector<int32_t>(), (std::vector<int32_t>{-70000, 5}));
  fs::remove_all(dir);
}

TEST(IntDtypes, DLPackRoundTrip) {
  struct Case {
    Tensor t;
    uint8_t code, bits;
  };
  for (const Case& c : {Case{u8({0, 200, 255}), kDLUInt, 8}, Case{i8({-128, 0, 127}), kDLInt, 8},
                        Case{i32({-70000, 1, 70000}), kDLInt, 32}}) {
    DLManagedTensor* m = to_dlpack(c.t);
    EXPECT_EQ(m->dl_tensor.dtype.code, c.code);
    EXPECT_EQ(m->dl_tensor.dtype.bits, c.bits);
    EXPECT_EQ(m->dl_tensor.dtype.lanes, 1);
    Tensor back = from_dlpack(m);
    EXPECT_EQ(back.dtype(), c.t.dtype());
    EXPECT_EQ(back.raw_data(), c.t.raw_data()) << "zero-copy";
    EXPECT_TRUE(eq(back, c.t).to_vector<bool>() == (std::vector<bool>{true, true, true}));
  }
}

}  // namespace

}  // namespace minidl::int_dtypes_test
