// Memory formats: channels-last strides, is_contiguous(format), contiguous(format) and its gradient.
#include <gtest/gtest.h>

#include "minidl.h"

namespace minidl::memory_format_test {

TEST(MemoryFormat, ChannelsLastStridesAreNhwcInNchwOrder) {
  const Tensor t = Tensor::empty({2, 3, 4, 5}, kFloat32, Device::cpu(), MemoryFormat::ChannelsLast);
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(t.strides(), (Strides{60, 1, 15, 3}));
  EXPECT_TRUE(t.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_FALSE(t.is_contiguous(MemoryFormat::Contiguous));
  const Tensor plain = zeros({2, 3, 4, 5});
  EXPECT_TRUE(plain.is_contiguous(MemoryFormat::Contiguous));
  EXPECT_FALSE(plain.is_contiguous(MemoryFormat::ChannelsLast));
  // One channel (or one pixel) lies the same in both: either format holds.
  EXPECT_TRUE(zeros({4, 1, 3, 3}).is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(zeros({4, 6, 1, 1}).is_contiguous(MemoryFormat::ChannelsLast));
  // Not 4-D: never channels-last.
  EXPECT_FALSE(zeros({2, 3, 4}).is_contiguous(MemoryFormat::ChannelsLast));
}

TEST(MemoryFormat, ContiguousChannelsLastKeepsValuesAndPassesGradients) {
  manual_seed(41);
  const Tensor x = randn({2, 3, 4, 5}, kFloat64).requires_grad_();
  const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  ASSERT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(cl.to_vector<double>(), x.to_vector<double>());  // the same values in NCHW order
  // The bytes are NHWC: element (n, c, h, w) sits at ((n * H + h) * W + w) * C + c.
  const std::vector<double> v = x.to_vector<double>();
  const double* raw = cl.data<double>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 5; ++w)
          ASSERT_EQ(raw[((n * 4 + h) * 5 + w) * 3 + c], v[static_cast<size_t>(((n * 3 + c) * 4 + h) * 5 + w)]);
  EXPECT_EQ(cl.contiguous(MemoryFormat::ChannelsLast).data<double>(), raw);  // already in the format: itself
  const Tensor back = cl.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(back.to_vector<double>(), v);
  // The copy is in the graph: its gradient comes back in x's layout.
  const Tensor up = randn({2, 3, 4, 5}, kFloat64);
  (cl * up).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().to_vector<double>(), up.to_vector<double>());
  const auto r = gradcheck([](const std::vector<Tensor>& in) { return in[0].contiguous(MemoryFormat::ChannelsLast) * 2.0; },
                           {randn({1, 2, 3, 2}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(MemoryFormat, ChannelsLastTensorsWorkInOrdinaryOps) {
  manual_seed(42);
  const Tensor x = randn({2, 4, 3, 3});
  const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(allclose(relu(cl) + cl.sum(1, true), relu(x) + x.sum(1, true), 1e-6, 1e-6));
  EXPECT_EQ(flatten(cl, 1).to_vector<float>(), flatten(x, 1).to_vector<float>());
}

TEST(MemoryFormat, ChannelsLastNeedsFourDimensions) {
  try {
    zeros({2, 3}).contiguous(MemoryFormat::ChannelsLast);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4-D"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::empty({2, 3, 4}, kFloat32, Device::cpu(), MemoryFormat::ChannelsLast), Error);
}

}  // namespace minidl::memory_format_test
