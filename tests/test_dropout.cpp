// dropout: identity in evaluation, the drop rate and scaling in training, reproducibility per seed,
// the gradient equal to the mask, the p = 0 and p = 1 edges, and bad probabilities.
#include <gtest/gtest.h>

#include <cmath>

#include "minidl.h"

namespace minidl::dropout_test {

TEST(Dropout, EvalIsIdentity) {
  Tensor x = randn({4, 5});
  Tensor out = dropout(x, 0.5, /*training=*/false);
  EXPECT_EQ(out.to_vector<float>(), x.to_vector<float>());
}

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  manual_seed(1);
  const double p = 0.3;
  const int64_t n = 200000;
  Tensor x = full({n}, 2.0);
  std::vector<float> out = dropout(x, p).to_vector<float>();
  int64_t dropped = 0;
  for (float v : out) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      ASSERT_FLOAT_EQ(v, static_cast<float>(2.0 / (1 - p)));
    }
  }
  // The standard deviation of the fraction is sqrt(p(1-p)/n) ~ 0.001; allow five of them.
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.005);
}

TEST(Dropout, SameSeedSameMask) {
  Tensor x = ones({1000}, kFloat64);
  manual_seed(42);
  std::vector<double> a = dropout(x, 0.5).to_vector<double>();
  manual_seed(42);
  std::vector<double> b = dropout(x, 0.5).to_vector<double>();
  EXPECT_EQ(a, b);
  std::vector<double> c = dropout(x, 0.5).to_vector<double>();
  EXPECT_NE(a, c);  // the generator moved on
}

TEST(Dropout, GradientIsTheMask) {
  manual_seed(3);
  const double p = 0.4;
  Tensor x = (rand({50, 40}, kFloat64) + 0.5).detach().requires_grad_();  // no zeros: out / x is the mask
  Tensor out = dropout(x, p);
  out.backward(ones(out.shape(), kFloat64));
  std::vector<double> xv = x.to_vector<double>(), ov = out.to_vector<double>(), gv = x.grad().to_vector<double>();
  int64_t kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    ASSERT_NEAR(gv[i], ov[i] / xv[i], 1e-12) << i;
    ASSERT_TRUE(gv[i] == 0.0 || std::abs(gv[i] - 1 / (1 - p)) < 1e-12) << gv[i];
    kept += gv[i] != 0.0;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, static_cast<int64_t>(xv.size()));
}

TEST(Dropout, GradcheckWithAFixedMask) {
  // Reseeding inside f gives every evaluation the same mask, so central differences apply.
  Tensor x = randn({3, 7}, kFloat64).requires_grad_();
  auto r = gradcheck(
      [](const std::vector<Tensor>& in) {
        manual_seed(9);
        return dropout(in[0], 0.5);
      },
      {x});
  EXPECT_TRUE(r) << r.message;
}

TEST(Dropout, EdgeProbabilities) {
  Tensor x = randn({6, 7}).requires_grad_();
  EXPECT_EQ(dropout(x, 0.0).to_vector<float>(), x.to_vector<float>());

  Tensor out = dropout(x, 1.0);
  for (float v : out.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  out.sum().backward();
  for (float g : x.grad().to_vector<float>()) EXPECT_EQ(g, 0.0f);
}

TEST(Dropout, BadProbability) {
  Tensor x = ones({3});
  for (double p : {-0.1, 1.5, std::nan("")}) {
    try {
      dropout(x, p);
      ADD_FAILURE() << "no error for p = " << p;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected a probability p in [0, 1]"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(dropout(x, 2.0, /*training=*/false), Error);
}

}  // namespace minidl::dropout_test
