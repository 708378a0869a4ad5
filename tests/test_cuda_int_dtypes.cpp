// The integer dtypes int32, int8 and uint8 on CUDA, each kernel against the CPU one on the same
// random inputs: conversions between every pair of dtypes, fills, arithmetic (wrapping), comparisons,
// where, reductions, gathers and cat. Skips where no GPU is usable.
#include <string>
#include <vector>

#include "ops/elementwise_kernel.h"
#include "test_cuda_util.h"

namespace minidl::cuda_int_dtypes_test {

using namespace minidl::testing;

namespace {

const std::vector<DType> kNarrowInts = {kInt32, kInt8, kUInt8};
const std::vector<DType> kEveryDtype = {kFloat32, kFloat64, kInt64, kInt32, kInt8, kUInt8, kBool};

// Values in [-300, 300) converted on the CPU: the narrow types see every byte value, wrapped.
Tensor random_of(const Shape& shape, DType dtype) {
  Tensor u = uniform(shape, -300, 300, kFloat64);
  return dtype == kBool ? gt(u, 0) : u.to(dtype);
}

// A divisor with no zeros (integer division by zero is an error, not a value).
Tensor nonzero_of(const Shape& shape, DType dtype) {
  Tensor b = random_of(shape, dtype);
  return where(eq(b, 0), Scalar(1), b);
}

}  // namespace

TEST(CudaIntDtypes, ConversionsBetweenEveryPairMatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType from : kEveryDtype) {
    Tensor x = random_of({7, 9}, from);
    Tensor xt = x.transpose(0, 1);  // a strided source: the conversion kernel, not a memcpy
    for (DType to : kEveryDtype) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      EXPECT_TRUE(all_equal(x.to(gpu()).to(to), x.to(to)));
      EXPECT_TRUE(all_equal(xt.to(gpu()).to(to), xt.to(to)));
    }
  }
}

TEST(CudaIntDtypes, FillsMatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  for (DType d : kNarrowInts) {
    SCOPED_TRACE(dtype_name(d));
    for (double v : {-1.0, 7.0, 300.0, -129.0, 2.9}) {
      EXPECT_TRUE(all_equal(full({33}, v, d, gpu()), full({33}, v, d)));
    }
  }
}

TEST(CudaIntDtypes, ArithmeticMatchesTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType d : kNarrowInts) {
    SCOPED_TRACE(dtype_name(d));
    Tensor a = random_of({6, 37}, d), b = random_of({6, 37}, d), row = nonzero_of({37}, d);
    Tensor divisor = nonzero_of({6, 37}, d);
    Tensor ga = a.to(gpu()), gb = b.to(gpu()), grow = row.to(gpu()), gdiv = divisor.to(gpu());
    EXPECT_TRUE(all_equal(add(ga, gb), add(a, b)));
    EXPECT_TRUE(all_equal(sub(ga, gb), sub(a, b)));
    EXPECT_TRUE(all_equal(mul(ga, gb), mul(a, b)));
    EXPECT_TRUE(all_equal(mul(ga, grow), mul(a, row)));  // broadcast
    EXPECT_TRUE(all_equal(ga + 7, a + 7));                 // a wrapped number stays in d
    EXPECT_TRUE(all_equal(ga * 0.5, a * 0.5));             // float32
    EXPECT_TRUE(all_close(div(ga, gdiv), div(a, divisor), 1e-6, 1e-6));
    EXPECT_TRUE(all_equal(floor_divide(ga, gdiv), floor_divide(a, divisor)));
    EXPECT_TRUE(all_equal(remainder(ga, gdiv), remainder(a, divisor)));
    EXPECT_TRUE(all_equal(floor_divide(ga, grow), floor_divide(a, row)));
    EXPECT_TRUE(all_equal(neg(ga), neg(a)));
    EXPECT_TRUE(all_equal(abs(ga), abs(a)));
    EXPECT_TRUE(all_equal(ga.transpose(0, 1) + gb.transpose(0, 1), a.transpose(0, 1) + b.transpose(0, 1)));
  }
  // Mixed dtypes: uint8 + int8 -> int32, int8 * int64 -> int64, on both devices alike.
  Tensor u = random_of({40}, kUInt8), s = random_of({40}, kInt8), l = random_of({40}, kInt64);
  Tensor gu = u.to(gpu()), gs = s.to(gpu()), gl = l.to(gpu());
  EXPECT_EQ(add(gu, gs).dtype(), kInt32);
  EXPECT_TRUE(all_equal(add(gu, gs), add(u, s)));
  EXPECT_TRUE(all_equal(mul(gs, gl), mul(s, l)));
}

