// diagonal, diag_embed, diag, trace, triu_indices and tril_indices: values against loops over the
// elements, diagonal sharing storage as a view, float64 gradient checks, and bad input.
#include <gtest/gtest.h>

#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::diagonal_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {


// x[i, j + offset] (offset >= 0) or x[i - offset, j] along the diagonal of a [rows, cols] matrix.
std::vector<double> diagonal_by_loop(const std::vector<double>& x, int64_t rows, int64_t cols, int64_t offset) {
  std::vector<double> out;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (j - i == offset) out.push_back(x[static_cast<size_t>(i * cols + j)]);
  return out;
}

}  // namespace

TEST(Diagonal, EveryOffsetOfAMatrix) {
  const Tensor x = randn({4, 6}, kFloat64);
  const std::vector<double> xs = values(x);
  for (int64_t offset = -5; offset <= 7; ++offset) {
    SCOPED_TRACE(offset);
    EXPECT_EQ(values(diagonal(x, offset)), diagonal_by_loop(xs, 4, 6, offset));
    // Dims given the other way round: the transpose's diagonal.
    EXPECT_EQ(values(diagonal(x, offset, 1, 0)), diagonal_by_loop(values(x.t()), 6, 4, offset));
  }
}

TEST(Diagonal, IsAViewOverBatchDims) {
  const Tensor x = randn({2, 3, 5}, kFloat64);
  // Dims 2 and 0, below the main diagonal: d[j, k] = x[k, j, k + 1], [3, min(5 - 1, 2)] = [3, 2].
  const Tensor d = diagonal(x, -1, -1, 0);
  ASSERT_EQ(d.shape(), (Shape{3, 2}));
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t k = 0; k < 2; ++k)
      EXPECT_EQ(d.index({j, k}).item<double>(), x.index({k, j, k + 1}).item<double>()) << j << ", " << k;
  // A write through the view lands in x.
  Tensor view = x.diagonal();
  view.fill_(7.0);
  EXPECT_EQ(x.index({1, 1, 0}).item<double>(), 7.0);
  EXPECT_EQ(x.index({1, 1, 1}).item<double>(), 7.0);
}

TEST(Diagonal, GradientsInFloat64) {
  expect_gradcheck("diagonal", [](const std::vector<Tensor>& in) { return diagonal(in[0], -1, 2, 1) * 2.0; },
                   {leaf({2, 4, 3})});
  expect_gradcheck("diag_embed", [](const std::vector<Tensor>& in) { return diag_embed(in[0], 1); }, {leaf({2, 3})});
  expect_gradcheck("diag of a vector", [](const std::vector<Tensor>& in) { return diag(in[0], -2); }, {leaf({3})});
  expect_gradcheck("diag of a matrix", [](const std::vector<Tensor>& in) { return diag(in[0], 1); }, {leaf({3, 4})});
  expect_gradcheck("trace", [](const std::vector<Tensor>& in) { return trace(in[0]); }, {leaf({3, 5})});
}

TEST(Diagonal, DiagEmbedAndDiagPlaceTheValues) {
  const Tensor v = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor e = diag_embed(v, -1);  // [2, 4, 4], v[b] below the main diagonal
  ASSERT_EQ(e.shape(), (Shape{2, 4, 4}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const double want = i - j == 1 ? v.index({b, j}).item<double>() : 0.0;
        EXPECT_EQ(e.index({b, i, j}).item<double>(), want) << b << " " << i << " " << j;
      }
  // Other dims: the values run along dim 0 and 2 of a [3, 2, 3] result.
  const Tensor e02 = diag_embed(v, 0, 0, 2);
  ASSERT_EQ(e02.shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(e02.index({2, 1, 2}).item<double>(), 6.0);
  EXPECT_EQ(e02.index({2, 1, 1}).item<double>(), 0.0);
  EXPECT_TRUE(diag(Tensor::from_vector<double>({1, 1, 1})).equal(eye(3, kFloat64)));
  EXPECT_EQ(values(diag(e.index({1}), -1)), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).trace().item<double>(), 5.0);
}

TEST(Diagonal, TriangleIndicesMatchTriuAndTril) {
  for (int64_t offset : {-2, 0, 1, 3}) {
    SCOPED_TRACE(offset);
    const Tensor up = triu_indices(3, 5, offset), low = tril_indices(3, 5, offset);
    EXPECT_EQ(up.dtype(), kInt64);
    // Marking the listed cells rebuilds triu / tril of ones.
    Tensor marks_up = zeros({3, 5}), marks_low = zeros({3, 5});
    marks_up.index_put_({up[0], up[1]}, 1.0);
    marks_low.index_put_({low[0], low[1]}, 1.0);
    EXPECT_TRUE(marks_up.equal(triu(ones({3, 5}), offset)));
    EXPECT_TRUE(marks_low.equal(tril(ones({3, 5}), offset)));
  }
  // Row by row.
  EXPECT_EQ(triu_indices(3, 3).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 1, 1, 2, 0, 1, 2, 1, 2, 2}));
  EXPECT_EQ(tril_indices(2, 2, 0, kInt32).dtype(), kInt32);
}

TEST(Diagonal, BadInputSaysWhatWasExpected) {
  expect_error([] { diagonal(zeros({3})); }, {"diagonal", "at least 2 dimensions", "got 1"});
  expect_error([] { diagonal(zeros({3, 3}), 0, 1, -1); }, {"diagonal", "two different dimensions"});
  expect_error([] { diag(zeros({2, 2, 2})); }, {"diag", "1-D or 2-D", "[2, 2, 2]"});
  expect_error([] { trace(zeros({3})); }, {"trace", "2-D"});
  expect_error([] { triu_indices(-1, 3); }, {"triu_indices", "row and col >= 0"});
  expect_error([] { diag_embed(zeros({})); }, {"diag_embed", "scalar"});
}

}  // namespace minidl::diagonal_test
