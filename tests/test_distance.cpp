// normalize, cosine_similarity, pairwise_distance and their modules: values by hand, PyTorch's
// treatment of near-zero vectors, float64 gradient checks, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "minidl.h"
#include "nn/nn.h"
#include "ops/gradcheck.h"
#include "test_util.h"

namespace minidl::distance_test {

using minidl::testing::expect_error;

namespace {

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

void expect_values(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }

}  // namespace

TEST(Distance, NormalizeScalesEachSliceToUnitNorm) {
  const Tensor x = Tensor::from_vector<double>({3, 4, 0, 0, 1, 1}, {3, 2});
  expect_values(normalize(x), {0.6, 0.8, 0, 0, 1 / std::sqrt(2.0), 1 / std::sqrt(2.0)}, 1e-15);  // dim 1, p 2
  expect_values(normalize(x, 1, 0), {0.75, 0.8, 0, 0, 0.25, 0.2}, 1e-15);  // columns sum to 4 and 5
  expect_values(nn::functional::normalize(x, 2, -1, 10.0), {0.3, 0.4, 0, 0, 0.1, 0.1}, 1e-15);  // eps floors the norm
}

TEST(Distance, CosineSimilarityOfBroadcastInputs) {
  const Tensor a = Tensor::from_vector<double>({1, 0, 1, 1, 0, 0}, {3, 2});
  const Tensor b = Tensor::from_vector<double>({2, 0}, {1, 2});
  expect_values(cosine_similarity(a, b), {1, 1 / std::sqrt(2.0), 0}, 1e-15);  // a zero row: 0, not NaN
  expect_values(cosine_similarity(a.t(), b.t(), 0), {1, 1 / std::sqrt(2.0), 0}, 1e-15);
  // Float32 of large, nearly parallel vectors stays within [-1, 1].
  const Tensor big = full({1, 64}, 1e18, kFloat32);
  EXPECT_LE(cosine_similarity(big, big).item<float>(), 1.0f);
  nn::CosineSimilarity module(nn::CosineSimilarityOptions().dim(0));
  expect_values(module(a.t(), b.t()), values(cosine_similarity(a.t(), b.t(), 0)), 0);
  std::ostringstream os;
  os << *module;
  EXPECT_EQ(os.str(), "CosineSimilarity(dim=0, eps=1e-08)");
}

TEST(Distance, PairwiseDistanceAddsEpsToTheDifference) {
  const Tensor a = Tensor::from_vector<double>({0, 0, 1, 1}, {2, 2}), b = Tensor::from_vector<double>({3, 4, 1, 1}, {2, 2});
  const double e = 1e-6;
  expect_values(pairwise_distance(a, b), {std::hypot(-3 + e, -4 + e), std::hypot(e, e)}, 1e-12);
  expect_values(pairwise_distance(a, b, 1, 0), {7, 0}, 1e-15);
  EXPECT_EQ(pairwise_distance(a, b, 2, 1e-6, true).shape(), (Shape{2, 1}));
  nn::PairwiseDistance module(nn::PairwiseDistanceOptions().p(1).eps(0));
  expect_values(module(a, b), {7, 0}, 1e-15);
}

TEST(Distance, Gradcheck) {
  manual_seed(3);
  for (auto [name, f] : std::vector<std::pair<const char*, std::function<Tensor(const std::vector<Tensor>&)>>>{
           {"normalize", [](auto& in) { return normalize(in[0], 2, 1); }},
           {"normalize p=3 dim 0", [](auto& in) { return normalize(in[0], 3, 0); }},
           {"cosine_similarity", [](auto& in) { return cosine_similarity(in[0], in[1]); }},
           {"pairwise_distance", [](auto& in) { return pairwise_distance(in[0], in[1]); }},
       }) {
    SCOPED_TRACE(name);
    const GradcheckResult r = gradcheck(f, {leaf({3, 5}), leaf({3, 5})});
    EXPECT_TRUE(r) << r.message;
  }
  // cosine_similarity broadcasting one row against many: the row's gradient sums over them.
  const GradcheckResult r = gradcheck([](auto& in) { return cosine_similarity(in[0], in[1], -1); },
                                      {leaf({4, 3}), leaf({1, 3})});
  EXPECT_TRUE(r) << r.message;
}

TEST(Distance, BadInput) {
  expect_error([] { normalize(zeros({2, 3}, kInt64)); }, {"normalize", "floating", "int64"});
  expect_error([] { normalize(zeros({2, 3}), 2, 2); }, {"normalize", "out of range", "got 2"});
  expect_error([] { cosine_similarity(zeros({2, 3}), zeros({4, 3})); }, {"cosine_similarity", "[2, 3]", "[4, 3]"});
  expect_error([] { pairwise_distance(zeros({2}, kInt64), zeros({2}, kInt64)); }, {"pairwise_distance", "int64"});
}

}  // namespace minidl::distance_test