TEST(CudaIntDtypes, ComparisonsAndWhereMatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType d : kNarrowInts) {
    SCOPED_TRACE(dtype_name(d));
    Tensor a = random_of({5, 21}, d), b = random_of({5, 21}, d), other = random_of({21}, kInt8);
    Tensor ga = a.to(gpu()), gb = b.to(gpu()), gother = other.to(gpu());
    EXPECT_TRUE(all_equal(lt(ga, gb), lt(a, b)));
    EXPECT_TRUE(all_equal(eq(ga, gb), eq(a, b)));
    EXPECT_TRUE(all_equal(ge(ga, gother), ge(a, other)));  // mixed: compared in the promoted dtype
    EXPECT_TRUE(all_equal(ne(ga, 3), ne(a, 3)));
    Tensor cond = gt(a, b);
    EXPECT_TRUE(all_equal(where(cond.to(gpu()), ga, gb), where(cond, a, b)));
    EXPECT_TRUE(all_equal(where(cond.to(gpu()), ga, gother), where(cond, a, other)));
  }
}

TEST(CudaIntDtypes, ReductionsMatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType d : kNarrowInts) {
    SCOPED_TRACE(dtype_name(d));
    Tensor x = random_of({4, 300, 3}, d);  // repeated values: ties take the first index on both
    Tensor gx = x.to(gpu());
    EXPECT_EQ(sum(gx).dtype(), kInt64);
    EXPECT_TRUE(all_equal(sum(gx), sum(x)));
    EXPECT_TRUE(all_equal(sum(gx, {1}), sum(x, {1})));
    EXPECT_TRUE(all_equal(sum(gx, {0, 2}, true), sum(x, {0, 2}, true)));
    EXPECT_TRUE(all_equal(max(gx), max(x)));
    EXPECT_TRUE(all_equal(min(gx), min(x)));
    EXPECT_TRUE(all_equal(argmax(gx, 1), argmax(x, 1)));
    EXPECT_TRUE(all_equal(argmin(gx, 2), argmin(x, 2)));
    EXPECT_TRUE(all_equal(amax(gx, {0}), amax(x, {0})));
  }
}

TEST(CudaIntDtypes, IndexSelectAndCatMatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType d : kNarrowInts) {
    SCOPED_TRACE(dtype_name(d));
    Tensor x = random_of({9, 5, 3}, d);
    Tensor idx = Tensor::from_vector<int64_t>({8, 0, 3, 3});
    Tensor idx32 = Tensor::from_vector<int32_t>({4, 1});
    Tensor gx = x.to(gpu());
    EXPECT_TRUE(all_equal(index_select(gx, 0, idx.to(gpu())), index_select(x, 0, idx)));  // whole slices
    EXPECT_TRUE(all_equal(index_select(gx, 1, idx32.to(gpu())), index_select(x, 1, idx32)));
    EXPECT_TRUE(all_equal(index_select(gx, 2, Tensor::from_vector<int64_t>({2, 0}).to(gpu())),
                          index_select(x, 2, Tensor::from_vector<int64_t>({2, 0}))));
    Tensor y = random_of({9, 2, 3}, kUInt8);
    EXPECT_TRUE(all_equal(cat({gx, y.to(gpu())}, 1), cat({x, y}, 1)));
  }
}

// Run-time kernels declare the narrow integer types too: the source is made on any machine.
TEST(CudaIntDtypes, ElementwiseKernelDeclaresNarrowIntegers) {
  cuda::ElementwiseKernel k("uint8_t a, int8_t b, int32_t c", "int32_t z", "z = a + b + c", "narrow");
  const std::string src = k.source();
  for (const char* part : {"const unsigned char a", "const signed char b", "const int c", "int& z"})
    EXPECT_NE(src.find(part), std::string::npos) << part << " not in:\n" << src;
  EXPECT_FALSE(k.differentiable());
}

TEST(CudaIntDtypes, ElementwiseKernelOnNarrowIntegersMatchesTheOps) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  cuda::ElementwiseKernel k("uint8_t a, int8_t b", "uint8_t wrapped, int32_t wide",
                            "wrapped = (uint8_t)(a + b); wide = (int32_t)a + (int32_t)b", "narrow_add");
  Tensor a = random_of({5, 8}, kUInt8), b = random_of({8}, kInt8);
  std::vector<Tensor> out = k.call({a.to(gpu()), b.to(gpu())});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(all_equal(out[0], add(a, b.to(kUInt8))));  // uint8 arithmetic wraps
  EXPECT_TRUE(all_equal(out[1], add(a, b)));             // uint8 + int8 -> int32
}

}  // namespace minidl::cuda_int_dtypes_test
